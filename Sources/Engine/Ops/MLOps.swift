import Foundation
import Tensor

// Operators of the `ai.onnx.ml` domain (scikit-learn models exported by skl2onnx, ...).
// Semantics follow the ONNX spec and its reference implementation, which onnxruntime matches.

/// Reads a numeric input as float32 values (float, double and integer inputs are accepted, as ai.onnx.ml allows).
private func floatValues(_ x: Tensor, _ ctx: OpContext) throws -> [Float] {
    switch x.dtype {
    case .float32: return x.scalars(as: Float.self)
    case .float64, .int64, .int32: return x.doubles.map { Float($0) }
    default: throw ctx.error(.unsupportedDType, "input must be float, double, int64 or int32, got \(x.dtype)")
    }
}

/// Splits a rank-1 `[C]` or rank-2 `[N, C]` input into (rows, columns).
private func matrixShape(_ x: Tensor, _ ctx: OpContext) throws -> (rows: Int, columns: Int) {
    switch x.rank {
    case 1: return (1, x.shape[0])
    case 2: return (x.shape[0], x.shape[1])
    default: throw ctx.error(.executionFailed, "input must be [C] or [N, C], got shape \(x.shape)")
    }
}

/// A float attribute list that may also be given as a tensor (`name_as_tensor`, ai.onnx.ml opset 3).
private func floatList(_ ctx: OpContext, _ name: String) throws -> [Float]? {
    if let v = try ctx.floats(name) { return v }
    if let t = try ctx.tensor(name + "_as_tensor") { return t.doubles.map { Float($0) } }
    return nil
}

/// A string-list attribute, decoded as UTF-8.
private func stringList(_ ctx: OpContext, _ name: String) throws -> [String]? {
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
private func inverseErf(_ x: Float) -> Float {
    let sign: Float = x < 0 ? -1 : 1
    let v = (1 - x) * (1 + x)
    if v == 0 { return 0 }
    let log = Foundation.log(v)
    let a = 2 / (Float.pi * 0.147) + 0.5 * log
    let b = 1 / 0.147 * log
    return sign * (-a + (a * a - b).squareRoot()).squareRoot()
}

/// Class labels of a classifier: int64 (`classlabels_ints`/`classlabels_int64s`) or strings.
private enum ClassLabels {
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
private func argmax(_ row: UnsafeMutableBufferPointer<Float>) -> Int {
    var best = 0
    for i in row.indices where row[i] > row[best] { best = i }
    return best
}

// MARK: tree ensembles

/// A decision-tree forest flattened into arrays; leaves carry (target, weight) pairs.
private struct Forest: Sendable {
    enum Rule: UInt8, Sendable { case leq, lt, gte, gt, eq, neq, leaf }
    var feature: [Int] = [], threshold: [Float] = [], rule: [Rule] = []
    var whenTrue: [Int] = [], whenFalse: [Int] = [], missingGoesTrue: [Bool] = []
    var roots: [Int] = []
    var leafTargets: [[(target: Int, weight: Float)]] = []

    /// Reads the `nodes_*` attributes plus the leaf list named `prefix` (`class` or `target`).
    init(_ ctx: OpContext, prefix: String, targetCount: Int) throws {
        let treeIDs = try ctx.ints("nodes_treeids") ?? [], nodeIDs = try ctx.ints("nodes_nodeids") ?? []
        let features = try ctx.ints("nodes_featureids") ?? [], values = try floatList(ctx, "nodes_values") ?? []
        let modes = try stringList(ctx, "nodes_modes") ?? []
        let trues = try ctx.ints("nodes_truenodeids") ?? [], falses = try ctx.ints("nodes_falsenodeids") ?? []
        let missing = try ctx.ints("nodes_missing_value_tracks_true") ?? []
        let n = treeIDs.count
        guard n > 0, [nodeIDs.count, features.count, modes.count, trues.count, falses.count].allSatisfy({ $0 == n }),
              values.count == n, missing.isEmpty || missing.count == n else {
            throw ctx.error(.invalidModel, "nodes_* attributes must all have one entry per node (\(n) tree ids)")
        }
        var index: [Int: [Int: Int]] = [:]
        var order: [Int] = []
        for i in 0..<n {
            if index[treeIDs[i]] == nil { index[treeIDs[i]] = [:]; order.append(treeIDs[i]) }
            index[treeIDs[i]]![nodeIDs[i]] = i
        }
        // The root of each tree is its first node in attribute order, as the reference implementation takes it.
        roots = order.sorted().map { tree in (0..<n).first { treeIDs[$0] == tree }! }
        let rules: [String: Rule] = ["BRANCH_LEQ": .leq, "BRANCH_LT": .lt, "BRANCH_GTE": .gte, "BRANCH_GT": .gt,
                                     "BRANCH_EQ": .eq, "BRANCH_NEQ": .neq, "LEAF": .leaf]
        for i in 0..<n {
            guard let r = rules[modes[i]] else { throw ctx.unsupported("nodes_modes", "'\(modes[i])'") }
            rule.append(r)
            feature.append(features[i]); threshold.append(values[i])
            missingGoesTrue.append(!missing.isEmpty && missing[i] != 0)
            if r == .leaf {
                whenTrue.append(i); whenFalse.append(i)
            } else {
                guard let t = index[treeIDs[i]]![trues[i]], let f = index[treeIDs[i]]![falses[i]] else {
                    throw ctx.error(.invalidModel, "tree \(treeIDs[i]) node \(nodeIDs[i]) points to a missing child")
                }
                whenTrue.append(t); whenFalse.append(f)
            }
        }
        leafTargets = Array(repeating: [], count: n)
        let lTrees = try ctx.ints("\(prefix)_treeids") ?? [], lNodes = try ctx.ints("\(prefix)_nodeids") ?? []
        let lIDs = try ctx.ints("\(prefix)_ids") ?? [], lWeights = try floatList(ctx, "\(prefix)_weights") ?? []
        guard lTrees.count == lNodes.count, lNodes.count == lIDs.count, lIDs.count == lWeights.count else {
            throw ctx.error(.invalidModel, "\(prefix)_* attributes must all have the same length")
        }
        for k in 0..<lTrees.count {
            guard let node = index[lTrees[k]]?[lNodes[k]] else {
                throw ctx.error(.invalidModel, "\(prefix) weight \(k) names missing tree \(lTrees[k]) node \(lNodes[k])")
            }
            guard lIDs[k] >= 0 && lIDs[k] < targetCount else {
                throw ctx.error(.invalidModel, "\(prefix)_ids[\(k)] = \(lIDs[k]) is out of range 0..<\(targetCount)")
            }
            leafTargets[node].append((lIDs[k], lWeights[k]))
        }
        if let bad = feature.enumerated().first(where: { rule[$0.offset] != .leaf && $0.element < 0 }) {
            throw ctx.error(.invalidModel, "node \(bad.offset) has negative feature id \(bad.element)")
        }
    }

    var treeCount: Int { roots.count }

    /// The leaf reached from `root` for the row at `x` (`columns` features).
    func leaf(_ root: Int, _ x: UnsafePointer<Float>, columns: Int) -> Int? {
        var i = root
        var steps = 0
        while rule[i] != .leaf {
            guard feature[i] < columns, steps <= rule.count else { return nil }
            let v = x[feature[i]], t = threshold[i]
            let goTrue: Bool
            if v.isNaN {
                goTrue = missingGoesTrue[i]
            } else {
                switch rule[i] {
                case .leq: goTrue = v <= t
                case .lt: goTrue = v < t
                case .gte: goTrue = v >= t
                case .gt: goTrue = v > t
                case .eq: goTrue = v == t
                case .neq: goTrue = v != t
                case .leaf: goTrue = true
                }
            }
            i = goTrue ? whenTrue[i] : whenFalse[i]
            steps += 1
        }
        return i
    }

    /// Per-target aggregate of the reached leaves for every row: `sum`, `min` or `max` (average is sum / trees).
    func aggregate(_ x: [Float], rows: Int, columns: Int, targets: Int, function: String, _ ctx: OpContext) throws -> [Float] {
        var out = [Float](repeating: 0, count: rows * targets)
        for r in 0..<rows {
            var seen = [Bool](repeating: false, count: targets)
            try x.withUnsafeBufferPointer { xs in
                let row = xs.baseAddress! + r * columns
                for root in roots {
                    guard let leaf = leaf(root, row, columns: columns) else {
                        throw ctx.error(.executionFailed, "a tree reads a feature beyond the input's \(columns) columns (or loops)")
                    }
                    for (target, weight) in leafTargets[leaf] {
                        let at = r * targets + target
                        switch function {
                        case "MIN": out[at] = seen[target] ? Swift.min(out[at], weight) : weight
                        case "MAX": out[at] = seen[target] ? Swift.max(out[at], weight) : weight
                        default: out[at] += weight
                        }
                        seen[target] = true
                    }
                }
            }
        }
        return out
    }
}

// MARK: operators

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
    "TreeEnsembleRegressor": { ctx in
        let targets = try ctx.int("n_targets", 1)
        guard targets >= 1 else { throw ctx.error(.invalidModel, "n_targets must be at least 1, got \(targets)") }
        let forest = try Forest(ctx, prefix: "target", targetCount: targets)
        let function = try ctx.string("aggregate_function", "SUM")
        guard ["SUM", "AVERAGE", "MIN", "MAX"].contains(function) else { throw ctx.unsupported("aggregate_function", "'\(function)'") }
        let base = try floatList(ctx, "base_values") ?? []
        guard base.isEmpty || base.count == targets else { throw ctx.error(.invalidModel, "\(base.count) base values for \(targets) targets") }
        let transform = try PostTransform(ctx)
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            let (rows, columns) = try matrixShape(x, ctx)
            var out = try forest.aggregate(try floatValues(x, ctx), rows: rows, columns: columns, targets: targets, function: function, ctx)
            let divisor: Float = function == "AVERAGE" ? Float(max(forest.treeCount, 1)) : 1
            for i in out.indices { out[i] = out[i] / divisor + (base.isEmpty ? 0 : base[i % targets]) }
            var result = Tensor(shape: [rows, targets], scalars: out)
            result.withUnsafeMutableBufferPointer(of: Float.self) { p in
                for r in 0..<rows { transform.apply(UnsafeMutableBufferPointer(rebasing: p[(r * targets)..<((r + 1) * targets)])) }
            }
            return [result]
        }
    },
    "TreeEnsembleClassifier": { ctx in
        let labels = try ClassLabels(ctx, intsName: "classlabels_int64s")
        guard labels.count >= 1 else { throw ctx.error(.invalidModel, "classlabels_int64s or classlabels_strings is required") }
        let classes = labels.count
        let forest = try Forest(ctx, prefix: "class", targetCount: max(classes, 2))
        let base = try floatList(ctx, "base_values") ?? []
        let transform = try PostTransform(ctx)
        let classIDs = Set(try ctx.ints("class_ids") ?? [])
        // All leaves vote for one class: a binary model whose score s for class 1 implies class 0's score.
        let binary = classIDs.count == 1
        guard !(binary && classes > 2) else { throw ctx.error(.invalidModel, "leaves vote for one class but there are \(classes) labels") }
        if case .ints(let v) = labels, classes == 1, v[0] != 1 {
            throw ctx.unsupported("classlabels_int64s", "\(v) (a single label must be 1)")
        }
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            let (rows, columns) = try matrixShape(x, ctx)
            let width = binary ? 2 : classes
            var sums = try forest.aggregate(try floatValues(x, ctx), rows: rows, columns: columns, targets: max(classes, 2), function: "SUM", ctx)
            let stride = max(classes, 2)
            var picked = [Int](repeating: 0, count: rows)
            let scores = Tensor.makeFloat(shape: [rows, width]) { dst in
                for r in 0..<rows {
                    let row = UnsafeMutableBufferPointer(start: dst + r * width, count: width)
                    for c in 0..<width {
                        let b: Float = base.isEmpty ? 0 : base[base.count == 1 ? 0 : Swift.min(c, base.count - 1)]
                        sums[r * stride + c] += b
                    }
                    if binary {
                        let only = classIDs.first!
                        let s = sums[r * stride + only]
                        row[1] = s
                        row[0] = (transform == .none || transform == .probit) ? 1 - s : -s
                    } else {
                        for c in 0..<width { row[c] = sums[r * stride + c] }
                    }
                    transform.apply(row)
                    picked[r] = argmax(row)
                }
            }
            if classes == 1 {
                // Single label 1: class index 1 maps to label 1, anything else to 0.
                return [Tensor(shape: [rows], scalars: picked.map { Int64($0 == 1 ? 1 : 0) }), scores]
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

// MARK: support vector machines

/// Kernel of an SVM (`kernel_type` with `kernel_params` = [gamma, coef0, degree]).
private struct SVMKernel: Sendable {
    enum Kind: String, Sendable { case linear = "LINEAR", poly = "POLY", rbf = "RBF", sigmoid = "SIGMOID" }
    let kind: Kind, gamma: Float, coef0: Float, degree: Float

    init(_ ctx: OpContext, forceLinear: Bool) throws {
        let name = try ctx.string("kernel_type", "LINEAR").uppercased()
        guard let k = Kind(rawValue: name) else { throw ctx.unsupported("kernel_type", "'\(name)'") }
        let p = try ctx.floats("kernel_params") ?? []
        kind = forceLinear ? .linear : k
        gamma = p.count > 0 ? p[0] : 0
        coef0 = p.count > 1 ? p[1] : 0
        degree = p.count > 2 ? p[2].rounded(.towardZero) : 0  // Int(_:) would trap on a NaN or huge attribute
    }

    /// k(a, b) over `n` features.
    func callAsFunction(_ a: UnsafePointer<Float>, _ b: UnsafePointer<Float>, _ n: Int) -> Float {
        switch kind {
        case .rbf:
            var s: Float = 0
            for i in 0..<n { let d = a[i] - b[i]; s += d * d }
            return Foundation.exp(-gamma * s)
        default:
            var s: Float = 0
            for i in 0..<n { s += a[i] * b[i] }
            switch kind {
            case .poly: return Foundation.pow(s * gamma + coef0, degree)
            case .sigmoid: return Foundation.tanh(s * gamma + coef0)
            default: return s
            }
        }
    }
}

/// libsvm's pairwise-coupling estimate of class probabilities from the pairwise matrix `r` (k x k).
private func multiclassProbability(_ k: Int, _ r: [[Float]]) -> [Float] {
    var q = [[Float]](repeating: [Float](repeating: 0, count: k), count: k)
    var p = [Float](repeating: 1 / Float(k), count: k), qp = [Float](repeating: 0, count: k)
    let eps = 0.005 / Float(k)
    for t in 0..<k {
        q[t][t] = 0
        for j in 0..<t { q[t][t] += r[j][t] * r[j][t]; q[t][j] = q[j][t] }
        for j in (t + 1)..<max(k, t + 1) { q[t][t] += r[j][t] * r[j][t]; q[t][j] = -r[j][t] * r[t][j] }
    }
    for _ in 0..<max(100, k) {
        var pqp: Float = 0
        for t in 0..<k {
            qp[t] = 0
            for j in 0..<k { qp[t] += q[t][j] * p[j] }
            pqp += p[t] * qp[t]
        }
        var maxError: Float = 0
        for t in 0..<k { maxError = max(maxError, Swift.abs(qp[t] - pqp)) }
        if maxError < eps { break }
        for t in 0..<k {
            let diff = (-qp[t] + pqp) / q[t][t]
            p[t] += diff
            pqp = (pqp + diff * (diff * q[t][t] + 2 * qp[t])) / ((1 + diff) * (1 + diff))
            for j in 0..<k { qp[j] = (qp[j] + diff * q[t][j]) / (1 + diff); p[j] /= 1 + diff }
        }
    }
    return p
}

/// The SVMClassifier kernel: one-vs-one voting over support vectors (or a linear model), optional Platt probabilities.
private struct SVMClassifierModel: Sendable {
    let kernel: SVMKernel
    let supportVectors: [Float], coefficients: [Float], rho: [Float], probA: [Float], probB: [Float]
    let vectorsPerClass: [Int], starts: [Int]
    let classes: Int, features: Int
    let transform: PostTransform
    let twoLabels: Bool, weightsAllPositive: Bool

    /// (class index, score row) for one input row.
    func classify(_ x: UnsafePointer<Float>) -> (Int, [Float]) {
        let vectorCount = vectorsPerClass.reduce(0, +)
        var scores: [Float] = []
        var votes: [Float]? = nil
        if vectorCount > 0 {
            let kernels = supportVectors.withUnsafeBufferPointer { sv in
                (0..<vectorCount).map { kernel(x, sv.baseAddress! + $0 * features, features) }
            }
            var v = [Float](repeating: 0, count: classes)
            var evals = 0
            for i in 0..<classes {
                for j in (i + 1)..<max(classes, i + 1) {
                    var s = rho[min(evals, rho.count - 1)]
                    for k in 0..<vectorsPerClass[i] { s += coefficients[(j - 1) * vectorCount + starts[i] + k] * kernels[starts[i] + k] }
                    for k in 0..<vectorsPerClass[j] { s += coefficients[i * vectorCount + starts[j] + k] * kernels[starts[j] + k] }
                    scores.append(s)
                    if s > 0 { v[i] += 1 } else { v[j] += 1 }
                    evals += 1
                }
            }
            votes = v
            if !probA.isEmpty {
                var r = [[Float]](repeating: [Float](repeating: 0, count: classes), count: classes)
                var index = 0
                for i in 0..<classes {
                    for j in (i + 1)..<max(classes, i + 1) {
                        let value = scores[index] * probA[index] + (index < probB.count ? probB[index] : 0)
                        let logistic = 1 / (1 + Foundation.exp(-value))
                        let p = min(max(1 - logistic, 1e-7), 1 - 1e-7)
                        r[i][j] = p; r[j][i] = 1 - p
                        index += 1
                    }
                }
                scores = multiclassProbability(classes, r)
            }
        } else {
            scores = coefficients.withUnsafeBufferPointer { c in
                (0..<classes).map { rho[0] + kernel(x, c.baseAddress! + $0 * features, features) }
            }
        }
        let ranked = votes ?? scores
        var best = 0
        for i in ranked.indices where ranked[i] > ranked[best] { best = i }
        let maxWeight = ranked.isEmpty ? 0 : ranked[best]
        var picked = best
        var secondClass = false
        if rho.count == 1 {
            if twoLabels {
                secondClass = true
                if probA.isEmpty && weightsAllPositive && maxWeight >= 0.5 { picked = 1 }
            } else {
                picked = maxWeight > 0 ? 1 : 0
            }
        }
        var out = scores
        if out.count >= 2 {
            out.withUnsafeMutableBufferPointer { transform.apply($0) }
        } else if out.count == 1 {
            let s = out[0]
            if transform == .probit {
                out.withUnsafeMutableBufferPointer { transform.apply($0) }
            } else if secondClass {
                out = [-s, s]
                out.withUnsafeMutableBufferPointer { transform.apply($0) }
            }
        }
        return (picked, out)
    }
}

let svmOperators: OperatorTable = [
    "SVMClassifier": { ctx in
        let labels = try ClassLabels(ctx, intsName: "classlabels_ints")
        let vectorsPerClass = try ctx.ints("vectors_per_class") ?? []
        let vectorCount = vectorsPerClass.reduce(0, +)
        let coefficients = try ctx.floats("coefficients") ?? [], supportVectors = try ctx.floats("support_vectors") ?? []
        let rho = try ctx.floats("rho") ?? [0]
        let classes = max(labels.count, 1)
        guard !rho.isEmpty, !coefficients.isEmpty else { throw ctx.error(.invalidModel, "rho and coefficients are required") }
        let features: Int
        if vectorCount > 0 {
            guard vectorsPerClass.count == classes, supportVectors.count % vectorCount == 0,
                  coefficients.count == (classes - 1) * vectorCount else {
                throw ctx.error(.invalidModel, "support vectors (\(supportVectors.count) values, \(vectorCount) vectors) and " +
                                "\(coefficients.count) coefficients do not fit \(classes) classes")
            }
            features = supportVectors.count / vectorCount
        } else {
            guard coefficients.count % classes == 0 else {
                throw ctx.error(.invalidModel, "\(coefficients.count) coefficients cannot be split into \(classes) classes")
            }
            features = coefficients.count / classes
        }
        var starts: [Int] = []
        var running = 0
        for c in vectorsPerClass { starts.append(running); running += c }
        let model = SVMClassifierModel(
            kernel: try SVMKernel(ctx, forceLinear: vectorCount == 0), supportVectors: supportVectors, coefficients: coefficients, rho: rho,
            probA: try ctx.floats("prob_a") ?? [], probB: try ctx.floats("prob_b") ?? [], vectorsPerClass: vectorsPerClass, starts: starts,
            classes: classes, features: features, transform: try PostTransform(ctx), twoLabels: labels.count == 2,
            weightsAllPositive: (coefficients.min() ?? 0) >= 0)
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            let (rows, columns) = try matrixShape(x, ctx)
            guard columns == features else { throw ctx.error(.executionFailed, "input has \(columns) features; the model expects \(features)") }
            let values = try floatValues(x, ctx)
            var picked: [Int] = [], scores: [Float] = []
            var width = 0
            values.withUnsafeBufferPointer { v in
                for r in 0..<rows {
                    let (label, row) = model.classify(v.baseAddress! + r * columns)
                    picked.append(label); scores += row; width = row.count
                }
            }
            let labelTensor: Tensor
            if labels.count == 0 {
                labelTensor = Tensor(shape: [rows], scalars: picked.map { Int64($0) })
            } else {
                labelTensor = labels.tensor(picked)
            }
            return [labelTensor, Tensor(shape: [rows, width], scalars: scores)]
        }
    },
    "SVMRegressor": { ctx in
        let supports = try ctx.int("n_supports", 0)
        let coefficients = try ctx.floats("coefficients") ?? [], supportVectors = try ctx.floats("support_vectors") ?? []
        let rho = (try ctx.floats("rho") ?? [0]).first ?? 0
        let oneClass = try ctx.int("one_class", 0) != 0
        let kernel = try SVMKernel(ctx, forceLinear: supports == 0)
        let transform = try PostTransform(ctx)
        let features = supports > 0 ? supportVectors.count / max(supports, 1) : coefficients.count
        guard supports == 0 || (supportVectors.count == supports * features && coefficients.count == supports) else {
            throw ctx.error(.invalidModel, "\(supports) supports do not match \(supportVectors.count) vector values and \(coefficients.count) coefficients")
        }
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            let (rows, columns) = try matrixShape(x, ctx)
            guard columns == features else { throw ctx.error(.executionFailed, "input has \(columns) features; the model expects \(features)") }
            let values = try floatValues(x, ctx)
            var out = [Float](repeating: 0, count: rows)
            values.withUnsafeBufferPointer { v in
                supportVectors.withUnsafeBufferPointer { sv in
                    coefficients.withUnsafeBufferPointer { c in
                        for r in 0..<rows {
                            let row = v.baseAddress! + r * columns
                            var s: Float = 0
                            if supports > 0 {
                                for j in 0..<supports { s += c[j] * kernel(row, sv.baseAddress! + j * features, features) }
                            } else {
                                s = kernel(row, c.baseAddress!, features)
                            }
                            s += rho
                            out[r] = oneClass ? (s > 0 ? 1 : -1) : s
                        }
                    }
                }
            }
            if transform != .none {
                out.withUnsafeMutableBufferPointer { p in
                    for r in 0..<rows { transform.apply(UnsafeMutableBufferPointer(rebasing: p[r..<(r + 1)])) }
                }
            }
            return [Tensor(shape: [rows, 1], scalars: out)]
        }
    },
]

// MARK: TreeEnsemble (ai.onnx.ml opset 5)

/// The opset-5 tree layout: nodes index children either as nodes or as leaves (`nodes_trueleafs`/`nodes_falseleafs`).
private struct LeafIndexedForest: Sendable {
    var feature: [Int], split: [Float], mode: [UInt8], missingGoesTrue: [Bool]
    var trueChild: [Int], falseChild: [Int], trueIsLeaf: [Bool], falseIsLeaf: [Bool]
    var members: [[Float]]
    var leafTarget: [Int], leafWeight: [Float]
    /// Per tree: (index, isLeaf) of the root.
    var roots: [(Int, Bool)]

    init(_ ctx: OpContext, targets: Int) throws {
        feature = try ctx.ints("nodes_featureids") ?? []
        let n = feature.count
        split = (try ctx.tensor("nodes_splits"))?.doubles.map { Float($0) } ?? []
        mode = (try ctx.tensor("nodes_modes"))?.ints.map { UInt8(clamping: $0) } ?? []
        trueChild = try ctx.ints("nodes_truenodeids") ?? []
        falseChild = try ctx.ints("nodes_falsenodeids") ?? []
        trueIsLeaf = (try ctx.ints("nodes_trueleafs") ?? []).map { $0 != 0 }
        falseIsLeaf = (try ctx.ints("nodes_falseleafs") ?? []).map { $0 != 0 }
        let missing = try ctx.ints("nodes_missing_value_tracks_true") ?? []
        missingGoesTrue = missing.isEmpty ? Array(repeating: false, count: n) : missing.map { $0 != 0 }
        leafTarget = try ctx.ints("leaf_targetids") ?? []
        leafWeight = (try ctx.tensor("leaf_weights"))?.doubles.map { Float($0) } ?? []
        guard [split.count, mode.count, trueChild.count, falseChild.count, trueIsLeaf.count, falseIsLeaf.count, missingGoesTrue.count]
                .allSatisfy({ $0 == n }), leafTarget.count == leafWeight.count else {
            throw ctx.error(.invalidModel, "nodes_* attributes must have one entry per node (\(n)) and leaf_* one per leaf")
        }
        guard mode.allSatisfy({ $0 <= 6 }) else { throw ctx.unsupported("nodes_modes", "\(mode.filter { $0 > 6 })") }
        for t in leafTarget where t < 0 || t >= targets { throw ctx.error(.invalidModel, "leaf target \(t) is out of range 0..<\(targets)") }
        for i in 0..<n {
            for (child, leaf) in [(trueChild[i], trueIsLeaf[i]), (falseChild[i], falseIsLeaf[i])] where child < 0 || child >= (leaf ? leafTarget.count : n) {
                throw ctx.error(.invalidModel, "node \(i) points to missing \(leaf ? "leaf" : "node") \(child)")
            }
        }
        // Set-membership nodes take their members, in node order, from NaN-separated groups.
        let memberValues = (try ctx.tensor("membership_values"))?.doubles.map { Float($0) } ?? []
        var groups: [[Float]] = [[]]
        for v in memberValues { if v.isNaN { groups.append([]) } else { groups[groups.count - 1].append(v) } }
        var next = 0
        members = Array(repeating: [], count: n)
        for i in 0..<n where mode[i] == 6 {
            guard next < groups.count else { throw ctx.error(.invalidModel, "membership_values has too few groups for the MEMBER nodes") }
            members[i] = groups[next]; next += 1
        }
        let (ts, fs, tl, fl) = (trueChild, falseChild, trueIsLeaf, falseIsLeaf)
        roots = try (try ctx.ints("tree_roots") ?? []).map { r in
            guard r >= 0 && r < n else { throw ctx.error(.invalidModel, "tree root \(r) is out of range") }
            // A tree that is a single leaf: both branches name the same leaf.
            let isLeaf = tl[r] && fl[r] && ts[r] == fs[r]
            return isLeaf ? (ts[r], true) : (r, false)
        }
    }

    /// The leaf reached from `root` by the row at `x`, or nil when a feature is out of range (or the tree loops).
    func leaf(_ root: (Int, Bool), _ x: UnsafePointer<Float>, columns: Int) -> Int? {
        var (i, isLeaf) = root
        var steps = 0
        while !isLeaf {
            guard feature[i] >= 0, feature[i] < columns, steps <= feature.count else { return nil }
            let v = x[feature[i]], t = split[i]
            var goTrue: Bool
            switch mode[i] {
            case 0: goTrue = v <= t
            case 1: goTrue = v < t
            case 2: goTrue = v >= t
            case 3: goTrue = v > t
            case 4: goTrue = v == t
            case 5: goTrue = v != t
            default: goTrue = members[i].contains(v)
            }
            if v.isNaN && missingGoesTrue[i] { goTrue = true }
            (i, isLeaf) = goTrue ? (trueChild[i], trueIsLeaf[i]) : (falseChild[i], falseIsLeaf[i])
            steps += 1
        }
        return i
    }
}

let treeEnsembleOperators: OperatorTable = [
    "TreeEnsemble": { ctx in
        let targets = try ctx.int("n_targets", 1)
        guard targets >= 1 else { throw ctx.error(.invalidModel, "n_targets must be at least 1, got \(targets)") }
        let forest = try LeafIndexedForest(ctx, targets: targets)
        let function = try ctx.int("aggregate_function", 1)
        guard (0...3).contains(function) else { throw ctx.unsupported("aggregate_function", "\(function)") }
        let transforms: [PostTransform] = [.none, .softmax, .logistic, .softmaxZero, .probit]
        let transformCode = try ctx.int("post_transform", 0)
        guard transforms.indices.contains(transformCode) else { throw ctx.unsupported("post_transform", "\(transformCode)") }
        let transform = transforms[transformCode]
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            guard x.dtype == .float32 || x.dtype == .float64 || x.dtype == .float16 else {
                throw ctx.error(.unsupportedDType, "input must be float, double or float16, got \(x.dtype)")
            }
            let (rows, columns) = try matrixShape(x, ctx)
            let values = x.dtype == .float32 ? x.scalars(as: Float.self) : x.doubles.map { Float($0) }
            // Targets no leaf reaches stay 0 (as onnxruntime leaves them), also under MIN and MAX.
            var out = [Float](repeating: 0, count: rows * targets)
            try values.withUnsafeBufferPointer { v in
                for r in 0..<rows {
                    var seen = [Bool](repeating: false, count: targets)
                    for root in forest.roots {
                        guard let leaf = forest.leaf(root, v.baseAddress! + r * columns, columns: columns) else {
                            throw ctx.error(.executionFailed, "a tree reads a feature beyond the input's \(columns) columns (or loops)")
                        }
                        let at = r * targets + forest.leafTarget[leaf], w = forest.leafWeight[leaf]
                        switch function {
                        case 2: out[at] = seen[forest.leafTarget[leaf]] ? Swift.min(out[at], w) : w
                        case 3: out[at] = seen[forest.leafTarget[leaf]] ? Swift.max(out[at], w) : w
                        default: out[at] += w
                        }
                        seen[forest.leafTarget[leaf]] = true
                    }
                }
            }
            if function == 0 { for i in out.indices { out[i] /= Float(max(forest.roots.count, 1)) } }
            out.withUnsafeMutableBufferPointer { p in
                for r in 0..<rows { transform.apply(UnsafeMutableBufferPointer(rebasing: p[(r * targets)..<((r + 1) * targets)])) }
            }
            return [try castTensor(Tensor(shape: [rows, targets], scalars: out), to: x.dtype, ctx)]
        }
    },
]
