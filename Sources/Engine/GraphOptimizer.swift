import ONNX
import Tensor

/// A node on its way to becoming a step, with the epilogue the compiler fused into it.
struct PlannedNode {
    var node: Node
    var activation: Activation = .none
    /// True when a residual Add was fused into this Conv: the skip operand is the node's input 3.
    var residual = false
}

/// Input index of the skip operand of a Conv with a fused residual Add (after X, W and B).
let fusedResidualInput = 3

/// Graph rewrites done once at compile time: ordering, constant folding, BatchNormalization folding, activation fusion.
struct GraphOptimizer {
    var nodes: [PlannedNode]
    var constants: [String: Tensor]
    let graphOutputs: Set<String>
    let opset: Int

    /// Orders nodes so every value is produced before use (file order is not trusted).
    static func topologicalOrder(_ nodes: [Node], available: Set<String>) throws -> [Node] {
        var producer: [String: Int] = [:]
        for (i, n) in nodes.enumerated() {
            for o in n.outputs where !o.isEmpty {
                if producer[o] != nil || available.contains(o) {
                    throw EngineError(.invalidModel, "value '\(o)' is produced more than once (node '\(n.name)' \(n.opType))")
                }
                producer[o] = i
            }
        }
        var pending = [Int](repeating: 0, count: nodes.count)
        var consumers: [[Int]] = Array(repeating: [], count: nodes.count)
        for (i, n) in nodes.enumerated() {
            for input in Set(n.inputs) where !input.isEmpty {
                if let p = producer[input] {
                    pending[i] += 1
                    consumers[p].append(i)
                } else if !available.contains(input) {
                    throw EngineError(.invalidModel, "\(n.opType) node '\(n.name)' reads '\(input)', which no node, input or initializer provides")
                }
            }
        }
        var ready = (0..<nodes.count).filter { pending[$0] == 0 }.reversed() as [Int]
        var order: [Node] = []
        while let i = ready.popLast() {
            order.append(nodes[i])
            for c in consumers[i].reversed() {
                pending[c] -= 1
                if pending[c] == 0 { ready.append(c) }
            }
        }
        guard order.count == nodes.count else { throw EngineError(.invalidModel, "the graph has a cycle") }
        return order
    }

    private func context(_ node: Node, activation: Activation = .none) -> OpContext {
        var known: [Int: Tensor] = [:]
        for (i, name) in node.inputs.enumerated() where !name.isEmpty {
            if let c = constants[name] { known[i] = c }
        }
        return OpContext(node: node, opset: opset, constants: known, activation: activation)
    }

    /// Evaluates every node whose inputs are all constant, replacing it by its outputs.
    mutating func foldConstants() throws {
        var kept: [PlannedNode] = []
        for planned in nodes {
            let node = planned.node
            let allConstant = node.inputs.allSatisfy { $0.isEmpty || constants[$0] != nil }
            // Random generators draw anew on every run: never fold them into constants.
            guard allConstant, !randomOperatorNames.contains(node.opType), node.domain.isEmpty || node.domain == "ai.onnx",
                  let factory = operatorTable[node.opType] else {
                kept.append(planned)
                continue
            }
            let ctx = context(node)
            var inputs = KernelInputs(values: node.inputs.map { $0.isEmpty ? nil : constants[$0] })
            let outputs = try factory(ctx).kernel(&inputs)
            for (i, name) in node.outputs.enumerated() where !name.isEmpty && i < outputs.count {
                constants[name] = outputs[i]
            }
        }
        nodes = kept
    }

    /// Indices of the nodes that read `value`.
    func consumers(of value: String) -> [Int] {
        nodes.indices.filter { nodes[$0].node.inputs.contains(value) }
    }

    /// The index of the one node that reads `value` when nothing else does (nor the graph's outputs): a fusion may
    /// then drop `value` as an intermediate.
    func soleReader(of value: String) -> Int? {
        guard !graphOutputs.contains(value) else { return nil }
        let users = consumers(of: value)
        return users.count == 1 ? users[0] : nil
    }

    /// Offers each node in order to `rewrite` (one fusion at that node's index), re-reading the count as fusions remove
    /// the nodes they absorb: `rewrite` returns true when it removed a node at or before that index, so the next node,
    /// now at the same index, is offered too.
    mutating func rewriteEachNode(_ rewrite: (inout GraphOptimizer, Int) -> Bool) {
        var index = 0
        while index < nodes.count {
            if !rewrite(&self, index) { index += 1 }
        }
    }

    /// Folds an inference BatchNormalization into the Conv or ConvTranspose before it when that output feeds nothing else.
    mutating func foldBatchNormalization() {
        rewriteEachNode { $0.foldBatchNormalization(convAt: $1) }
    }

    /// One fold into the Conv or ConvTranspose at `index`, when the pattern is there; true when the BatchNormalization
    /// removed stood before it.
    private mutating func foldBatchNormalization(convAt index: Int) -> Bool {
        let conv = nodes[index].node
        let transposed = conv.opType == "ConvTranspose"
        guard conv.opType == "Conv" || transposed, conv.domain.isEmpty, let out = conv.outputs.first,
              conv.inputs.count >= 2, let w = constants[conv.inputs[1]], w.dtype == .float32, w.rank >= 3 else { return false }
        // Output channels: weights' axis 0 for Conv; groups x axis 1 for ConvTranspose ([C, M / group, k...]).
        var groups = 1
        if transposed, case .int(let g)? = conv.attributes["group"] { groups = Int(g) }
        let outChannels = transposed ? groups * w.shape[1] : w.shape[0]
        guard let user = soleReader(of: out) else { return false }
        let bn = nodes[user].node
        guard bn.opType == "BatchNormalization", bn.inputs.first == out, bn.inputs.count >= 5,
              bn.outputs.dropFirst().allSatisfy({ $0.isEmpty }),
              case let params = bn.inputs[1...4].compactMap({ constants[$0] }), params.count == 4,
              params.allSatisfy({ $0.dtype == .float32 && $0.count == outChannels }) else { return false }
        if case .int(let mode)? = bn.attributes["training_mode"], mode != 0 { return false }
        if case .int(let spatial)? = bn.attributes["spatial"], spatial != 1 { return false }
        var epsilon: Float = 1e-5
        if case .float(let e)? = bn.attributes["epsilon"] { epsilon = e }
        let oldBias: [Float]
        if conv.inputs.count > 2, !conv.inputs[2].isEmpty {
            guard let b = constants[conv.inputs[2]], b.dtype == .float32, b.count == outChannels else { return false }
            oldBias = b.scalars(as: Float.self)
        } else {
            oldBias = Array(repeating: 0, count: outChannels)
        }
        let scale = params[0].scalars(as: Float.self), shift = params[1].scalars(as: Float.self)
        let mean = params[2].scalars(as: Float.self), variance = params[3].scalars(as: Float.self)
        let m = outChannels
        var weights = w.scalars(as: Float.self)
        var bias = oldBias
        for c in 0..<m {
            let s = scale[c] / (variance[c] + epsilon).squareRoot()
            if transposed {
                // Channel c = g * (M / group) + j scales block j of every input channel of group g.
                let perGroup = w.shape[1], taps = w.count / (w.shape[0] * perGroup), inPerGroup = w.shape[0] / groups
                let g = c / perGroup, j = c % perGroup
                for ic in (g * inPerGroup)..<((g + 1) * inPerGroup) {
                    let base = (ic * perGroup + j) * taps
                    for i in 0..<taps { weights[base + i] *= s }
                }
            } else {
                let per = w.count / m
                for i in 0..<per { weights[c * per + i] *= s }
            }
            bias[c] = (oldBias[c] - mean[c]) * s + shift[c]
        }
        let wName = "\(out)::bn_folded_weights", bName = "\(out)::bn_folded_bias"
        constants[wName] = Tensor(shape: w.shape, scalars: weights)
        constants[bName] = Tensor(shape: [m], scalars: bias)
        var fused = conv
        fused.inputs = [conv.inputs[0], wName, bName]
        fused.outputs = [bn.outputs[0]]
        nodes[index].node = fused
        nodes.remove(at: user)
        // Drop the unfolded operands no other node reads, so their memory goes now, not after compilation.
        for name in [conv.inputs[1]] + (conv.inputs.count > 2 ? [conv.inputs[2]] : []) + bn.inputs[1...4]
        where !name.isEmpty && !graphOutputs.contains(name) && !nodes.contains(where: { $0.node.inputs.contains(name) }) {
            constants[name] = nil
        }
        return user < index
    }

    /// The activation a node computes, when it is one the Conv/Gemm epilogues implement.
    private func fusableActivation(_ node: Node) -> Activation? {
        guard node.domain.isEmpty || node.domain == "ai.onnx" else { return nil }
        func float(_ name: String, _ fallback: Float) -> Float {
            switch node.attributes[name] {
            case .float(let v)?: return v
            case .int(let v)?: return Float(v)
            default: return fallback
            }
        }
        switch node.opType {
        case "Relu": return .relu
        case "LeakyRelu": return .leakyRelu(alpha: float("alpha", 0.01))
        case "Sigmoid": return .sigmoid
        case "Tanh": return .tanh
        case "HardSwish": return .hardSwish
        case "HardSigmoid": return .hardSigmoid(alpha: float("alpha", 0.2), beta: float("beta", 0.5))
        case "Clip":
            if opset < 11 { return .clip(min: float("min", -.greatestFiniteMagnitude), max: float("max", .greatestFiniteMagnitude)) }
            var bounds: [Float] = [-.greatestFiniteMagnitude, .greatestFiniteMagnitude]
            for k in 1..<3 where k < node.inputs.count && !node.inputs[k].isEmpty {
                guard let c = constants[node.inputs[k]], c.count == 1, c.dtype == .float32 else { return nil }
                bounds[k - 1] = Float(c.doubleValue(at: 0))
            }
            return .clip(min: bounds[0], max: bounds[1])
        default: return nil
        }
    }

    /// The activation a planned node computes: a fused activation chain's, or an activation operator's.
    func fusableActivation(_ planned: PlannedNode) -> Activation? {
        if planned.node.domain == fusedDomain && planned.node.opType == fusedActivationOp,
           case .int(let rank)? = planned.node.attributes["minimum_rank"], rank <= 1 {
            return planned.activation
        }
        return fusableActivation(planned.node)
    }

    /// Fuses `Add(Conv(x), skip)` (and a single-consumer activation after it) into the Conv's epilogue, which adds
    /// the skip before the activation. Only packed 1-D/2-D Convs with constant weights qualify, whose output feeds
    /// nothing but that Add. The fused node sits where the Add was, so the skip is always computed before it.
    mutating func fuseResidualAdds() {
        rewriteEachNode { $0.fuseResidualAdd(addAt: $1) }
    }

    /// One fusion of the Add at `index` into the Conv before it, when the pattern is there; true when it did (the Conv
    /// is then removed, and the fused node takes the Add's place).
    private mutating func fuseResidualAdd(addAt index: Int) -> Bool {
        let add = nodes[index].node
        guard add.opType == "Add", add.domain.isEmpty || add.domain == "ai.onnx", add.attributes.isEmpty, add.inputs.count == 2,
              add.outputs.count == 1, add.inputs[0] != add.inputs[1] else { return false }
        // Either operand may be the conv; prefer the one produced last (its inputs are the freshest).
        var best: (conv: Int, skip: String)?
        for (k, name) in add.inputs.enumerated() {
            guard let p = nodes[..<index].lastIndex(where: { $0.node.outputs.contains(name) }), isResidualFusable(p),
                  !graphOutputs.contains(name), consumers(of: name) == [index] else { continue }
            if best == nil || p > best!.conv { best = (p, add.inputs[1 - k]) }
        }
        guard let (convIndex, skip) = best, constants[skip] == nil else { return false }
        var fused = nodes[convIndex]
        while fused.node.inputs.count < fusedResidualInput { fused.node.inputs.append("") }
        fused.node.inputs.append(skip)
        fused.node.outputs = add.outputs
        fused.residual = true
        let out = add.outputs[0]
        if let user = soleReader(of: out), let act = fusableActivation(nodes[user]), nodes[user].node.inputs.first == out {
            fused.activation = act
            fused.node.outputs = [nodes[user].node.outputs[0]]
            nodes.remove(at: user)
        }
        nodes[index] = fused
        nodes.remove(at: convIndex)
        return true
    }

    /// A Conv whose weights (and bias) are constant float32 1-D/2-D kernels with no epilogue yet.
    private func isResidualFusable(_ i: Int) -> Bool {
        let n = nodes[i].node
        guard n.opType == "Conv", n.domain.isEmpty || n.domain == "ai.onnx", case .none = nodes[i].activation, !nodes[i].residual,
              n.outputs.count == 1, n.inputs.count >= 2, n.inputs.count <= 3,
              let w = constants[n.inputs[1]], w.dtype == .float32, w.rank == 3 || w.rank == 4 else { return false }
        if n.inputs.count == 3, !n.inputs[2].isEmpty, constants[n.inputs[2]] == nil { return false }
        return true
    }

    /// Moves a single-consumer activation into the preceding Conv, Gemm, ConvTranspose, BatchNormalization or MatMul epilogue.
    mutating func fuseActivations() {
        rewriteEachNode { $0.fuseActivation(producerAt: $1) }
    }

    /// One move of the activation that alone reads the node at `index` into it, when the pattern is there; true when
    /// the activation removed stood before it.
    private mutating func fuseActivation(producerAt index: Int) -> Bool {
        let node = nodes[index].node
        guard ["Conv", "Gemm", "ConvTranspose", "BatchNormalization", "MatMul"].contains(node.opType), node.domain.isEmpty, case .none = nodes[index].activation,
              let out = node.outputs.first, let user = soleReader(of: out), let act = fusableActivation(nodes[user]),
              nodes[user].node.inputs.first == out else { return false }
        nodes[index].activation = act
        nodes[index].node.outputs = [nodes[user].node.outputs[0]]
        nodes.remove(at: user)
        return user < index
    }
}
