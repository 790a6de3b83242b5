import Foundation
import Tensor

// Preprocessing and linear operators of the `ai.onnx.ml` domain (scikit-learn models exported by skl2onnx, ...);
// trees and SVMs live in MLTreeEnsembleOps.swift and MLSVMOps.swift, shared helpers in MLSupport.swift.
// Semantics follow the ONNX spec and its reference implementation, which onnxruntime matches.

/// Scaler, Normalizer, Binarizer, Imputer, ArrayFeatureExtractor and the linear models.
let mlOperators: OperatorTable = [
    "Scaler": { ctx in
        let offset = try ctx.floats("offset") ?? [0], scale = try ctx.floats("scale") ?? [1]
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            let values = try floatValues(x, ctx)
            let columns = x.rank == 0 ? 1 : x.shape[x.rank - 1]
            for (name, list) in [("offset", offset), ("scale", scale)] where list.count != 1 && list.count != columns {
                throw ctx.error(.executionFailed, "\(name) has \(list.count) values; expected 1 or \(columns) (the input's last axis)")
            }
            return [Tensor.makeFloat(shape: x.shape) { dst in
                for i in 0..<values.count {
                    let c = columns == 0 ? 0 : i % columns
                    dst[i] = (values[i] - offset[offset.count == 1 ? 0 : c]) * scale[scale.count == 1 ? 0 : c]
                }
            }]
        }
    },
    "Normalizer": { ctx in
        let norm = try ctx.string("norm", "MAX")
        guard ["MAX", "L1", "L2"].contains(norm) else { throw ctx.unsupported("norm", "'\(norm)'") }
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            let (rows, columns) = try matrixShape(x, ctx)
            let values = try floatValues(x, ctx)
            return [Tensor.makeFloat(shape: x.shape) { dst in
                for r in 0..<rows {
                    let row = values[(r * columns)..<((r + 1) * columns)]
                    let divisor: Float
                    switch norm {
                    case "L1": divisor = row.reduce(0) { $0 + Swift.abs($1) }
                    case "L2": divisor = row.reduce(0) { $0 + $1 * $1 }.squareRoot()
                    default: divisor = row.max() ?? 1
                    }
                    for (c, v) in row.enumerated() { dst[r * columns + c] = v / divisor }
                }
            }]
        }
    },
    "Binarizer": { ctx in
        let threshold = try ctx.float("threshold", 0)
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            switch x.dtype {
            case .float32: return [mapElements(x) { (v: Float) -> Float in v > threshold ? 1 : 0 }]
            case .float64: return [mapElements(x) { (v: Double) -> Double in v > Double(threshold) ? 1 : 0 }]
            case .int64: return [mapElements(x) { (v: Int64) -> Int64 in Float(v) > threshold ? 1 : 0 }]
            case .int32: return [mapElements(x) { (v: Int32) -> Int32 in Float(v) > threshold ? 1 : 0 }]
            default: throw ctx.error(.unsupportedDType, "input must be float, double, int64 or int32, got \(x.dtype)")
            }
        }
    },
    "Imputer": { ctx in
        let floats = try ctx.floats("imputed_value_floats") ?? [], ints = try ctx.ints("imputed_value_int64s") ?? []
        let replacedFloat = try ctx.float("replaced_value_float", 0), replacedInt = Int64(try ctx.int("replaced_value_int64", 0))
        guard !floats.isEmpty || !ints.isEmpty else { throw ctx.error(.invalidModel, "imputed_value_floats or imputed_value_int64s is required") }
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            let columns = x.rank == 0 ? 1 : x.shape[x.rank - 1]
            let count = floats.isEmpty ? ints.count : floats.count
            guard count == 1 || count == columns else {
                throw ctx.error(.executionFailed, "\(count) imputed values for \(columns) columns; expected 1 or \(columns)")
            }
            switch x.dtype {
            case .float32 where !floats.isEmpty:
                let values = x.scalars(as: Float.self)
                return [Tensor.makeFloat(shape: x.shape) { dst in
                    for i in 0..<values.count {
                        let v = values[i]
                        let hit = replacedFloat.isNaN ? v.isNaN : v == replacedFloat
                        dst[i] = hit ? floats[count == 1 ? 0 : i % columns] : v
                    }
                }]
            case .int64 where !ints.isEmpty:
                let values = x.scalars(as: Int64.self)
                let out = values.enumerated().map { i, v in v == replacedInt ? Int64(ints[count == 1 ? 0 : i % columns]) : v }
                return [Tensor(shape: x.shape, scalars: out)]
            default:
                throw ctx.error(.unsupportedDType, "input \(x.dtype) does not match the imputed values (\(floats.isEmpty ? "int64" : "float"))")
            }
        }
    },
    "ArrayFeatureExtractor": { ctx in PreparedKernel { inputs in
        let x = try inputs.required(0, ctx), indexTensor = try inputs.required(1, ctx)
        guard indexTensor.dtype == .int64 || indexTensor.dtype == .int32 else {
            throw ctx.error(.unsupportedDType, "indices must be int64, got \(indexTensor.dtype)")
        }
        guard x.rank >= 1 else { throw ctx.error(.executionFailed, "input must have rank >= 1, got a scalar") }
        let indices = indexTensor.ints
        let last = x.shape[x.rank - 1]
        for i in indices where i < 0 || i >= last {
            throw ctx.error(.executionFailed, "index \(i) is out of range for the last axis of size \(last)")
        }
        // A vector input gives a [1, K] matrix, as onnxruntime does.
        let outShape = x.rank == 1 ? [1, indices.count] : Array(x.shape.dropLast()) + [indices.count]
        let rows = x.count / max(last, 1)
        let bytes = x.dtype.byteSize
        var out = Tensor(uninitialized: x.dtype, shape: outShape)
        if x.dtype == .string {
            let strings = x.strings
            return [Tensor(shape: outShape, strings: (0..<rows).flatMap { r in indices.map { strings[r * last + $0] } })]
        }
        x.withUnsafeBytes { src in
            out.withUnsafeMutableBytes { dst in
                for r in 0..<rows {
                    for (k, i) in indices.enumerated() {
                        (dst.baseAddress! + (r * indices.count + k) * bytes)
                            .copyMemory(from: src.baseAddress! + (r * last + i) * bytes, byteCount: bytes)
                    }
                }
            }
        }
        return [out]
    } },
    "LinearRegressor": { ctx in
        let coefficients = try ctx.floats("coefficients") ?? [], intercepts = try ctx.floats("intercepts") ?? []
        let targets = try ctx.int("targets", 1)
        let transform = try PostTransform(ctx)
        guard targets >= 1, !coefficients.isEmpty, coefficients.count % targets == 0 else {
            throw ctx.error(.invalidModel, "\(coefficients.count) coefficients cannot be split into \(targets) targets")
        }
        guard intercepts.isEmpty || intercepts.count == targets else {
            throw ctx.error(.invalidModel, "\(intercepts.count) intercepts for \(targets) targets")
        }
        let features = coefficients.count / targets
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            let (rows, columns) = try matrixShape(x, ctx)
            guard columns == features else { throw ctx.error(.executionFailed, "input has \(columns) features; the model expects \(features)") }
            let values = try floatValues(x, ctx)
            return [Tensor.makeFloat(shape: [rows, targets]) { dst in
                for r in 0..<rows {
                    for t in 0..<targets {
                        var s: Float = intercepts.isEmpty ? 0 : intercepts[t]
                        for f in 0..<features { s += values[r * features + f] * coefficients[t * features + f] }
                        dst[r * targets + t] = s
                    }
                    transform.apply(UnsafeMutableBufferPointer(start: dst + r * targets, count: targets))
                }
            }]
        }
    },
    "LinearClassifier": { ctx in
        let coefficients = try ctx.floats("coefficients") ?? [], intercepts = try ctx.floats("intercepts") ?? []
        let labels = try ClassLabels(ctx, intsName: "classlabels_ints")
        let transform = try PostTransform(ctx)
        let classes = intercepts.isEmpty ? max(labels.count, 1) : intercepts.count
        guard !coefficients.isEmpty, coefficients.count % classes == 0 else {
            throw ctx.error(.invalidModel, "\(coefficients.count) coefficients cannot be split into \(classes) classes")
        }
        let features = coefficients.count / classes
        // One score column for two labels: a binary model whose score s stands for [-s, s].
        let binary = classes == 1 && labels.count == 2
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            let (rows, columns) = try matrixShape(x, ctx)
            guard columns == features else { throw ctx.error(.executionFailed, "input has \(columns) features; the model expects \(features)") }
            let values = try floatValues(x, ctx)
            let width = binary ? 2 : classes
            var picked = [Int](repeating: 0, count: rows)
            let scores = Tensor.makeFloat(shape: [rows, width]) { dst in
                for r in 0..<rows {
                    var raw = [Float](repeating: 0, count: classes)
                    for c in 0..<classes {
                        var s: Float = intercepts.isEmpty ? 0 : intercepts[c]
                        for f in 0..<features { s += values[r * features + f] * coefficients[c * features + f] }
                        raw[c] = s
                    }
                    let row = UnsafeMutableBufferPointer(start: dst + r * width, count: width)
                    if binary { row[0] = -raw[0]; row[1] = raw[0] } else { for c in 0..<classes { row[c] = raw[c] } }
                    transform.apply(row)
                    if width > 1 {
                        picked[r] = argmax(row)
                    } else {
                        // One class: the label is that class when the score passes the threshold, else 0.
                        picked[r] = row[0] >= (transform == .none ? 0 : 0.5) ? 0 : -1
                    }
                }
            }
            if width == 1 {
                guard case .ints(let v) = labels else { throw ctx.error(.unsupportedAttribute, "a one-class string classifier is not supported") }
                let first = v.first ?? 1
                return [Tensor(shape: [rows], scalars: picked.map { $0 == 0 ? first : 0 }), scores]
            }
            guard labels.count == 0 || labels.count == width else {
                throw ctx.error(.invalidModel, "\(labels.count) class labels for \(width) score columns")
            }
            return [labels.tensor(picked), scores]
        }
    },
]

/// Why an `ai.onnx.ml` operator the engine deliberately does not run is rejected, or nil.
func mlRejectionReason(_ opType: String) -> String? {
    switch opType {
    case "ZipMap":
        return "ZipMap outputs a sequence of maps, which is not a tensor; re-export the classifier without it " +
            "(skl2onnx: options={id(model): {\"zipmap\": False}} or options={\"zipmap\": False})"
    default: return nil
    }
}
