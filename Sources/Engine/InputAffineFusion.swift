import ONNX
import Tensor

/// Input index of the per-channel multiplier of a Conv with a folded BatchNormalization before it (its addend is
/// the next input), after the residual and channel-scale slots.
let fusedInputAffineInput = 5

/// Conv attribute holding the floor applied after the folded BatchNormalization (0 for its fused Relu).
let fusedInputFloorAttribute = "osprey_input_floor"

extension GraphOptimizer {
    /// Folds `Conv(Relu?(BatchNormalization(x)))` into the Conv when the normalization (constant parameters, fused
    /// Relu or none) feeds nothing else and the Conv is a 1x1 of one group with constant weights: DenseNet normalizes
    /// the growing concatenation before each bottleneck conv, and the pointwise packing can apply max(x * mul + add, 0)
    /// as it reads each plane instead of a separate pass that writes a copy (DenseNet-121: 5% of the model).
    mutating func fuseInputAffineIntoConvs() {
        rewriteEachNode { $0.fuseInputAffine(normalizationAt: $1) }
    }

    /// One fold of the BatchNormalization at `index` into the Conv that alone reads it; true when it did (the
    /// normalization is then removed).
    private mutating func fuseInputAffine(normalizationAt index: Int) -> Bool {
        let bn = nodes[index].node
        let floor: Float
        switch nodes[index].activation {
        case .none: floor = -.infinity
        case .relu: floor = 0
        default: return false
        }
        guard bn.opType == "BatchNormalization", isDefaultDomain(bn.domain), bn.inputs.count >= 5, !bn.inputs[0].isEmpty,
              bn.outputs.dropFirst().allSatisfy({ $0.isEmpty }), let out = bn.outputs.first,
              case let params = bn.inputs[1...4].compactMap({ constants[$0] }), params.count == 4,
              params.allSatisfy({ $0.dtype == .float32 && $0.rank == 1 && $0.count == params[0].count }),
              let user = soleReader(of: out), user > index else { return false }
        if case .int(let mode)? = bn.attributes["training_mode"], mode != 0 { return false }
        if case .int(let spatial)? = bn.attributes["spatial"], spatial != 1 { return false }
        let conv = nodes[user].node
        guard conv.opType == "Conv", isDefaultDomain(conv.domain), conv.inputs.count >= 2, conv.inputs.count <= fusedChannelScaleInput,
              conv.inputs[0] == out, !conv.inputs.dropFirst().contains(out), let w = constants[conv.inputs[1]], w.dtype == .float32,
              w.rank == 4, w.shape[1] == params[0].count, w.shape[2] == 1, w.shape[3] == 1 else { return false }
        if case .int(let groups)? = conv.attributes["group"], groups != 1 { return false }
        var epsilon: Float = 1e-5
        if case .float(let e)? = bn.attributes["epsilon"] { epsilon = e }
        let affine = batchNormalizationAffine(scale: params[0].scalars(as: Float.self), bias: params[1].scalars(as: Float.self),
                                              mean: params[2].scalars(as: Float.self), variance: params[3].scalars(as: Float.self),
                                              epsilon: epsilon)
        let mulName = "\(out)::input_mul", addName = "\(out)::input_add"
        constants[mulName] = Tensor(shape: [affine.mul.count], scalars: affine.mul)
        constants[addName] = Tensor(shape: [affine.add.count], scalars: affine.add)
        var fused = nodes[user]
        fused.node.inputs[0] = bn.inputs[0]
        while fused.node.inputs.count < fusedInputAffineInput { fused.node.inputs.append("") }
        fused.node.inputs += [mulName, addName]
        fused.node.attributes[fusedInputFloorAttribute] = .float(floor)
        nodes[user] = fused
        nodes.remove(at: index)
        // Drop the normalization's parameters when nothing else reads them, so their memory goes now.
        for name in bn.inputs[1...4] where !graphOutputs.contains(name) && !nodes.contains(where: { $0.node.inputs.contains(name) }) {
            constants[name] = nil
        }
        return true
    }
}
