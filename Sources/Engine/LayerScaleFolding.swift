import ONNX
import Tensor

extension GraphOptimizer {
    /// Folds ConvNeXt's layer scale into the Linear before it: `Mul(Transpose(MatMul(x, W [+ b])), gamma)` where the
    /// Transpose moves the last axis to axis 1 (channels-last back to NCHW) and gamma is a per-channel constant
    /// [C, 1, ...] becomes `Transpose(MatMul(x, W * gamma [+ b * gamma]))`: one pass over the block's output less.
    /// Runs after `fuseMatMulBias`; every intermediate must have that single reader and be no graph output.
    mutating func foldLayerScaleIntoMatMuls() {
        rewriteEachNode { optimizer, index in
            optimizer.foldLayerScale(intoMatMulAt: index)
            return false
        }
    }

    /// One fold into the MatMul at `index`, when the pattern is there.
    private mutating func foldLayerScale(intoMatMulAt index: Int) {
        let matmul = nodes[index].node
        guard matmul.opType == "MatMul", isDefaultDomain(matmul.domain), case .none = nodes[index].activation, matmul.outputs.count == 1,
              matmul.inputs.count == 2 || matmul.inputs.count == 3, let out = matmul.outputs.first, !graphOutputs.contains(out),
              let w = constants[matmul.inputs[1]], w.dtype == .float32, w.rank == 2 else { return }
        let channels = w.shape[1]
        guard let (t, transpose) = onlyReader(of: out), transpose.opType == "Transpose", isDefaultDomain(transpose.domain),
              transpose.outputs.count == 1, let moved = transpose.outputs.first, !graphOutputs.contains(moved),
              case .ints(let raw)? = transpose.attributes["perm"], raw.count >= 3, case let perm = raw.map(Int.init),
              perm == [0, perm.count - 1] + Array(1..<(perm.count - 1)),
              let (m, mul) = onlyReader(of: moved), mul.opType == "Mul", isDefaultDomain(mul.domain), mul.inputs.count == 2,
              mul.outputs.count == 1, mul.inputs[0] != mul.inputs[1] else { return }
        let scaleName = mul.inputs[0] == moved ? mul.inputs[1] : mul.inputs[0]
        // gamma [C, 1, ..., 1] (leading 1s allowed) lines C up with axis 1 of the rank-r NCHW value.
        guard let scale = constants[scaleName], scale.dtype == .float32, scale.count == channels, scale.rank <= perm.count,
              scale.shape.firstIndex(where: { $0 != 1 }).map({ scale.rank - $0 == perm.count - 1 }) ?? (channels == 1) else { return }
        let gamma = scale.scalars(as: Float.self)
        var weights = w.scalars(as: Float.self)
        for row in 0..<w.shape[0] { for c in 0..<channels { weights[row * channels + c] *= gamma[c] } }
        var bias: Tensor?
        if matmul.inputs.count == 3 {
            guard let b = constants[matmul.inputs[2]], b.dtype == .float32, b.count == channels else { return }
            bias = Tensor(shape: b.shape, scalars: zip(b.scalars(as: Float.self), gamma).map { $0 * $1 })
        }
        var inputs = [matmul.inputs[0], "\(out)::layer_scaled_weights"]
        constants[inputs[1]] = Tensor(shape: w.shape, scalars: weights)
        if let bias {
            inputs.append("\(out)::layer_scaled_bias")
            constants[inputs[2]] = bias
        }
        let dropped = Array(matmul.inputs.dropFirst()) + [scaleName]
        nodes[index].node.inputs = inputs
        nodes[t].node.outputs = mul.outputs
        nodes.remove(at: m)
        for name in dropped where !graphOutputs.contains(name) && !nodes.contains(where: { $0.node.inputs.contains(name) }) {
            constants[name] = nil
        }
    }

    /// The only node reading `value` (its index and node), or nil when none or several do.
    private func onlyReader(of value: String) -> (Int, Node)? {
        let readers = nodes.indices.filter { nodes[$0].node.inputs.contains(value) }
        guard readers.count == 1 else { return nil }
        return (readers[0], nodes[readers[0]].node)
    }
}
