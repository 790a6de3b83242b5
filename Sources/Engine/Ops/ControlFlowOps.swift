import ONNX
import Tensor

/// Subgraph helpers for If and Loop.
enum Subgraphs {
    /// Names a node's subgraphs read from enclosing scopes, in first-use order.
    static func freeVariables(of node: Node) -> [String] {
        var names: [String] = []
        var seen = Set<String>()
        for attribute in node.attributes.values.sorted(by: { $0.kindName < $1.kindName }) {
            let graphs: [Graph]
            switch attribute {
            case .graph(let g): graphs = [g]
            case .graphs(let gs): graphs = gs
            default: continue
            }
            for g in graphs { for name in freeVariables(of: g) where seen.insert(name).inserted { names.append(name) } }
        }
        return names
    }

    /// Names `graph` (and its nested subgraphs) use but neither defines nor receives as inputs or initializers.
    static func freeVariables(of graph: Graph) -> [String] {
        var defined = Set(graph.inputs.map(\.name)).union(graph.initializers.map(\.name))
        for node in graph.nodes { defined.formUnion(node.outputs) }
        var names: [String] = []
        var seen = Set<String>()
        for node in graph.nodes {
            for name in node.inputs + freeVariables(of: node) where !name.isEmpty && !defined.contains(name) && seen.insert(name).inserted {
                names.append(name)
            }
        }
        for output in graph.outputs where !defined.contains(output.name) && seen.insert(output.name).inserted { names.append(output.name) }
        return names
    }

    /// Compiles `graph` as a model whose extra inputs are the outer values `outer` (types left undeclared).
    static func compile(_ graph: Graph, outer: [String], _ ctx: OpContext) throws -> CompiledModel {
        var g = graph
        let own = Set(g.inputs.map(\.name))
        // Exporters declare one-element body inputs as [1] where the spec says scalar, or the reverse (paddle2onnx's
        // Loop iteration count and condition); onnxruntime runs them, so such declarations are not enforced.
        for i in g.inputs.indices where g.inputs[i].shape.map({ $0.allSatisfy { $0.value == 1 } }) ?? false { g.inputs[i].shape = nil }
        g.inputs += outer.filter { !own.contains($0) }.map { ValueInfo(name: $0) }
        do {
            return try CompiledModel(model: Model(opsetImports: ["": Int64(ctx.opset)], graph: g), baseDirectory: nil, fuseResiduals: true, isSubgraph: true)
        } catch let error as EngineError {
            throw ctx.error(error.code, "subgraph '\(graph.name)': \(error.message)")
        }
    }

    /// The graph attribute `name`.
    static func graph(_ ctx: OpContext, _ name: String) throws -> Graph {
        guard case .graph(let g)? = ctx.node.attributes[name] else { throw ctx.error(.invalidModel, "attribute '\(name)' (a graph) is required") }
        return g
    }
}

/// `x` without position `index` of `axis` (one Scan iteration's slice).
private func sliceRemovingAxis(_ x: Tensor, axis: Int, index: Int) -> Tensor {
    var shape = x.shape
    shape[axis] = 1
    let piece = stridedCopy(x, shape: shape, strides: x.strides, offset: index * x.strides[axis])
    shape.remove(at: axis)
    return piece.reshaped(shape)
}

/// Per-iteration values stacked along a new `axis` (reversed first when `reverse`).
private func stack(_ parts: [Tensor], axis: Int, reverse: Bool, _ ctx: OpContext) throws -> Tensor {
    let ordered = reverse ? parts.reversed() : parts
    guard let first = ordered.first else { throw ctx.error(.executionFailed, "nothing to stack") }
    let a = try ctx.axis(axis, rank: first.rank + 1)
    return try concatenateElements(ordered.map { p in var shape = p.shape; shape.insert(1, at: a); return p.reshaped(shape) }, axis: a, ctx)
}

let controlFlowOperators: OperatorTable = [
    // Opset 9+ Scan: N state variables carried through the body, M scan inputs sliced along their axes, K scan
    // outputs stacked along theirs.
    // Scan: N state variables carried through the body, M scan inputs sliced along their axes, K scan outputs
    // stacked along theirs. Before opset 9 every input has a leading batch axis the body runs once per element of,
    // after an optional sequence_lens input.
    "Scan": { ctx in
        let batched = ctx.opset < 9
        let first = batched ? 1 : 0
        let body = try Subgraphs.graph(ctx, "body")
        let scanInputs = try ctx.int("num_scan_inputs", 0)
        let stateCount = body.inputs.count - scanInputs
        guard scanInputs >= 1, stateCount >= 0, body.outputs.count >= stateCount else {
            throw ctx.error(.invalidModel, "Scan body with \(body.inputs.count) inputs and \(body.outputs.count) outputs does not fit num_scan_inputs \(scanInputs)")
        }
        let scanOutputs = body.outputs.count - stateCount
        let inputAxes = batched ? Array(repeating: 0, count: scanInputs) : try ctx.ints("scan_input_axes") ?? Array(repeating: 0, count: scanInputs)
        let inputDirections = try ctx.ints(batched ? "directions" : "scan_input_directions") ?? Array(repeating: 0, count: scanInputs)
        let outputAxes = batched ? Array(repeating: 0, count: scanOutputs) : try ctx.ints("scan_output_axes") ?? Array(repeating: 0, count: scanOutputs)
        let outputDirections = batched ? Array(repeating: 0, count: scanOutputs) : try ctx.ints("scan_output_directions") ?? Array(repeating: 0, count: scanOutputs)
        guard inputAxes.count == scanInputs, inputDirections.count == scanInputs, outputAxes.count == scanOutputs, outputDirections.count == scanOutputs else {
            throw ctx.error(.invalidModel, "scan axes/directions attributes do not match \(scanInputs) scan inputs and \(scanOutputs) scan outputs")
        }
        let own = first + stateCount + scanInputs
        let outer = Array(ctx.node.inputs.dropFirst(min(own, ctx.node.inputs.count)))
        let compiled = try Subgraphs.compile(body, outer: outer, ctx)
        let bodyInputs = body.inputs.map(\.name), bodyOutputs = body.outputs.map(\.name)
        /// One unbatched scan: final states, then the stacked scan outputs.
        @Sendable func scan(_ initial: [Tensor], _ sequences: [Tensor], _ outerFeeds: [String: Tensor]) throws -> [Tensor] {
            var states = initial
            let axes = try zip(sequences, inputAxes).map { try ctx.axis($0.1, rank: $0.0.rank) }
            let lengths = zip(sequences, axes).map { $0.0.shape[$0.1] }
            guard let steps = lengths.first, lengths.allSatisfy({ $0 == steps }) else {
                throw ctx.error(.executionFailed, "scan inputs disagree on the number of iterations: \(lengths)")
            }
            var collected: [[Tensor]] = Array(repeating: [], count: scanOutputs)
            for t in 0..<steps {
                var feeds = outerFeeds
                for k in 0..<stateCount { feeds[bodyInputs[k]] = states[k] }
                for j in 0..<scanInputs {
                    feeds[bodyInputs[stateCount + j]] = sliceRemovingAxis(sequences[j], axis: axes[j], index: inputDirections[j] == 1 ? steps - 1 - t : t)
                }
                let results = try compiled.run(feeds)
                for k in 0..<stateCount { states[k] = results[bodyOutputs[k]]! }
                for k in 0..<scanOutputs { collected[k].append(results[bodyOutputs[stateCount + k]]!) }
            }
            var outputs = states
            for k in 0..<scanOutputs {
                if collected[k].isEmpty {
                    let spec = compiled.outputs[stateCount + k]
                    outputs.append(Tensor(dtype: spec.dtype, shape: [0] + spec.shape.map { $0.value ?? 0 }))
                    continue
                }
                outputs.append(try stack(collected[k], axis: outputAxes[k], reverse: outputDirections[k] == 1, ctx))
            }
            return outputs
        }
        return PreparedKernel { inputs in
            let states = try (0..<stateCount).map { try inputs.required(first + $0, ctx) }
            let sequences = try (0..<scanInputs).map { try inputs.required(first + stateCount + $0, ctx) }
            var outerFeeds: [String: Tensor] = [:]
            for (k, name) in outer.enumerated() { if let t = inputs[own + k] { outerFeeds[name] = t } }
            guard batched else { return try scan(states, sequences, outerFeeds) }
            let all = states + sequences
            guard all.allSatisfy({ $0.rank >= 1 }), let batch = all.first?.shape[0], all.allSatisfy({ $0.shape[0] == batch }) else {
                throw ctx.error(.executionFailed, "opset-8 Scan inputs need one leading batch axis, got \(all.map(\.shape))")
            }
            if let lengths = inputs[0] {
                let steps = sequences[0].rank >= 2 ? sequences[0].shape[1] : 0
                guard lengths.ints.allSatisfy({ $0 == steps }) else {
                    throw ctx.error(.unsupportedAttribute, "sequence_lens shorter than the scanned axis (\(lengths.ints) of \(steps)) is not supported")
                }
            }
            var perBatch: [[Tensor]] = []
            for b in 0..<batch {
                perBatch.append(try scan(states.map { sliceRemovingAxis($0, axis: 0, index: b) }, sequences.map { sliceRemovingAxis($0, axis: 0, index: b) },
                                         outerFeeds))
            }
            guard batch > 0 else { throw ctx.error(.executionFailed, "opset-8 Scan with an empty batch") }
            return try (0..<(stateCount + scanOutputs)).map { k in try stack(perBatch.map { $0[k] }, axis: 0, reverse: false, ctx) }
        }
    },
    "If": { ctx in
        let outer = Array(ctx.node.inputs.dropFirst())
        let thenBranch = try Subgraphs.compile(Subgraphs.graph(ctx, "then_branch"), outer: outer, ctx)
        let elseBranch = try Subgraphs.compile(Subgraphs.graph(ctx, "else_branch"), outer: outer, ctx)
        return PreparedKernel { inputs in
            let cond = try inputs.required(0, ctx)
            guard cond.count == 1 else { throw ctx.error(.executionFailed, "cond must hold one element, got \(cond.shape)") }
            let branch = cond.doubleValue(at: 0) != 0 ? thenBranch : elseBranch
            var feeds: [String: Tensor] = [:]
            for (k, name) in outer.enumerated() { if let t = inputs[k + 1] { feeds[name] = t } }
            let results = try branch.run(feeds)
            return branch.outputs.map { results[$0.name]! }
        }
    },
    // SequenceMap: the body runs once per element of the first input sequence; other sequence inputs give their
    // element at the same position, tensor inputs are passed whole; each body output is collected into a sequence.
    "SequenceMap": { ctx in
        let body = try Subgraphs.graph(ctx, "body")
        let explicit = body.inputs.count
        guard explicit >= 1, ctx.node.inputs.count >= explicit, body.outputs.count == ctx.node.outputs.count else {
            throw ctx.error(.invalidModel, "the body takes \(explicit) inputs and gives \(body.outputs.count) outputs; the node has \(ctx.node.inputs.count) and \(ctx.node.outputs.count)")
        }
        let outer = Array(ctx.node.inputs.dropFirst(explicit))
        let compiled = try Subgraphs.compile(body, outer: outer, ctx)
        let bodyInputs = body.inputs.map(\.name), bodyOutputs = body.outputs.map(\.name)
        let declaredTypes = body.outputs.map { $0.elementType ?? .float32 }
        return PreparedKernel { inputs in
            let given = try (0..<explicit).map { try inputs.required($0, ctx) }
            guard let samples = given[0].sequenceElements?.count else { throw ctx.error(.executionFailed, "input 0 must be a sequence, got \(given[0])") }
            for (k, value) in given.enumerated() {
                if let count = value.sequenceElements?.count, count != samples {
                    throw ctx.error(.executionFailed, "input \(k) is a sequence of \(count), input 0 of \(samples)")
                }
            }
            var outerFeeds: [String: Tensor] = [:]
            for (k, name) in outer.enumerated() { if let t = inputs[explicit + k] { outerFeeds[name] = t } }
            var collected = [[Tensor]](repeating: [], count: bodyOutputs.count)
            for i in 0..<samples {
                var feeds = outerFeeds
                for (k, value) in given.enumerated() { feeds[bodyInputs[k]] = value.sequenceElements?[i] ?? value }
                let results = try compiled.run(feeds)
                for k in bodyOutputs.indices { collected[k].append(results[bodyOutputs[k]]!) }
            }
            return collected.enumerated().map { k, parts in Tensor(sequence: parts, elementType: parts.first?.dtype ?? declaredTypes[k]) }
        }
    },
    "Loop": { ctx in
        let body = try Subgraphs.graph(ctx, "body")
        guard body.inputs.count >= 2, body.outputs.count >= 1 else { throw ctx.error(.invalidModel, "Loop body needs (iteration, condition, ...) inputs and a condition output") }
        let carriedCount = body.inputs.count - 2
        let firstOuter = 2 + carriedCount
        let outer = Array(ctx.node.inputs.dropFirst(min(firstOuter, ctx.node.inputs.count)))
        let compiled = try Subgraphs.compile(body, outer: outer, ctx)
        let bodyInputs = body.inputs.map(\.name), bodyOutputs = body.outputs.map(\.name)
        return PreparedKernel { inputs in
            let maxTrips = inputs[0].map { Int($0.doubleValue(at: 0)) }
            var condition = inputs[1].map { $0.doubleValue(at: 0) != 0 } ?? true
            var carried = try (0..<carriedCount).map { try inputs.required(2 + $0, ctx) }
            var outerFeeds: [String: Tensor] = [:]
            for (k, name) in outer.enumerated() { if let t = inputs[firstOuter + k] { outerFeeds[name] = t } }
            var scans: [[Tensor]] = Array(repeating: [], count: bodyOutputs.count - 1 - carriedCount)
            var iteration = 0
            while condition && (maxTrips.map { iteration < $0 } ?? true) {
                var feeds = outerFeeds
                feeds[bodyInputs[0]] = Tensor(scalar: Int64(iteration))
                feeds[bodyInputs[1]] = Tensor(scalar: condition)
                for k in 0..<carriedCount { feeds[bodyInputs[2 + k]] = carried[k] }
                let results = try compiled.run(feeds)
                condition = results[bodyOutputs[0]]!.doubleValue(at: 0) != 0
                for k in 0..<carriedCount { carried[k] = results[bodyOutputs[1 + k]]! }
                for k in 0..<scans.count { scans[k].append(results[bodyOutputs[1 + carriedCount + k]]!) }
                iteration += 1
                if iteration > 10_000_000 { throw ctx.error(.executionFailed, "loop ran more than 10 million iterations") }
            }
            var outputs = carried
            for (k, parts) in scans.enumerated() {
                if parts.isEmpty {
                    let spec = compiled.outputs[1 + carriedCount + k]
                    outputs.append(Tensor(dtype: spec.dtype, shape: [0] + spec.shape.map { $0.value ?? 0 }))
                    continue
                }
                guard parts.allSatisfy({ $0.shape == parts[0].shape && $0.dtype == parts[0].dtype }) else {
                    throw ctx.error(.executionFailed, "scan output \(k) changes shape between iterations")
                }
                outputs.append(Tensor.concatenatingRows(parts.map { $0.reshaped([1] + $0.shape) }))
            }
            return outputs
        }
    },
]
