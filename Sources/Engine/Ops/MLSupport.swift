import Foundation
import Tensor

// Shared pieces of the `ai.onnx.ml` operators: input conversion, attribute lists, score transforms, class labels.

/// Reads a numeric input as float32 values (float, double and integer inputs are accepted, as ai.onnx.ml allows).
func floatValues(_ x: Tensor, _ ctx: OpContext) throws -> [Float] {
    switch x.dtype {
    case .float32: return x.scalars(as: Float.self)
    case .float64, .int64, .int32: return x.doubles.map { Float($0) }
    default: throw ctx.error(.unsupportedDType, "input must be float, double, int64 or int32, got \(x.dtype)")
    }
}

/// Splits a rank-1 `[C]` or rank-2 `[N, C]` input into (rows, columns).
func matrixShape(_ x: Tensor, _ ctx: OpContext) throws -> (rows: Int, columns: Int) {
    switch x.rank {
    case 1: return (1, x.shape[0])
    case 2: return (x.shape[0], x.shape[1])
    default: throw ctx.error(.executionFailed, "input must be [C] or [N, C], got shape \(x.shape)")
    }
}

/// A float attribute list that may also be given as a tensor (`name_as_tensor`, ai.onnx.ml opset 3).
func floatList(_ ctx: OpContext, _ name: String) throws -> [Float]? {
    if let v = try ctx.floats(name) { return v }
    if let t = try ctx.tensor(name + "_as_tensor") { return t.doubles.map { Float($0) } }
    return nil
}

/// A string-list attribute, decoded as UTF-8.
func stringList(_ ctx: OpContext, _ name: String) throws -> [String]? {
    guard let a = ctx.node.attributes[name] else { return nil }
    guard case .strings(let v) = a else { throw ctx.error(.invalidModel, "attribute '\(name)' should be strings, got \(a.kindName)") }
    return v.map { String(decoding: $0, as: UTF8.self) }
}

/// The score transform applied by classifiers and regressors (`post_transform`).
enum PostTransform: String, Sendable {
    case none = "NONE", logistic = "LOGISTIC", softmax = "SOFTMAX", softmaxZero = "SOFTMAX_ZERO", probit = "PROBIT"

    /// Parses the attribute (default NONE).
    init(_ ctx: OpContext) throws {
        let name = try ctx.string("post_transform", "NONE")
        guard let value = PostTransform(rawValue: name) else { throw ctx.unsupported("post_transform", "'\(name)'") }
        self = value
    }

    /// Transforms one row of scores in place.
    func apply(_ row: UnsafeMutableBufferPointer<Float>) {
        switch self {
        case .none: return
        case .logistic:
            for i in row.indices { row[i] = 1 / (1 + Foundation.exp(-row[i])) }
        case .softmax:
            let top = row.max() ?? 0
            var sum: Float = 0
            for i in row.indices { row[i] = Foundation.exp(row[i] - top); sum += row[i] }
            for i in row.indices { row[i] /= sum }
        case .softmaxZero:
            // Like softmax, but exact zeros stay (proportionally) zero.
            let top = row.max() ?? 0
            let scale = Foundation.exp(-top)
            var sum: Float = 0
            for i in row.indices {
                row[i] = Swift.abs(row[i]) > 1e-7 ? Foundation.exp(row[i] - top) : row[i] * scale
                sum += row[i]
            }
            for i in row.indices { row[i] = sum == 0 ? 0.5 : row[i] / sum }
        case .probit:
            for i in row.indices { row[i] = 1.41421356 * inverseErf(row[i] * 2 - 1) }
        }
    }
}

/// Winitzki's approximation of erf⁻¹, the one the ONNX reference and onnxruntime use for PROBIT.
func inverseErf(_ x: Float) -> Float {
    let sign: Float = x < 0 ? -1 : 1
    let v = (1 - x) * (1 + x)
    if v == 0 { return 0 }
    let log = Foundation.log(v)
    let a = 2 / (Float.pi * 0.147) + 0.5 * log
    let b = 1 / 0.147 * log
    return sign * (-a + (a * a - b).squareRoot()).squareRoot()
}

/// Class labels of a classifier: int64 (`classlabels_ints`/`classlabels_int64s`) or strings.
enum ClassLabels {
    case ints([Int64])
    case strings([String])

    init(_ ctx: OpContext, intsName: String) throws {
        if let strings = try stringList(ctx, "classlabels_strings"), !strings.isEmpty {
            self = .strings(strings)
        } else {
            self = .ints((try ctx.ints(intsName) ?? []).map { Int64($0) })
        }
    }

    var count: Int {
        switch self {
        case .ints(let v): return v.count
        case .strings(let v): return v.count
        }
    }

    /// The label tensor `[N]` for class indices `picked`.
    func tensor(_ picked: [Int]) -> Tensor {
        switch self {
        case .ints(let v): return Tensor(shape: [picked.count], scalars: picked.map { v.isEmpty ? Int64($0) : v[$0] })
        case .strings(let v): return Tensor(shape: [picked.count], strings: picked.map { Array(v[$0].utf8) })
        }
    }
}

/// Index of the largest value (first on ties).
func argmax(_ row: UnsafeMutableBufferPointer<Float>) -> Int {
    var best = 0
    for i in row.indices where row[i] > row[best] { best = i }
    return best
}
