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
        g.inputs += outer.filter { !own.contains($0) }.map { ValueInfo(name: $0) }
        do {
            return try CompiledModel(model: Model(opsetImports: ["": Int64(ctx.opset)], graph: g))
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

let controlFlowOperators: OperatorTable = [
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
