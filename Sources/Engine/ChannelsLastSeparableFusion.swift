import ONNX
import Tensor

/// Input index of the pointwise weights in a fused separable node (after X, the depthwise weights and bias, and the skip).
let separablePointwiseWeightsInput = 4

extension GraphOptimizer {
    /// Fuses a channels-last depthwise conv into the pointwise conv that alone reads it: the depthwise output is made a
    /// band of rows at a time into a cache-sized scratch and multiplied at once, instead of a whole tensor written to
    /// memory and read back (MobileNetV2 at batch 8: the 144-576-channel depthwise outputs do not fit the caches).
    /// Only depthwise activations the C epilogue has qualify (their code travels as attributes).
    mutating func fuseChannelsLastSeparableConvs() {
        var index = 0
        while index < nodes.count {
            defer { index += 1 }
            let dw = nodes[index].node
            guard dw.domain == fusedDomain, dw.opType == channelsLastDepthwiseOp, !nodes[index].residual, dw.inputs.count <= 3,
                  let out = dw.outputs.first, let user = soleReader(of: out), user > index else { continue }
            let epilogue = DepthwisePlaneEpilogue(nodes[index].activation)
            let pw = nodes[user].node
            guard epilogue.complete, pw.domain == fusedDomain, pw.opType == channelsLastPointwiseOp, pw.inputs.first == out,
                  pw.inputs.count <= fusedChannelScaleInput, !pw.inputs.dropFirst().contains(out) else { continue }
            var attributes = dw.attributes
            setFusedEpilogue(epilogue, "depthwise", in: &attributes)
            let skip = pw.inputs.count > fusedResidualInput ? pw.inputs[fusedResidualInput] : ""
            let inputs = [dw.inputs[0], dw.inputs[1], dw.inputs.count > 2 ? dw.inputs[2] : "", skip, pw.inputs[1], pw.inputs.count > 2 ? pw.inputs[2] : ""]
            var fused = nodes[user]
            fused.node = Node(name: pw.name, opType: channelsLastSeparableOp, domain: fusedDomain, inputs: inputs, outputs: pw.outputs,
                              attributes: attributes)
            nodes[user] = fused
            nodes.remove(at: index)
            index -= 1
        }
    }
}
