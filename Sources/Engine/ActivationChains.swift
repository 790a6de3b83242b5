import ONNX
import Tensor

/// Domain of the nodes the optimizer creates for fused activation chains (never read from a model).
let fusedDomain = "osprey.fused"

/// Op type of a fused activation chain; its `PlannedNode.activation` says which function it computes.
let fusedActivationOp = "Activation"

/// Elementwise ops a chain may contain: each takes the chain's value and scalar constants, one output.
private let chainOps: Set<String> = ["Add", "Sub", "Mul", "Div", "Clip", "Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Log", "Softplus",
                                     "Neg", "Abs", "Pow", "Min", "Max", "Sqrt", "Reciprocal", "HardSigmoid", "HardSwish", "LeakyRelu"]

/// Ops defined on floating-point types only: a chain containing one (or a float32 constant) runs on floats.
private let floatOnlyOps: Set<String> = ["Sigmoid", "Tanh", "Erf", "Exp", "Log", "Softplus", "Sqrt", "Reciprocal", "HardSigmoid", "HardSwish"]

/// Probe points the chain and its candidate activation are compared on: dense over the range where the
/// functions differ, plus far values where saturation and overflow show.
private let probePoints: [Float] = stride(from: -12 as Float, through: 12, by: 0.173).map { $0 }
    + [-1000, -100, -30, -20.5, -6, -3, -2, -1e-3, 0, 1e-3, 2, 3, 6, 20.5, 30, 100, 1000]

extension GraphOptimizer {
    /// Replaces decomposed activations (HardSwish as `x * Clip(x + 3, 0, 6) / 6` and its variants, HardSigmoid,
    /// SiLU `x * Sigmoid(x)`, GELU through Erf or its tanh form, Mish, ...) by one fused node that runs them in a
    /// single vectorised pass, and that `fuseActivations` can move into a Conv or Gemm epilogue.
    ///
    /// A chain is a set of elementwise nodes fed by one value x and scalar float constants whose intermediate values
    /// have no consumer outside the chain and are not graph outputs. What it computes is identified by evaluating
    /// it on probe values with the operators' own kernels and comparing with each epilogue activation (parameters
    /// fitted where they have some), so every spelling of the same function matches and nothing else does.
    mutating func fuseActivationChains() {
        var index = nodes.count - 1
        var links = ValueLinks(nodes)
        while index >= 0 {
            defer { index -= 1 }
            guard isChainNode(nodes[index].node), let (members, x, activation) = bestChain(endingAt: index, links) else { continue }
            let root = nodes[index].node
            // A constant of higher rank than x would broadcast x up to it: the fused node keeps that rank.
            let rank = members.flatMap { nodes[$0].node.inputs }.compactMap { constants[$0]?.rank }.max() ?? 0
            var fused = PlannedNode(node: Node(name: root.name, opType: fusedActivationOp, domain: fusedDomain, inputs: [x], outputs: root.outputs,
                                               attributes: ["minimum_rank": .int(Int64(rank))]))
            fused.activation = activation
            nodes[index] = fused
            for i in members.sorted(by: >) where i != index { nodes.remove(at: i) }
            index -= members.filter { $0 < index }.count
            links = ValueLinks(nodes)
        }
    }

    private func isChainNode(_ node: Node) -> Bool {
        isDefaultDomain(node.domain) && chainOps.contains(node.opType) && node.outputs.count == 1 && !node.outputs[0].isEmpty
    }

    private func isScalarFloatConstant(_ name: String) -> Bool {
        guard let c = constants[name] else { return false }
        return c.dtype == .float32 && c.count == 1
    }

    /// The largest valid chain ending at node `root` that computes a known activation: member indices, x, activation.
    private func bestChain(endingAt root: Int, _ links: ValueLinks) -> ([Int], String, Activation)? {
        // Elementwise ancestors of the root, at most a dozen nodes back.
        var ancestors: Set<Int> = [root]
        var frontier = [root]
        while let i = frontier.popLast(), ancestors.count < 12 {
            for name in nodes[i].node.inputs where !name.isEmpty && constants[name] == nil {
                guard let p = links.producer[name], p < i, isChainNode(nodes[p].node),
                      !ancestors.contains(p) else { continue }
                ancestors.insert(p)
                frontier.append(p)
            }
        }
        guard ancestors.count >= 2 else { return nil }
        let ordered = ancestors.sorted()
        var candidates = Set<String>()
        for i in ordered { for name in nodes[i].node.inputs where !name.isEmpty && constants[name] == nil { candidates.insert(name) } }
        var chains: [([Int], String)] = []
        for x in candidates {
            // Members: the ancestors that depend on x.
            var produced: Set<String> = [x]
            var members: [Int] = []
            for i in ordered where nodes[i].node.inputs.contains(where: { produced.contains($0) }) {
                members.append(i)
                produced.insert(nodes[i].node.outputs[0])
            }
            guard members.count >= 2, members.last == root, isValidChain(members, x: x, links) else { continue }
            chains.append((members, x))
        }
        for (members, x) in chains.sorted(by: { $0.0.count > $1.0.count }) {
            if let activation = identify(members, x: x) { return (members, x, activation) }
        }
        return nil
    }

    /// Every member reads only x, scalar float constants and other members; no intermediate escapes the chain.
    private func isValidChain(_ members: [Int], x: String, _ links: ValueLinks) -> Bool {
        let outputs = Set(members.map { nodes[$0].node.outputs[0] })
        var floatTyped = false
        for i in members {
            let node = nodes[i].node
            if floatOnlyOps.contains(node.opType) { floatTyped = true }
            for name in node.inputs where !name.isEmpty {
                if name == x || outputs.contains(name) { continue }
                guard isScalarFloatConstant(name) else { return false }
                floatTyped = true
            }
        }
        guard floatTyped else { return false }
        let memberSet = Set(members)
        for i in members.dropLast() {
            let out = nodes[i].node.outputs[0]
            if graphOutputs.contains(out) { return false }
            if links.consumers[out, default: []].contains(where: { !memberSet.contains($0) }) { return false }
        }
        return true
    }

    /// Runs the chain on `values` as x with the operators' kernels; nil when a kernel rejects it.
    private func evaluate(_ members: [Int], x: String, on values: [Float]) -> [Float]? {
        var env: [String: Tensor] = [x: Tensor(shape: [values.count], scalars: values)]
        for i in members {
            let node = nodes[i].node
            guard let factory = operatorTable[node.opType] else { return nil }
            var known: [Int: Tensor] = [:]
            for (k, name) in node.inputs.enumerated() where !name.isEmpty { if let c = constants[name] { known[k] = c } }
            let ctx = OpContext(node: node, opset: opset, constants: known, activation: .none)
            var inputs = KernelInputs(values: node.inputs.map { $0.isEmpty ? nil : (env[$0] ?? constants[$0]) })
            guard let outputs = try? factory(ctx).kernel(&inputs), let out = outputs.first, out.dtype == .float32,
                  out.count == values.count else { return nil }
            env[node.outputs[0]] = out
        }
        return env[nodes[members.last!].node.outputs[0]]?.scalars(as: Float.self)
    }

    /// The epilogue activation the chain computes on every probe point, if any.
    private func identify(_ members: [Int], x: String) -> Activation? {
        guard let f = evaluate(members, x: x, on: probePoints) else { return nil }
        func at(_ p: Float) -> Float { f[probePoints.firstIndex(of: p)!] }
        var candidates: [Activation] = [.hardSwish, .silu, .gelu, .geluTanh, .mish, .sigmoid, .tanh, .relu]
        let beta = at(0), alpha = (at(2) - at(-2)) / 4
        if alpha > 0, beta > 0, beta < 1 { candidates.append(.hardSigmoid(alpha: alpha, beta: beta)) }
        if at(-2) < 0 { candidates.append(.leakyRelu(alpha: at(-1e-3) / -1e-3)) }
        let lo = at(-1000), hi = at(1000)
        if lo < hi, lo > -1000 || hi < 1000 { candidates.append(.clip(min: lo > -1000 ? lo : -.greatestFiniteMagnitude, max: hi < 1000 ? hi : .greatestFiniteMagnitude)) }
        return candidates.first { activation in
            zip(probePoints, f).allSatisfy { p, value in
                let expected = activation(p)
                return abs(value - expected) <= 1e-5 * max(1, abs(expected))
            }
        }
    }
}

/// Which node produces and which nodes read each value (chain search would otherwise scan the graph per value).
private struct ValueLinks {
    var producer: [String: Int] = [:]
    var consumers: [String: [Int]] = [:]

    init(_ nodes: [PlannedNode]) {
        for (i, planned) in nodes.enumerated() {
            for o in planned.node.outputs where !o.isEmpty { producer[o] = i }
            for name in Set(planned.node.inputs) where !name.isEmpty { consumers[name, default: []].append(i) }
        }
    }
}

/// The kernel of a fused activation chain: one vectorised pass (threaded for large tensors) on float32, in place
/// when the executor handed over the last reference; other float types compute in float32, as the unary ops do.
let fusedOperatorTable: OperatorTable = [
    fusedActivationOp: { ctx in
        let activation = ctx.activation
        let minimumRank = try ctx.int("minimum_rank", 0)
        return PreparedKernel { inputs in
            guard let dtype = inputs[0]?.dtype, let rank = inputs[0]?.rank else { throw ctx.error(.invalidModel, "missing input") }
            if rank < minimumRank {
                let x = inputs.take(0)!
                inputs.values[0] = x.reshaped([Int](repeating: 1, count: minimumRank - rank) + x.shape)
            }
            if dtype == .float32 { return [applyActivation(activation, taking: 0, from: &inputs)] }
            guard dtype == .float64 || dtype == .float16 || dtype == .bfloat16 else {
                throw ctx.error(.unsupportedDType, "input dtype \(dtype) is not supported (float types)")
            }
            var wide = KernelInputs(values: [try castTensor(inputs.required(0, ctx), to: .float32, ctx)])
            return [try castTensor(applyActivation(activation, taking: 0, from: &wide), to: dtype, ctx)]
        }
    },
    replaceNaNOp: replaceNaNKernel,
    softmaxReplaceNaNOp: softmaxReplaceNaNKernel,
    fusedLayerNormOp: fusedLayerNormKernel,
    dequantizedQLinearMatMulOp: dequantizedQLinearMatMulKernel,
    convMaxPoolOp: convMaxPoolKernel,
    headAttentionOp: headAttentionKernel,
    permutedShapeOp: permutedShapeKernel,
]
