import Foundation
import ONNX
import Tensor

/// How a node takes part in a channels-last region.
private enum RegionRole {
    /// A 1x1, stride 1, one-group Conv: a plain product over pixels.
    case pointwise
    /// A Conv with one filter per channel (dilation 1).
    case depthwise
    /// An op that does not care about layout when every data input is NHWC: inputs at these indices are region values.
    case elementwise([Int])
    /// GlobalAveragePool reading a region value; its [N, C, 1, 1] output is the same bytes in either layout, so it leaves as NCHW.
    case mean
    /// A small dense Conv (a stem) reading an NCHW value and writing the region's first NHWC value: no conversion.
    case entry
    /// A Transpose NCHW -> NHWC (perm 0, 2, 3, 1) of a region value: its output is the region value's own bytes, so
    /// it runs no kernel (ConvNeXt leaves each depthwise conv this way for its channels-last LayerNorm and MLP).
    case leave
    /// A Transpose NHWC -> NCHW (perm 0, 3, 1, 2) of an [N, H, W, C] value from outside: inside the region its input
    /// already is the NHWC value (ConvNeXt's MLP output coming back to the residual stream).
    case adopt

    /// Input indices that carry region (NHWC) values.
    func regionInputs(_ planned: PlannedNode) -> [Int] {
        switch self {
        case .pointwise, .depthwise: return planned.residual ? [0, fusedResidualInput] : [0]
        case .elementwise(let indices): return indices
        case .mean, .leave: return [0]
        case .entry, .adopt: return []
        }
    }
}

/// Unary ops that run unchanged on NHWC tensors (their other inputs, such as Clip's bounds, must be constants).
private let layoutFreeUnary: Set<String> = ["Relu", "LeakyRelu", "Sigmoid", "Tanh", "HardSwish", "HardSigmoid", "Clip", "Elu", "Selu", "Softplus"]
/// Binary ops that run unchanged when both operands are NHWC values of rank 4 (broadcasting permutes consistently).
private let layoutFreeBinary: Set<String> = ["Add", "Mul", "Sub"]

extension GraphOptimizer {
    /// Whether the environment variable `name` is "0": the switches that turn one rewrite off for A/B runs
    /// (`OSPREY_CHANNELS_LAST`, `OSPREY_BLOCK_FUSION`, `OSPREY_SQUEEZE_POOL_FUSION`,
    /// `OSPREY_CHANNEL_NORM_FUSION`).
    static func disabledByEnvironment(_ name: String) -> Bool {
        guard let value = getenv(name) else { return false }
        return String(cString: value) == "0"
    }

    /// `rewriteEachNode(rewrite)` unless the environment variable `name` is "0" (the fusion's A/B switch).
    mutating func rewriteEachNode(unlessDisabledBy name: String, _ rewrite: (inout GraphOptimizer, Int) -> Bool) {
        guard !Self.disabledByEnvironment(name) else { return }
        rewriteEachNode(rewrite)
    }

    /// Whether `OSPREY_CHANNELS_LAST=0` turns channels-last regions off (A/B runs).
    static var channelsLastDisabledByEnvironment: Bool { disabledByEnvironment("OSPREY_CHANNELS_LAST") }

    /// Runs maximal chains of depthwise-separable layers channels-last: pointwise convs become a product over pixels
    /// that reads the activations in place (no strip packing), depthwise convs a direct kernel over channel vectors
    /// (no padded plane copies), and the values between them NHWC tensors of internal ops. Layout conversions are
    /// inserted where a region is entered and where a value is read outside it (or is a graph output). Only regions
    /// with a depthwise conv and at least two convs are kept: fewer do not pay for the conversions.
    mutating func formChannelsLastRegions() {
        for i in nodes.indices { orientChannelScale(i) }
        rewritePooledPointwiseConvs()
        let roles = profitableRoles()
        guard !roles.isEmpty else { return }
        rewriteRegions(roles)
        fuseChannelsLastSeparableConvs()
        fuseChannelsLastInvertedResiduals()
        fuseChannelsLastSqueezePools()
        fuseChannelsLastDepthwiseNorms()
    }

    /// The channels-last role of every node in a region worth forming.
    private func profitableRoles() -> [Int: RegionRole] {
        var producer: [String: Int] = [:]
        for (i, planned) in nodes.enumerated() { for o in planned.node.outputs where !o.isEmpty { producer[o] = i } }
        var roles: [Int: RegionRole] = [:]
        // Values region convs read as their input 0.
        var convertedInputs: Set<String> = []
        for i in nodes.indices {
            if let role = convRole(nodes[i]) {
                roles[i] = role
                convertedInputs.insert(nodes[i].node.inputs[0])
                continue
            }
            let node = nodes[i].node
            let fromRegion = { (name: String) -> Bool in
                guard let p = producer[name], let r = roles[p] else { return false }
                switch r {
                case .mean, .leave: return false
                default: return true
                }
            }
            if let first = nodes[i].node.inputs.first, !fromRegion(first), isEntryConv(nodes[i]) {
                roles[i] = .entry
                continue
            }
            if let first = node.inputs.first, let perm = layoutTransposePermutation(node), nodes[i].activation == .none {
                if perm == [0, 2, 3, 1] && fromRegion(first) { roles[i] = .leave }
                if perm == [0, 3, 1, 2] && !fromRegion(first) { roles[i] = .adopt }
                continue
            }
            guard isDefaultDomain(node.domain) || (node.domain == fusedDomain && node.opType == fusedActivationOp), node.outputs.count == 1,
                  let first = node.inputs.first, fromRegion(first) else { continue }
            if node.opType == "GlobalAveragePool" && isDefaultDomain(node.domain) {
                roles[i] = .mean
            } else if node.domain == fusedDomain || layoutFreeUnary.contains(node.opType) {
                if node.domain == fusedDomain, case .int(let rank)? = node.attributes["minimum_rank"], rank > 4 { continue }
                if node.inputs.dropFirst().allSatisfy({ $0.isEmpty || constants[$0] != nil }) { roles[i] = .elementwise([0]) }
            } else if layoutFreeBinary.contains(node.opType), node.inputs.count == 2,
                      fromRegion(node.inputs[1]) || convertedInputs.contains(node.inputs[1]) {
                // An outside value a region conv already converts (ConvNeXt's residual at a stage's first block)
                // shares that conversion; the conv's reading it says it is an NCHW value of rank 4.
                roles[i] = .elementwise([0, 1])
            }
        }
        keepProfitableRegions(&roles, producer: producer)
        return roles
    }

    /// The permutation of a default-domain Transpose of rank 4, or nil.
    private func layoutTransposePermutation(_ node: Node) -> [Int64]? {
        guard node.opType == "Transpose", isDefaultDomain(node.domain), node.inputs.count == 1, node.outputs.count == 1,
              case .ints(let perm)? = node.attributes["perm"], perm.count == 4 else { return nil }
        return perm
    }

    /// The role of a Conv that has a channels-last kernel, or nil.
    private func convRole(_ planned: PlannedNode) -> RegionRole? {
        let n = planned.node
        guard n.opType == "Conv", isDefaultDomain(n.domain), n.outputs.count == 1, n.inputs.count >= 2,
              let w = constants[n.inputs[1]], w.dtype == .float32, w.rank == 4, !n.inputs[0].isEmpty, constants[n.inputs[0]] == nil else { return nil }
        if n.inputs.count > 2, !n.inputs[2].isEmpty, constants[n.inputs[2]] == nil { return nil }
        if planned.residual, n.inputs.count <= fusedResidualInput || n.inputs[fusedResidualInput].isEmpty { return nil }
        var group = 1
        if case .int(let g)? = n.attributes["group"] { group = Int(g) }
        func all(_ name: String, _ value: Int64) -> Bool {
            guard let attribute = n.attributes[name] else { return true }
            if case .ints(let values) = attribute { return values.allSatisfy { $0 == value } }
            return false
        }
        if group == 1 && w.shape[2] == 1 && w.shape[3] == 1 && all("strides", 1) && all("pads", 0) {
            // SAME padding of a 1x1 stride-1 kernel is none.
            return .pointwise
        }
        if group == w.shape[0] && w.shape[1] == 1 && group > 1 && all("dilations", 1) && n.inputs.count <= fusedChannelScaleInput {
            return .depthwise
        }
        return nil
    }

    /// Whether the node is a dense Conv with few input channels (a stem: 3 -> 32 channels, 3x3, stride 2) that the
    /// patch product runs from NCHW input straight to NHWC output, sparing the region entry's conversion.
    private func isEntryConv(_ planned: PlannedNode) -> Bool {
        let n = planned.node
        guard n.opType == "Conv", isDefaultDomain(n.domain), n.outputs.count == 1, (2...3).contains(n.inputs.count), !planned.residual,
              let w = constants[n.inputs[1]], w.dtype == .float32, w.rank == 4, w.shape[1] <= 4, w.shape[2] * w.shape[3] > 1,
              !n.inputs[0].isEmpty, constants[n.inputs[0]] == nil else { return false }
        if n.inputs.count > 2, !n.inputs[2].isEmpty, constants[n.inputs[2]] == nil { return false }
        if case .int(let g)? = n.attributes["group"], g != 1 { return false }
        if case .ints(let d)? = n.attributes["dilations"], !d.allSatisfy({ $0 == 1 }) { return false }
        return true
    }

    /// A folded squeeze-and-excitation Mul keeps the activations as the conv's input 0 and the scale as input 4;
    /// when the Mul had them the other way round (input 0 comes from a pooled branch, input 4 does not), swaps them,
    /// so the value a region reads channels-last is the activations.
    private mutating func orientChannelScale(_ i: Int) {
        var inputs = nodes[i].node.inputs
        guard nodes[i].node.opType == "Conv", inputs.count > fusedChannelScaleInput, !inputs[fusedChannelScaleInput].isEmpty,
              isPooledBranch(inputs[0]), !isPooledBranch(inputs[fusedChannelScaleInput]) else { return }
        inputs.swapAt(0, fusedChannelScaleInput)
        nodes[i].node.inputs = inputs
    }

    /// Whether `node` is a ReduceMean / ReduceMax over the two spatial axes of NCHW keeping them: a global pool as the
    /// dynamo exporter writes `adaptive_avg_pool2d(x, 1)` (axes an attribute before opset 18, a constant input since).
    private func isSpatialReduction(_ node: Node) -> Bool {
        guard ["ReduceMean", "ReduceMax"].contains(node.opType), isDefaultDomain(node.domain) else { return false }
        if case .int(let keep)? = node.attributes["keepdims"], keep == 0 { return false }
        var axes: [Int] = []
        if case .ints(let values)? = node.attributes["axes"] { axes = values.map(Int.init) }
        else if node.inputs.count > 1, let t = constants[node.inputs[1]] { axes = t.doubles.map { Int($0) } }
        return Set(axes.map { $0 < 0 ? $0 + 4 : $0 }) == [2, 3]
    }

    /// Whether `value` is a global pool followed by at most a few convs and unary ops (a squeeze-and-excitation scale).
    private func isPooledBranch(_ value: String) -> Bool {
        var name = value
        for _ in 0..<8 {
            guard let p = nodes.firstIndex(where: { $0.node.outputs.contains(name) }), let first = nodes[p].node.inputs.first else { return false }
            let op = nodes[p].node.opType
            if ["GlobalAveragePool", "GlobalMaxPool"].contains(op) || isSpatialReduction(nodes[p].node) { return true }
            let unary = nodes[p].node.inputs.dropFirst().allSatisfy { $0.isEmpty || constants[$0] != nil }
            guard op == "Conv" || op == channelsLastPointwiseOp || unary else { return false }
            name = first
        }
        return false
    }

    /// Squeeze-and-excitation convs read a pooled [N, C, 1, 1] value: one pixel a row, which the NCHW conv's product
    /// packs into a 16-pixel strip (15/16 of its work on padding). Their single pixel is the same bytes in NHWC, so the
    /// channels-last product runs them with the images as rows, NCHW in and out (other shapes convert at run time).
    private mutating func rewritePooledPointwiseConvs() {
        for i in nodes.indices {
            guard case .pointwise? = convRole(nodes[i]), !nodes[i].residual, nodes[i].node.inputs.count <= 3,
                  isPooledBranch(nodes[i].node.inputs[0]) else { continue }
            nodes[i].node.opType = channelsLastPointwiseOp
            nodes[i].node.domain = fusedDomain
            nodes[i].node.attributes[channelsFirstPointwiseAttribute] = .int(1)
        }
    }

    /// Drops every connected group of region nodes without a depthwise conv or with fewer than two convs.
    private func keepProfitableRegions(_ roles: inout [Int: RegionRole], producer: [String: Int]) {
        var parent = Array(nodes.indices)
        func root(_ i: Int) -> Int {
            var i = i
            while parent[i] != i { parent[i] = parent[parent[i]]; i = parent[i] }
            return i
        }
        // Nodes converting the same outside value share its one conversion: they are one region (ConvNeXt's first
        // depthwise conv of a stage and the residual Add both read the downsampling conv's output).
        var firstReader: [String: Int] = [:]
        for (i, role) in roles.sorted(by: { $0.key < $1.key }) {
            for k in role.regionInputs(nodes[i]) {
                let name = nodes[i].node.inputs[k]
                guard let p = producer[name], let r = roles[p] else {
                    if let first = firstReader[name] { parent[root(i)] = root(first) } else { firstReader[name] = i }
                    continue
                }
                if case .mean = r { continue }
                parent[root(i)] = root(p)
            }
        }
        var convs: [Int: Int] = [:], depthwise: Set<Int> = []
        for (i, role) in roles {
            switch role {
            case .pointwise: convs[root(i), default: 0] += 1
            case .depthwise: convs[root(i), default: 0] += 1; depthwise.insert(root(i))
            default: break
            }
        }
        for i in Array(roles.keys) where !(depthwise.contains(root(i)) && convs[root(i), default: 0] >= 2) { roles[i] = nil }
    }

    /// Replaces region nodes by their channels-last forms, with conversions at the entries and exits.
    private mutating func rewriteRegions(_ roles: [Int: RegionRole]) {
        // Which values must exist in NCHW: graph outputs and those any node reads other than as a region input.
        var nchwReaders: Set<String> = graphOutputs
        for (i, planned) in nodes.enumerated() {
            let regionInputs = Set(roles[i]?.regionInputs(planned) ?? [])
            for (k, name) in planned.node.inputs.enumerated() where !regionInputs.contains(k) { nchwReaders.insert(name) }
        }
        var lastName: [String: String] = [:]
        // Outputs of `.leave` Transposes, read under the region value's name (no kernel runs for them).
        var alias: [String: String] = [:]
        var rewritten: [PlannedNode] = []
        for (i, original) in nodes.enumerated() {
            var planned = original
            planned.node.inputs = planned.node.inputs.map { alias[$0] ?? $0 }
            guard let role = roles[i] else { rewritten.append(planned); continue }
            var node = planned.node
            switch role {
            case .leave:
                let inside = lastName[node.inputs[0]]!
                alias[node.outputs[0]] = inside
                if graphOutputs.contains(node.outputs[0]) {
                    rewritten.append(PlannedNode(node: Node(name: node.name, opType: "Identity", inputs: [inside], outputs: node.outputs)))
                }
                continue
            case .adopt:
                lastName[node.outputs[0]] = node.inputs[0]
                // Readers outside the region still get the NCHW value from the Transpose itself.
                if nchwReaders.contains(node.outputs[0]) { rewritten.append(planned) }
                continue
            default: break
            }
            for k in role.regionInputs(planned) {
                let name = node.inputs[k]
                if lastName[name] == nil {
                    let converted = "\(name)::nhwc"
                    rewritten.append(PlannedNode(node: Node(name: "\(name)::to_nhwc", opType: toChannelsLastOp, domain: fusedDomain,
                                                            inputs: [name], outputs: [converted])))
                    lastName[name] = converted
                }
                node.inputs[k] = lastName[name]!
            }
            node.domain = fusedDomain
            switch role {
            case .pointwise: node.opType = channelsLastPointwiseOp
            case .depthwise: node.opType = channelsLastDepthwiseOp
            case .entry: node.opType = channelsLastPatchConvOp
            case .leave, .adopt: continue
            case .mean:
                node.opType = channelsLastMeanOp
                rewritten.append(PlannedNode(node: node))
                continue
            case .elementwise:
                // The op itself runs unchanged on NHWC tensors.
                node.domain = planned.node.domain
            }
            let output = node.outputs[0], inside = "\(output)::nhwc"
            node.outputs = [inside]
            lastName[output] = inside
            var changed = planned
            changed.node = node
            rewritten.append(changed)
            if nchwReaders.contains(output) {
                rewritten.append(PlannedNode(node: Node(name: "\(output)::to_nchw", opType: toChannelsFirstOp, domain: fusedDomain,
                                                        inputs: [inside], outputs: [output])))
            }
        }
        nodes = rewritten
    }
}
