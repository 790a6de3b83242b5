#!/usr/bin/env python3
"""Small models from real exporters (skl2onnx) and onnx.helper for the ai.onnx.ml operators, with onnxruntime outputs.

    pip install skl2onnx   # plus numpy, onnx, onnxruntime, scikit-learn
    python3 Tests/Fixtures/compat/make_compat_fixtures.py

Each case is a directory <name>/ holding model.onnx, input_<name>.npy and output_<name>.npy (onnxruntime's
results; string outputs as output_<name>.txt, one per line); Tests/EngineTests/CompatFixtureTests.swift runs them. `zipmap/` has no outputs: the engine must reject it.
"""
import os
import shutil

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
ML = "ai.onnx.ml"


def save(name, model, feeds, run=True):
    directory = os.path.join(HERE, name)
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    data = model.SerializeToString()
    with open(os.path.join(directory, "model.onnx"), "wb") as f:
        f.write(data)
    for key, value in feeds.items():
        if value.dtype.kind in "OU":  # strings: a "#shape" line, then one value per line
            with open(os.path.join(directory, f"input_{key}.txt"), "w") as f:
                f.write("#shape " + " ".join(map(str, value.shape)) + "\n" + "".join(f"{v}\n" for v in value.ravel()))
        else:
            np.save(os.path.join(directory, f"input_{key}.npy"), value)
    if not run:
        return
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    for out, value in zip([o.name for o in session.get_outputs()], session.run(None, feeds)):
        if value.dtype.kind in "OU":  # .npy cannot hold strings without pickle: one label per line
            with open(os.path.join(directory, f"output_{out}.txt"), "w") as f:
                f.write("".join(f"{v}\n" for v in value.ravel()))
        else:
            np.save(os.path.join(directory, f"output_{out}.npy"), value)


def ml_model(node, inputs, outputs, ml_opset=3):
    graph = helper.make_graph([node], node.op_type.lower(), inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, ml_opset)],
                              producer_name="osprey-compat-fixtures")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def tensor(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def sklearn_cases(rng):
    from skl2onnx import to_onnx
    from sklearn.datasets import make_classification, make_regression
    from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier, RandomForestRegressor
    from sklearn.linear_model import LinearRegression, LogisticRegression
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import Binarizer, MinMaxScaler, Normalizer, StandardScaler
    from sklearn.svm import SVC, SVR, LinearSVC

    x, y = make_classification(n_samples=120, n_features=6, n_informative=4, n_classes=3, random_state=0)
    xb, yb = make_classification(n_samples=120, n_features=6, random_state=1)
    xr, yr = make_regression(n_samples=120, n_features=6, n_targets=2, random_state=2)
    x, xb, xr = (a.astype(np.float32) for a in (x, xb, xr))
    yb = yb * 3 + 2  # labels 2 and 5: the engine must map class indices to labels
    cases = {
        "skl_logreg_multi": (LogisticRegression(max_iter=300).fit(x, y), x),
        "skl_logreg_binary": (LogisticRegression(max_iter=300).fit(xb, yb), xb),
        "skl_scaler_logreg": (make_pipeline(StandardScaler(), LogisticRegression(max_iter=300)).fit(x, y), x),
        "skl_minmax_normalizer_linreg": (make_pipeline(MinMaxScaler(), Normalizer(), LinearRegression()).fit(xr, yr), xr),
        "skl_binarizer": (Binarizer(threshold=0.2).fit(x), x),
        "skl_mlp": (MLPClassifier(hidden_layer_sizes=(8,), max_iter=200, random_state=0).fit(x, y), x),
        "skl_random_forest": (RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0).fit(x, y), x),
        "skl_random_forest_regressor": (RandomForestRegressor(n_estimators=3, max_depth=3, random_state=0).fit(xr, yr), xr),
        "skl_gradient_boosting_binary": (GradientBoostingClassifier(n_estimators=4, max_depth=2, random_state=0).fit(xb, yb), xb),
        "skl_gradient_boosting_multi": (GradientBoostingClassifier(n_estimators=2, max_depth=2, random_state=0).fit(x, y), x),
        "skl_svc_rbf_multi": (SVC().fit(x[:40], y[:40]), x),
        "skl_svc_rbf_binary": (SVC().fit(xb[:40], yb[:40]), xb),
        "skl_svc_poly_proba": (SVC(kernel="poly", degree=2, probability=True, random_state=0).fit(x[:60], y[:60]), x),
        "skl_svr_rbf": (SVR().fit(xr[:40], yr[:40, 0]), xr),
        "skl_linear_svc": (LinearSVC().fit(x, y), x),
    }
    for name, (model, data) in cases.items():
        options = {"zipmap": False} if hasattr(model, "predict_proba") or hasattr(model, "decision_function") else None
        try:
            onx = to_onnx(model, data[:1], options=options, target_opset={"": 17, ML: 3})
        except (NameError, RuntimeError, ValueError):  # estimators without a zipmap option
            onx = to_onnx(model, data[:1], target_opset={"": 17, ML: 3})
        rows = data[rng.choice(len(data), 5, replace=False)]
        save(name, onx, {onx.graph.input[0].name: rows})
    # Default export keeps ZipMap (a sequence of maps): the engine rejects it with advice.
    onx = to_onnx(cases["skl_logreg_multi"][0], x[:1], target_opset={"": 17, ML: 3})
    save("zipmap", onx, {onx.graph.input[0].name: x[:2]}, run=False)


def helper_cases(rng):
    x = rng.standard_normal((4, 5)).astype(np.float32)
    x[1, 2] = np.nan
    node = helper.make_node("Imputer", ["x"], ["y"], domain=ML, imputed_value_floats=[1.0, 2.0, 3.0, 4.0, 5.0], replaced_value_float=float("nan"))
    save("ml_imputer", ml_model(node, [tensor("x", TensorProto.FLOAT, [None, 5])], [tensor("y", TensorProto.FLOAT, [None, 5])]), {"x": x})

    x = rng.standard_normal((3, 6)).astype(np.float32)
    node = helper.make_node("ArrayFeatureExtractor", ["x", "i"], ["y"], domain=ML)
    model = ml_model(node, [tensor("x", TensorProto.FLOAT, [None, 6]), tensor("i", TensorProto.INT64, [None])],
                     [tensor("y", TensorProto.FLOAT, [None, None])])
    save("ml_array_feature_extractor", model, {"x": x, "i": np.array([4, 0, 4], np.int64)})

    for norm in ("L1", "L2", "MAX"):
        node = helper.make_node("Normalizer", ["x"], ["y"], domain=ML, norm=norm)
        model = ml_model(node, [tensor("x", TensorProto.FLOAT, [None, 6])], [tensor("y", TensorProto.FLOAT, [None, 6])])
        save(f"ml_normalizer_{norm.lower()}", model, {"x": x})

    node = helper.make_node("Scaler", ["x"], ["y"], domain=ML, offset=[0.5, 0.0, -0.5, 1.0, 0.0, 2.0], scale=[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    save("ml_scaler_double", ml_model(node, [tensor("x", TensorProto.DOUBLE, [None, 6])], [tensor("y", TensorProto.FLOAT, [None, 6])]),
         {"x": x.astype(np.float64)})

    # Linear classifier with string labels and SOFTMAX; linear regressor with two targets.
    coefficients = rng.standard_normal(3 * 6).astype(np.float32).tolist()
    node = helper.make_node("LinearClassifier", ["x"], ["label", "scores"], domain=ML, coefficients=coefficients,
                            intercepts=[0.1, -0.2, 0.3], classlabels_strings=["cat", "dog", "owl"], post_transform="SOFTMAX")
    model = ml_model(node, [tensor("x", TensorProto.FLOAT, [None, 6])],
                     [tensor("label", TensorProto.STRING, [None]), tensor("scores", TensorProto.FLOAT, [None, 3])], ml_opset=1)
    save("ml_linear_classifier_strings", model, {"x": x})
    node = helper.make_node("LinearRegressor", ["x"], ["y"], domain=ML, coefficients=coefficients[:12], intercepts=[1.0, -1.0], targets=2)
    save("ml_linear_regressor", ml_model(node, [tensor("x", TensorProto.FLOAT, [None, 6])], [tensor("y", TensorProto.FLOAT, [None, 2])], ml_opset=1),
         {"x": x})

    # Two hand-written trees exercising every branch rule and missing-value tracking, aggregated three ways.
    # onnxruntime wants each false child right after its parent.
    tree = dict(nodes_treeids=[0] * 7 + [1] * 3, nodes_nodeids=[0, 1, 2, 3, 4, 5, 6, 0, 1, 2],
                nodes_featureids=[0, 1, 0, 0, 2, 0, 0, 3, 0, 0], nodes_values=[0.0, 0.5, 0.0, 0.0, -0.2, 0.0, 0.0, 0.1, 0.0, 0.0],
                nodes_modes=["BRANCH_LEQ", "BRANCH_GT", "LEAF", "LEAF", "BRANCH_GTE", "LEAF", "LEAF", "BRANCH_LT", "LEAF", "LEAF"],
                nodes_truenodeids=[4, 3, 0, 0, 6, 0, 0, 2, 0, 0], nodes_falsenodeids=[1, 2, 0, 0, 5, 0, 0, 1, 0, 0],
                nodes_missing_value_tracks_true=[1, 0, 0, 0, 0, 0, 0, 0, 0, 0])
    leaves = [(0, 2), (0, 3), (0, 5), (0, 6), (1, 1), (1, 2)]
    xt = rng.standard_normal((6, 4)).astype(np.float32)
    xt[2, 0] = np.nan
    for function in ("SUM", "AVERAGE", "MIN", "MAX"):
        node = helper.make_node("TreeEnsembleRegressor", ["x"], ["y"], domain=ML, n_targets=2, aggregate_function=function,
                                target_treeids=[t for t, _ in leaves] * 2, target_nodeids=[n for _, n in leaves] * 2,
                                target_ids=[0] * 6 + [1] * 6, target_weights=[1.5, -2.0, 0.25, 3.0, 0.5, 0.75, -1.0, 2.0, 0.125, -0.5, 1.25, 4.0],
                                base_values=[0.1, 0.2], **tree)
        save(f"ml_tree_regressor_{function.lower()}", ml_model(node, [tensor("x", TensorProto.FLOAT, [None, 4])],
                                                                [tensor("y", TensorProto.FLOAT, [None, 2])]), {"x": xt})
    for transform in ("NONE", "LOGISTIC", "SOFTMAX_ZERO"):
        node = helper.make_node("TreeEnsembleClassifier", ["x"], ["label", "scores"], domain=ML, classlabels_int64s=[7, 8, 9],
                                class_treeids=[t for t, _ in leaves] * 2, class_nodeids=[n for _, n in leaves] * 2,
                                class_ids=[0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2], class_weights=[0.5, 0.25, 0.0, 0.75, 0.1, 0.9, 0.3, 0.6, 0.2, 0.0, 0.4, 0.35],
                                post_transform=transform, **tree)
        model = ml_model(node, [tensor("x", TensorProto.FLOAT, [None, 4])],
                         [tensor("label", TensorProto.INT64, [None]), tensor("scores", TensorProto.FLOAT, [None, 3])])
        save(f"ml_tree_classifier_{transform.lower()}", model, {"x": xt})


def tree_ensemble_cases(rng):
    """ai.onnx.ml opset 5 TreeEnsemble: leaves addressed separately, every comparison mode incl. set membership."""
    x = rng.standard_normal((7, 3)).astype(np.float32)
    x[0, 2], x[1, 0], x[2, 1] = 1.0, np.nan, 2.0  # hit the membership set, a missing value, and an EQ split
    splits = np.array([0.0, 0.5, 0.0, 2.0, -0.3, 0.2, 0.0], np.float32)
    common = dict(
        nodes_featureids=[0, 1, 2, 1, 2, 0, 1],
        nodes_modes=helper.make_tensor("m", TensorProto.UINT8, [7], [0, 3, 6, 4, 1, 2, 5]),
        nodes_splits=helper.make_tensor("s", TensorProto.FLOAT, [7], splits.tolist()),
        nodes_truenodeids=[1, 0, 2, 3, 4, 6, 7], nodes_trueleafs=[0, 1, 1, 1, 1, 1, 1],
        nodes_falsenodeids=[2, 1, 3, 4, 5, 6, 8], nodes_falseleafs=[0, 1, 0, 1, 1, 0, 1],
        nodes_missing_value_tracks_true=[1, 0, 0, 0, 0, 0, 0],
        membership_values=helper.make_tensor("mv", TensorProto.FLOAT, [3], [1.0, 3.0, float("nan")]),
        tree_roots=[0, 4], leaf_targetids=[0, 1, 0, 1, 0, 1, 0, 1, 0],
        leaf_weights=helper.make_tensor("w", TensorProto.FLOAT, [9], [0.5, -1.0, 2.0, 0.25, -0.75, 1.5, 3.0, -2.0, 0.125]))
    for function, name in ((1, "sum"), (0, "average"), (2, "min"), (3, "max")):
        node = helper.make_node("TreeEnsemble", ["x"], ["y"], domain=ML, n_targets=2, aggregate_function=function, **common)
        model = ml_model(node, [tensor("x", TensorProto.FLOAT, [None, 3])], [tensor("y", TensorProto.FLOAT, [None, 2])], ml_opset=5)
        save(f"ml_tree_ensemble_{name}", model, {"x": x})


def encoder_cases():
    """The categorical encoders: LabelEncoder (opsets 2 and 4), CategoryMapper, OneHotEncoder, FeatureVectorizer, and a
    scikit-learn pipeline that one-hot encodes string columns beside scaled numeric ones."""
    words = np.array(["owl", "cat", "emu", "dog", "cat", "yak"], dtype=object)
    node = helper.make_node("LabelEncoder", ["x"], ["y"], domain=ML, keys_strings=["cat", "dog", "owl"], values_int64s=[3, 1, 4],
                            default_int64=-7)
    save("ml_label_encoder_string_int", ml_model(node, [tensor("x", TensorProto.STRING, [None])], [tensor("y", TensorProto.INT64, [None])],
                                                 ml_opset=2), {"x": words})
    node = helper.make_node("LabelEncoder", ["x"], ["y"], domain=ML, keys_int64s=[0, 1, 2], values_strings=["low", "mid", "high"])
    save("ml_label_encoder_int_string", ml_model(node, [tensor("x", TensorProto.INT64, [None])], [tensor("y", TensorProto.STRING, [None])],
                                                 ml_opset=2), {"x": np.array([2, 0, 5, 1], np.int64)})
    node = helper.make_node("LabelEncoder", ["x"], ["y"], domain=ML, keys_floats=[0.5, -1.0, float("nan")], values_floats=[10.0, 20.0, 30.0],
                            default_float=-1.5)
    save("ml_label_encoder_float", ml_model(node, [tensor("x", TensorProto.FLOAT, [None, 2])], [tensor("y", TensorProto.FLOAT, [None, 2])],
                                            ml_opset=2), {"x": np.array([[0.5, float("nan")], [2.0, -1.0]], np.float32)})
    node = helper.make_node("CategoryMapper", ["x"], ["y"], domain=ML, cats_strings=["cat", "dog", "owl"], cats_int64s=[11, 22, 33],
                            default_int64=0)
    save("ml_category_mapper", ml_model(node, [tensor("x", TensorProto.STRING, [None])], [tensor("y", TensorProto.INT64, [None])]),
         {"x": words})
    node = helper.make_node("OneHotEncoder", ["x"], ["y"], domain=ML, cats_strings=["cat", "dog", "owl"], zeros=1)
    save("ml_one_hot_strings", ml_model(node, [tensor("x", TensorProto.STRING, [None, 2])], [tensor("y", TensorProto.FLOAT, [None, 2, 3])]),
         {"x": words.reshape(3, 2)})
    node = helper.make_node("OneHotEncoder", ["x"], ["y"], domain=ML, cats_int64s=[4, 2, 9, 1])
    save("ml_one_hot_ints", ml_model(node, [tensor("x", TensorProto.INT64, [None])], [tensor("y", TensorProto.FLOAT, [None, 4])]),
         {"x": np.array([9, 1, 3, 4, 2], np.int64)})
    node = helper.make_node("FeatureVectorizer", ["a", "b"], ["y"], domain=ML, inputdimensions=[3, 2])
    model = ml_model(node, [tensor("a", TensorProto.FLOAT, [None, 3]), tensor("b", TensorProto.FLOAT, [None, 2])],
                     [tensor("y", TensorProto.FLOAT, [None, 5])])
    save("ml_feature_vectorizer", model, {"a": np.arange(6, dtype=np.float32).reshape(2, 3) / 4,
                                          "b": np.array([[7, 8], [9, 10]], np.float32)})

    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import StringTensorType
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder
    rng = np.random.default_rng(7)
    x = np.stack([rng.choice(["red", "green", "blue"], 60), rng.choice(["S", "M", "L", "XL"], 60)], axis=1).astype(object)
    target = (x[:, 0] == "red").astype(int) + (x[:, 1] == "XL").astype(int)
    pipeline = Pipeline([("categories", OneHotEncoder(handle_unknown="ignore")),
                         ("classifier", LogisticRegression(max_iter=500))]).fit(x, target)
    model = to_onnx(pipeline, initial_types=[("x", StringTensorType([None, 2]))], options={id(pipeline): {"zipmap": False}},
                    target_opset={"": 17, ML: 3})
    rows = x[:5].copy()
    rows[1, 1] = "XXL"  # a category the encoder never saw: all zeros (handle_unknown="ignore")
    save("skl_one_hot_pipeline", model, {"x": rows})


def main():
    import sys
    if sys.argv[1:] == ["encoders"]:  # only these cases (the others stay as the exporter versions that made them wrote them)
        encoder_cases()
        return
    rng = np.random.default_rng(0)
    encoder_cases()
    helper_cases(rng)
    tree_ensemble_cases(rng)
    sklearn_cases(rng)
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(HERE) for f in fs)
    print(f"fixtures: {total} bytes")


if __name__ == "__main__":
    main()
