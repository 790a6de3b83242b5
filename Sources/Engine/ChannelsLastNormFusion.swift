import ONNX

extension GraphOptimizer {
    /// Fuses a LayerNormalization over the channels of a channels-last depthwise conv's output into the conv (ConvNeXt:
    /// each block's 7x7 conv, then LayerNorm once its Transpose runs no kernel): each task normalizes the pixels it has
    /// just written while they are in cache, instead of a step reading and writing the whole tensor again.
    mutating func fuseChannelsLastDepthwiseNorms() {
        rewriteEachNode(unlessDisabledBy: "OSPREY_CHANNEL_NORM_FUSION") { $0.fuseChannelNorm(at: $1) }
    }

    /// Fuses the LayerNormalization at `index` into the depthwise step that writes its input; true when it did (the
    /// norm's node is gone).
    private mutating func fuseChannelNorm(at index: Int) -> Bool {
        let norm = nodes[index].node
        guard norm.opType == "LayerNormalization", isDefaultDomain(norm.domain), case .none = nodes[index].activation,
              norm.inputs.count == 3, let source = norm.inputs.first, let out = norm.outputs.first, !out.isEmpty,
              norm.outputs.dropFirst().allSatisfy(\.isEmpty), let scale = constants[norm.inputs[1]], let shift = constants[norm.inputs[2]],
              scale.dtype == .float32, shift.dtype == .float32, scale.rank == 1, shift.rank == 1,
              let p = nodes[..<index].lastIndex(where: { $0.node.outputs.contains(source) }), soleReader(of: source) == index else { return false }
        // The last axis of the conv's NHWC output, however the attribute names it.
        if case .int(let axis)? = norm.attributes["axis"], axis != -1 && axis != 3 { return false }
        let conv = nodes[p].node
        guard conv.domain == fusedDomain, conv.opType == channelsLastDepthwiseOp, conv.outputs == [source], !nodes[p].residual,
              conv.inputs.count <= 3, let w = constants[conv.inputs[1]], w.rank == 4, scale.count == w.shape[0], shift.count == w.shape[0]
        else { return false }
        var inputs = conv.inputs
        while inputs.count < channelNormScaleInput { inputs.append("") }
        inputs += [norm.inputs[1], norm.inputs[2]]
        nodes[p].node.inputs = inputs
        nodes[p].node.outputs = [out]
        var epsilon: Float = 1e-5
        if case .float(let e)? = norm.attributes["epsilon"] { epsilon = e }
        nodes[p].node.attributes[channelNormEpsilonAttribute] = .float(epsilon)
        nodes.remove(at: index)
        return true
    }
}
