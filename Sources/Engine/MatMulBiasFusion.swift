import ONNX
import Tensor

extension GraphOptimizer {
    /// Folds `Add(MatMul(x, W), bias)` (either operand order) into the MatMul as a third input when W is a constant
    /// 2-D float32 matrix [k, n], bias a float32 constant of n elements broadcast along the last axis, and the MatMul
    /// output feeds nothing else: the packed kernel then adds it (and an activation `fuseActivations` moves in after)
    /// in its epilogue. Transformer projections are written this way by every exporter.
    mutating func fuseMatMulBias() {
        rewriteEachNode { $0.fuseMatMulBias(matMulAt: $1) }
    }

    /// One fold of the Add that alone reads the MatMul at `index` into it, when the pattern is there; false (the
    /// MatMul stays at `index`).
    private mutating func fuseMatMulBias(matMulAt index: Int) -> Bool {
        let matmul = nodes[index].node
        guard matmul.opType == "MatMul", isDefaultDomain(matmul.domain), matmul.inputs.count == 2, let out = matmul.outputs.first,
              let w = constants[matmul.inputs[1]], w.dtype == .float32, w.rank == 2,
              let user = soleReader(of: out), user > index else { return false }
        let add = nodes[user].node
        guard add.opType == "Add", isDefaultDomain(add.domain), add.inputs.count == 2, add.inputs[0] != add.inputs[1],
              let biasName = add.inputs.first(where: { $0 != out }), let bias = constants[biasName], bias.dtype == .float32,
              bias.count == w.shape[1], bias.shape.dropLast().allSatisfy({ $0 == 1 }), bias.rank <= 2 else { return false }
        nodes[index].node.inputs.append(biasName)
        nodes[index].node.outputs = add.outputs
        nodes.remove(at: user)
        return false
    }
}
