import ONNX
import Tensor

/// Input index of the per-channel scale operand of a Conv with a fused squeeze-and-excitation Mul (after the skip).
let fusedChannelScaleInput = 4

extension GraphOptimizer {
    /// Folds `Conv(Mul(x, s))` into the Conv as its input 4 when the Mul feeds nothing else and the Conv is a 1x1 of
    /// one group with constant weights: squeeze-and-excitation blocks (RegNetY, EfficientNet, MobileNetV3) scale each
    /// channel of x by s [N, C, 1, 1] right before a pointwise conv, whose packing then multiplies every input plane as
    /// it reads it instead of a separate pass over x (RegNetY-400MF: the 16 Muls were ~10% of the model). Which operand
    /// is the scale is only known at run time; the kernel multiplies first when neither is, or no fast kernel takes it.
    mutating func fuseChannelScaleIntoConvs() {
        rewriteEachNode { $0.fuseChannelScale(mulAt: $1) }
    }

    /// One fold of the Mul at `index` into the Conv that alone reads it, when the pattern is there; true when it did
    /// (the Mul is then removed).
    private mutating func fuseChannelScale(mulAt index: Int) -> Bool {
        let mul = nodes[index].node
        guard mul.opType == "Mul", isDefaultDomain(mul.domain), mul.inputs.count == 2, mul.outputs.count == 1,
              mul.inputs[0] != mul.inputs[1], mul.inputs.allSatisfy({ !$0.isEmpty && constants[$0] == nil }),
              let out = mul.outputs.first, let user = soleReader(of: out), user > index else { return false }
        let conv = nodes[user].node
        guard conv.opType == "Conv", isDefaultDomain(conv.domain), conv.inputs.count >= 2, conv.inputs.count <= fusedChannelScaleInput,
              conv.inputs[0] == out, !conv.inputs.dropFirst().contains(out), let w = constants[conv.inputs[1]], w.dtype == .float32,
              w.rank == 4, w.shape[2] == 1, w.shape[3] == 1 else { return false }
        if case .int(let groups)? = conv.attributes["group"], groups != 1 { return false }
        var fused = nodes[user]
        fused.node.inputs[0] = mul.inputs[0]
        while fused.node.inputs.count < fusedChannelScaleInput { fused.node.inputs.append("") }
        fused.node.inputs.append(mul.inputs[1])
        nodes[user] = fused
        nodes.remove(at: index)
        return true
    }
}
