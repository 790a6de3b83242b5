import ONNX

extension GraphOptimizer {
    /// Rewrites `act(Reshape(Gemm(...)))` as `Reshape(act(Gemm(...)))` with the activation in the Gemm's (or a
    /// MatMul's) epilogue, when the product has constant float32 weights and it and the Reshape each feed only the
    /// next node. An elementwise function commutes with a reshape. GPT-2's Conv1D is `Gemm` on the flattened rows then
    /// a Reshape back to [N, S, n], so its GELU otherwise runs as a separate pass over the 3072-wide MLP activations.
    mutating func hoistActivationsAboveReshapes() {
        rewriteEachNode { $0.hoistActivationAboveReshape(activationAt: $1) }
    }

    /// One rewrite of the activation at `index`, when the pattern is there; true when it removed that node (the next
    /// node then sits at `index`).
    private mutating func hoistActivationAboveReshape(activationAt index: Int) -> Bool {
        guard let act = fusableActivation(nodes[index]), let x = nodes[index].node.inputs.first, nodes[index].node.outputs.count == 1,
              let reshape = nodes[..<index].lastIndex(where: { $0.node.outputs.contains(x) }),
              nodes[reshape].node.opType == "Reshape", isDefaultDomain(nodes[reshape].node.domain), nodes[reshape].node.outputs == [x],
              soleReader(of: x) == index, let data = nodes[reshape].node.inputs.first,
              let product = nodes[..<reshape].lastIndex(where: { $0.node.outputs.contains(data) }),
              ["Gemm", "MatMul"].contains(nodes[product].node.opType), isDefaultDomain(nodes[product].node.domain),
              // Float weights (a Linear layer): the epilogues compute on float32.
              nodes[product].node.inputs.count >= 2, constants[nodes[product].node.inputs[1]]?.dtype == .float32,
              case .none = nodes[product].activation, nodes[product].node.outputs == [data], soleReader(of: data) == reshape
        else { return false }
        nodes[product].activation = act
        nodes[reshape].node.outputs = nodes[index].node.outputs
        nodes.remove(at: index)
        return true
    }
}
