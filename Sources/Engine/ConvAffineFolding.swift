import ONNX
import Tensor

extension GraphOptimizer {
    /// Folds Mul, Div, Add and Sub by a per-output-channel or scalar constant into the Conv that produces their
    /// operand (scale-and-shift as tf2onnx writes BatchNormalization, normalisation constants, division by a constant),
    /// when the conv output feeds nothing else and is not a graph output. Runs after chain fusion, which needs
    /// the chains' Add and Div as they are.
    mutating func foldConstantAffineIntoConvs() {
        for index in nodes.indices.reversed() where index < nodes.count {
            while foldAffine(intoConvAt: index) {}
        }
    }

    /// One fold into the Conv at `index`; false when its single consumer is not a foldable constant operation.
    private mutating func foldAffine(intoConvAt index: Int) -> Bool {
        let conv = nodes[index].node
        guard conv.opType == "Conv", isDefaultDomain(conv.domain), case .none = nodes[index].activation, !nodes[index].residual,
              conv.inputs.count >= 2, conv.inputs.count <= 3, conv.outputs.count == 1, let out = conv.outputs.first,
              let w = constants[conv.inputs[1]], w.dtype == .float32, w.rank >= 3, let user = soleReader(of: out) else { return false }
        let op = nodes[user].node
        guard ["Mul", "Div", "Add", "Sub"].contains(op.opType), isDefaultDomain(op.domain), op.inputs.count == 2, op.outputs.count == 1,
              op.inputs[0] != op.inputs[1] else { return false }
        let k = op.inputs[0] == out ? 1 : 0
        // constant / conv and constant - conv are not affine in the same way; leave them.
        guard op.inputs[1 - k] == out, k == 1 || op.opType == "Mul" || op.opType == "Add",
              let c = constants[op.inputs[k]], c.dtype == .float32, c.rank <= w.rank else { return false }
        let m = w.shape[0], lead = w.rank - c.rank
        for (i, d) in c.shape.enumerated() where d != 1 && !(lead + i == 1 && d == m) { return false }
        let given = c.scalars(as: Float.self)
        let values = given.count == 1 ? [Float](repeating: given[0], count: m) : given
        guard values.count == m, op.opType != "Div" || !values.contains(0) else { return false }
        var bias = [Float](repeating: 0, count: m)
        if conv.inputs.count == 3, !conv.inputs[2].isEmpty {
            guard let b = constants[conv.inputs[2]], b.dtype == .float32, b.count == m else { return false }
            bias = b.scalars(as: Float.self)
        }
        var weights = w.scalars(as: Float.self)
        let per = weights.count / m
        for ch in 0..<m {
            switch op.opType {
            case "Mul", "Div":
                let s = op.opType == "Mul" ? values[ch] : 1 / values[ch]
                for i in 0..<per { weights[ch * per + i] *= s }
                bias[ch] *= s
            case "Add": bias[ch] += values[ch]
            default: bias[ch] -= values[ch]
            }
        }
        let result = op.outputs[0]
        let wName = "\(result)::affine_folded_weights", bName = "\(result)::affine_folded_bias"
        constants[wName] = Tensor(shape: w.shape, scalars: weights)
        constants[bName] = Tensor(shape: [m], scalars: bias)
        let dropped = [conv.inputs[1]] + (conv.inputs.count > 2 ? [conv.inputs[2]] : []) + [op.inputs[k]]
        nodes[index].node.inputs = [conv.inputs[0], wName, bName]
        nodes[index].node.outputs = [result]
        nodes.remove(at: user)
        for name in dropped where !name.isEmpty && !graphOutputs.contains(name) && !nodes.contains(where: { $0.node.inputs.contains(name) }) {
            constants[name] = nil
        }
        return true
    }
}
