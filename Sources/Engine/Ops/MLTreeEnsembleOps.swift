import Foundation
import Tensor

// Tree-ensemble operators of `ai.onnx.ml`: TreeEnsembleRegressor/Classifier (opset 1-3) and TreeEnsemble (opset 5).


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


/// TreeEnsembleRegressor and TreeEnsembleClassifier (ai.onnx.ml opsets 1-3).
let legacyTreeEnsembleOperators: OperatorTable = [
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

/// TreeEnsemble (ai.onnx.ml opset 5) and the older regressor and classifier.
let treeEnsembleOperators: OperatorTable = legacyTreeEnsembleOperators.merging([
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
]) { first, _ in first }
