import Foundation
import ONNX

extension GraphOptimizer {
    /// Fuses a channels-last expand 1x1 conv into the separable conv that alone reads it: the whole inverted-residual
    /// block then runs over bands of output rows and the expanded tensor (6x the block's channels; 38 MB a block at
    /// MobileNetV2's batch 8) exists only as a band in L2. Blocks with squeeze-and-excitation have no separable conv
    /// (the scale needs the whole depthwise output): their expand fuses into the depthwise conv alone.
    mutating func fuseChannelsLastInvertedResiduals() {
        guard !Self.disabledByEnvironment("OSPREY_BLOCK_FUSION") else { return }
        var index = 0
        while index < nodes.count {
            defer { index += 1 }
            let ex = nodes[index].node
            guard ex.domain == fusedDomain, ex.opType == channelsLastPointwiseOp, !nodes[index].residual, ex.inputs.count <= 3,
                  ex.attributes[channelsFirstPointwiseAttribute] == nil, let out = ex.outputs.first,
                  let user = soleReader(of: out), user > index else { continue }
            let epilogue = DepthwisePlaneEpilogue(nodes[index].activation)
            let sep = nodes[user].node
            // A depthwise conv alone (its output read by a squeeze-and-excitation branch) fuses when its own
            // activation is an epilogue one: the block's output is then the depthwise output.
            let alone = sep.opType == channelsLastDepthwiseOp && !nodes[user].residual && sep.inputs.count <= 3
                && DepthwisePlaneEpilogue(nodes[user].activation).complete
            guard epilogue.complete, sep.domain == fusedDomain, sep.opType == channelsLastSeparableOp || alone, sep.inputs.first == out,
                  !sep.inputs.dropFirst().contains(out) else { continue }
            var inputs = sep.inputs
            inputs[0] = ex.inputs[0]
            while inputs.count < invertedResidualExpandInput { inputs.append("") }
            inputs += [ex.inputs[1], ex.inputs.count > 2 ? ex.inputs[2] : ""]
            var attributes = sep.attributes
            setFusedEpilogue(epilogue, "expand", in: &attributes)
            nodes[user].node = Node(name: sep.name, opType: channelsLastInvertedResidualOp, domain: fusedDomain, inputs: inputs,
                                    outputs: sep.outputs, attributes: attributes)
            nodes.remove(at: index)
            index -= 1
        }
    }
}
