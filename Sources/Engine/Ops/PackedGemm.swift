import Tensor

/// Gemm against a constant 2-D float32 B (a Linear layer as the TorchScript exporter writes it: GPT-2's Conv1D is
/// `Gemm(x, W [k, n], b)`, torchvision heads `Gemm(x, W [n, k], b, transB=1)`): alpha folded into B, which is packed
/// once for `packedMatmul`, and beta * C added in its epilogue with the fused activation. Without it every call went
/// through sgemm, which re-packs B and zeroes C (GPT-2 small ran 1.75x onnxruntime's CPU time, 93% of it in Gemm).
/// Nil (the sgemm path) when B is not such a constant, A is transposed, or C is not a constant row of n values.
func packedGemmKernel(_ ctx: OpContext, transA: Bool, transB: Bool, alpha: Float, beta: Float) throws -> PreparedKernel? {
    guard !transA, let w = ctx.constants[1], w.dtype == .float32, w.rank == 2, w.shape[0] > 0, w.shape[1] > 0 else { return nil }
    let depth = transB ? w.shape[1] : w.shape[0], columns = transB ? w.shape[0] : w.shape[1]
    let usesC = ctx.hasInput(2) && beta != 0
    if usesC {
        // C must broadcast along rows ([n] or [1, n]); a full [m, n] C or a column stays on the sgemm path.
        guard let c = ctx.constants[2], c.dtype == .float32, c.count == columns, c.rank <= 2,
              c.rank == 0 || c.shape[c.rank - 1] == columns else { return nil }
    }
    let biasValues: [Float]? = usesC ? ctx.constants[2]!.floatPointer { p in (0..<columns).map { beta * p[$0] } } : nil
    let packed = w.floatPointer { p in
        if transB { return PackedMatrixB(transposed: p, depth: depth, columns: columns, scale: alpha) }
        // Row-major [depth, columns] with alpha applied, the layout PackedMatrixB packs.
        guard alpha != 1 else { return PackedMatrixB(p, depth: depth, columns: columns) }
        let scaled = (0..<depth * columns).map { alpha * p[$0] }
        return scaled.withUnsafeBufferPointer { PackedMatrixB($0.baseAddress!, depth: depth, columns: columns) }
    }
    let activation = ctx.activation
    return PreparedKernel(kernel: { inputs in
        let a = try inputs.required(0, ctx)
        guard a.dtype == .float32 else { throw ctx.error(.unsupportedDType, "Gemm needs float32, got \(a.dtype) x float32") }
        guard a.rank == 2, a.shape[1] == depth else {
            throw ctx.error(.executionFailed, "Gemm inner dimensions differ: A \(a.shape) and B [\(depth), \(columns)] (transB=\(transB))")
        }
        return [packedProduct(a, rows: a.shape[0], shape: [a.shape[0], columns], packed, bias: biasValues, activation: activation)]
    }, consumedInputs: biasValues == nil ? [1] : [1, 2])
}
