#!/usr/bin/env python3
"""Writes Tests/Fixtures/audio: spectral (DFT, STFT, MelWeightMatrix, window) and RoiAlign models as audio front ends
and two-stage detectors export them, each with inputs and onnxruntime's outputs (needs onnx and onnxruntime).

    python3 Tests/Fixtures/audio/make_audio_fixtures.py

Each case is a directory with model.onnx, input_<name>.npy and output_<name>.npy (onnxruntime CPU, graph
optimizations off). ONNX's own node tests cover each operator once on tiny inputs; these cover the shapes real models use
(one second of 16 kHz audio, n_fft 400 and 512, hop 160) and the attribute values the node tests leave out.
"""
import os
import shutil

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(10)


def model_of(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "audio", inputs, outputs, list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="osprey-fixtures")
    m.ir_version = 8 if opset < 20 else 9
    return m


def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def i64(name, value):
    return numpy_helper.from_array(np.array(value, dtype=np.int64), name)


def save_case(name, model, feeds, replaced=None, reference=None):
    """`replaced` overrides some of onnxruntime's outputs (with `reference` saying why, written to reference.txt)."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    outputs = dict(zip(names, session.run(names, feeds)))
    for k, v in (replaced or {}).items():
        print(f"  {name}.{k}: onnxruntime differs from the replacement by {np.abs(outputs[k] - v).max():.3g} (max|ref| {np.abs(v).max():.3g})")
        outputs[k] = v
    path = os.path.join(HERE, name)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    onnx.save(model, os.path.join(path, "model.onnx"))
    for k, v in feeds.items():
        np.save(os.path.join(path, f"input_{k}.npy"), v)
    for k, v in outputs.items():
        np.save(os.path.join(path, f"output_{k}.npy"), v)
    if reference:
        open(os.path.join(path, "reference.txt"), "w").write(reference + "\n")
    print(f"{name}: " + ", ".join(f"{k} {v.shape}" for k, v in outputs.items()))


def speech_like(seconds=1.0, rate=16000):
    """A voiced chirp with harmonics plus noise: energy spread over the spectrum like speech, deterministic."""
    t = np.arange(int(seconds * rate)) / rate
    f0 = 120 + 80 * t / seconds
    phase = 2 * np.pi * np.cumsum(f0) / rate
    voiced = sum(np.sin(k * phase) / k for k in range(1, 12))
    return (0.3 * voiced + 0.05 * rng.standard_normal(t.shape)).astype(np.float32)


def log_mel_front_end():
    """torch/torchaudio-style log-mel: Hann window (periodic), STFT n_fft 512 hop 160 onesided, power, 80 mel bins."""
    nodes = [
        helper.make_node("HannWindow", ["n_fft"], ["window"]),
        helper.make_node("STFT", ["signal", "hop", "window"], ["spectrum"], onesided=1),
        helper.make_node("Mul", ["spectrum", "spectrum"], ["squares"]),
        helper.make_node("ReduceSum", ["squares", "last"], ["power"], keepdims=0),
        helper.make_node("MelWeightMatrix", ["mels", "n_fft", "rate", "low", "high"], ["filters"]),
        helper.make_node("MatMul", ["power", "filters"], ["mel"]),
        helper.make_node("Add", ["mel", "floor"], ["floored"]),
        helper.make_node("Log", ["floored"], ["log_mel"]),
    ]
    inits = [i64("n_fft", 512), i64("hop", 160), i64("last", [-1]), i64("mels", 80), i64("rate", 16000),
             numpy_helper.from_array(np.array(0.0, np.float32), "low"), numpy_helper.from_array(np.array(8000.0, np.float32), "high"),
             numpy_helper.from_array(np.array(1e-6, np.float32), "floor")]
    m = model_of(nodes, [vi("signal", TensorProto.FLOAT, [1, 16000, 1])],
                 [vi("spectrum", TensorProto.FLOAT, None), vi("log_mel", TensorProto.FLOAT, None)], inits)
    save_case("stft_log_mel_512", m, {"signal": speech_like().reshape(1, 16000, 1)})


def whisper_style_stft():
    """n_fft 400 (not a power of two, as Whisper's front end), Hann window given as a constant, frame_length input, batch 2."""
    window = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(400) / 400)).astype(np.float32)
    nodes = [helper.make_node("STFT", ["signal", "hop", "window", "frame"], ["spectrum"])]
    m = model_of(nodes, [vi("signal", TensorProto.FLOAT, [2, 4000, 1])], [vi("spectrum", TensorProto.FLOAT, None)],
                 [i64("hop", 160), i64("frame", 400), numpy_helper.from_array(window, "window")])
    signal = np.stack([speech_like(0.25), speech_like(0.25)[::-1].copy()]).reshape(2, 4000, 1)
    save_case("stft_400_batch", m, {"signal": signal})


def torchscript_rank2_stft():
    """torch.onnx (TorchScript, opset 17) exports torch.stft(center=False) as STFT on the real [batch, length] signal
    itself, without the trailing axis the spec asks for; onnxruntime accepts it. Log-power of a [2, 4000] signal."""
    window = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(400) / 400)).astype(np.float32)
    nodes = [helper.make_node("STFT", ["audio", "hop", "window", "frame"], ["spectrum"], onesided=1),
             helper.make_node("Pow", ["spectrum", "two"], ["squares"]),
             helper.make_node("ReduceSum", ["squares", "last"], ["power"], keepdims=0)]
    m = model_of(nodes, [vi("audio", TensorProto.FLOAT, ["N", "T"])], [vi("power", TensorProto.FLOAT, None)],
                 [i64("hop", 160), i64("frame", 400), i64("last", [-1]), numpy_helper.from_array(window, "window"),
                  numpy_helper.from_array(np.array(2.0, np.float32), "two")])
    save_case("stft_torchscript_rank2", m, {"audio": np.stack([speech_like(0.25), speech_like(0.25)[::-1].copy()])})


def stft_variants():
    """Complex signal, two-sided, no window (frame_length only), prime frame length (Bluestein path)."""
    nodes = [helper.make_node("STFT", ["complex_signal", "step", "", "frame"], ["two_sided"], onesided=0),
             helper.make_node("STFT", ["signal", "step", "", "prime"], ["prime_frames"], onesided=1)]
    m = model_of(nodes, [vi("complex_signal", TensorProto.FLOAT, [1, 300, 2]), vi("signal", TensorProto.FLOAT, [3, 300, 1])],
                 [vi("two_sided", TensorProto.FLOAT, None), vi("prime_frames", TensorProto.FLOAT, None)],
                 [i64("step", 37), i64("frame", 64), i64("prime", 127)])
    save_case("stft_variants", m, {"complex_signal": rng.standard_normal((1, 300, 2)).astype(np.float32),
                                   "signal": rng.standard_normal((3, 300, 1)).astype(np.float32)})


def dft_opset20():
    """DFT opset 20: axis as an input, dft_length padding and truncation, RFFT, inverse, IRFFT; lengths 2^k, 3*5*7, primes."""
    nodes = [
        helper.make_node("DFT", ["real", "", "axis1"], ["full"]),
        helper.make_node("DFT", ["real", "len_pad", "axis1"], ["rfft_padded"], onesided=1),
        helper.make_node("DFT", ["complex", "len_cut", "axis2"], ["truncated"]),
        helper.make_node("DFT", ["complex", "", "axis2"], ["inverse"], inverse=1),
        helper.make_node("DFT", ["half", "len_odd", "axis1"], ["irfft_odd"], inverse=1, onesided=1),
        helper.make_node("DFT", ["half"], ["irfft_default"], inverse=1, onesided=1),
    ]
    inits = [i64("axis1", 1), i64("axis2", -2), i64("len_pad", 128), i64("len_cut", 45), i64("len_odd", 37)]
    m = model_of(nodes, [vi("real", TensorProto.FLOAT, [3, 105, 4, 1]), vi("complex", TensorProto.FLOAT, [2, 5, 64, 2]),
                         vi("half", TensorProto.FLOAT, [4, 19, 2])],
                 [vi(n, TensorProto.FLOAT, None) for n in ("full", "rfft_padded", "truncated", "inverse", "irfft_odd", "irfft_default")],
                 inits, opset=20)
    save_case("dft_opset20", m, {"real": rng.standard_normal((3, 105, 4, 1)).astype(np.float32),
                                 "complex": rng.standard_normal((2, 5, 64, 2)).astype(np.float32),
                                 "half": rng.standard_normal((4, 19, 2)).astype(np.float32)})


def dft_prime_length():
    """A long prime length (1021). onnxruntime runs non-power-of-two lengths as a direct float32 DFT whose error here
    (1.5e-4 to 2.6e-4 of max|ref| on these draws) exceeds the engine tolerance, so the reference is numpy's float64 FFT rounded to float32."""
    x = rng.standard_normal((1, 1021, 2)).astype(np.float32)
    m = model_of([helper.make_node("DFT", ["long"], ["long_prime"])], [vi("long", TensorProto.FLOAT, [1, 1021, 2])],
                 [vi("long_prime", TensorProto.FLOAT, None)], opset=20)
    spectrum = np.fft.fft(x[..., 0].astype(np.float64) + 1j * x[..., 1], axis=1)
    exact = np.stack([spectrum.real, spectrum.imag], -1).astype(np.float32)
    save_case("dft_prime_length", m, {"long": x}, {"long_prime": exact},
              "numpy.fft.fft in float64, rounded to float32 (onnxruntime's direct float32 DFT drifts by up to ~2.6e-4 of max|ref| at n = 1021)")


def dft_opset17():
    """DFT opset 17: axis as an attribute, real input, onesided, and float64."""
    nodes = [helper.make_node("DFT", ["x", "n"], ["y"], axis=2, onesided=1),
             helper.make_node("DFT", ["x64"], ["y64"], axis=1, inverse=1)]
    m = model_of(nodes, [vi("x", TensorProto.FLOAT, [2, 3, 50, 1]), vi("x64", TensorProto.DOUBLE, [2, 24, 2])],
                 [vi("y", TensorProto.FLOAT, None), vi("y64", TensorProto.DOUBLE, None)], [i64("n", 60)])
    save_case("dft_opset17", m, {"x": rng.standard_normal((2, 3, 50, 1)).astype(np.float32), "x64": rng.standard_normal((2, 24, 2))})


def roi_align():
    """RoiAlign as Mask R-CNN / Faster R-CNN exports it (opset 16 half_pixel, sampling_ratio 0 and 2, avg and max) and opset 10."""
    x = rng.standard_normal((2, 3, 20, 24)).astype(np.float32)
    rois = np.array([[0, 0, 23, 19], [2.3, 4.1, 9.7, 15.2], [10, 3, 11, 3.5], [-3, -2, 6, 8], [20, 15, 30, 25], [5.5, 5.5, 5.5, 5.5]],
                    np.float32)
    batch = np.array([0, 1, 1, 0, 1, 0], np.int64)
    nodes = [helper.make_node("RoiAlign", ["x", "rois", "batch"], ["avg_adaptive"], output_height=7, output_width=5, spatial_scale=1.0),
             helper.make_node("RoiAlign", ["x", "rois_scaled", "batch"], ["max_fixed"], mode="max", output_height=3, output_width=4,
                              sampling_ratio=2, spatial_scale=0.5),
             helper.make_node("RoiAlign", ["x", "rois", "batch"], ["output_half_pixel"], coordinate_transformation_mode="output_half_pixel",
                              output_height=4, output_width=4, sampling_ratio=0)]
    m = model_of(nodes, [vi("x", TensorProto.FLOAT, [2, 3, 20, 24]), vi("rois", TensorProto.FLOAT, [6, 4]),
                         vi("rois_scaled", TensorProto.FLOAT, [6, 4]), vi("batch", TensorProto.INT64, [6])],
                 [vi(n, TensorProto.FLOAT, None) for n in ("avg_adaptive", "max_fixed", "output_half_pixel")], opset=16)
    save_case("roi_align_16", m, {"x": x, "rois": rois, "rois_scaled": rois * 2, "batch": batch})
    nodes = [helper.make_node("RoiAlign", ["x", "rois", "batch"], ["y"], output_height=5, output_width=5, spatial_scale=0.25)]
    m = model_of(nodes, [vi("x", TensorProto.FLOAT, [2, 3, 20, 24]), vi("rois", TensorProto.FLOAT, [6, 4]), vi("batch", TensorProto.INT64, [6])],
                 [vi("y", TensorProto.FLOAT, None)], opset=10)
    save_case("roi_align_10", m, {"x": x, "rois": rois * 4, "batch": batch})


if __name__ == "__main__":
    log_mel_front_end()
    whisper_style_stft()
    torchscript_rank2_stft()
    stft_variants()
    dft_opset20()
    dft_prime_length()
    dft_opset17()
    roi_align()
