import CKernelShim
import Tensor

/// out[h] = softmax(q[h] k[h]) v[h] for each head h, softmax along the last axis: q [heads, m, depth], k [heads,
/// depth, n] (keys already transposed), v [heads, n, width], all dense; heads split across the threads.
///
/// Exported attention is MatMul -> Softmax -> MatMul over [batch, heads, tokens, size] tensors. Run as three steps,
/// ViT-B/16's 12 x 197 x 197 scores (1.9 MB) went out to L3 and back twice; here each head's scores (155 KB) are
/// written, normalised and read again while they sit in the computing core's L2.
func headAttention(q: UnsafePointer<Float>, k: UnsafePointer<Float>, v: UnsafePointer<Float>, heads: Int, m: Int, depth: Int, n: Int,
                   width: Int, out: UnsafeMutablePointer<Float>) {
    let head = { (h: Int) in
        withThreadScratch(m * n, slot: .scores) { scores in
            smallMatmul(m: m, n: n, k: depth, a: q + h * m * depth, lda: depth, b: k + h * depth * n, ldb: n, c: scores, ldc: n)
            softmaxHeadRows(scores, rows: m, columns: n)
            smallMatmul(m: m, n: width, k: n, a: scores, lda: n, b: v + h * n * width, ldb: width, c: out + h * m * width, ldc: width)
        }
    }
    if EngineThreads.threads > 1 && heads > 1 {
        parallelFor(heads, head)
    } else {
        for h in 0..<heads { head(h) }
    }
}

/// Softmax of each row of one head's scores in place on the calling thread (the heads are what the threads share).
private func softmaxHeadRows(_ data: UnsafeMutablePointer<Float>, rows: Int, columns: Int) {
    if hasFastLogisticKernel {
        osprey_softmax_rows_f32(UnsafePointer(data), data, rows, columns, 0, 0)
    } else {
        softmaxRowsPortable(data, rows: rows, columns: columns, nanFill: nil)
    }
}

/// Whether `headAttention` takes these per-head sizes: both products small enough for `smallMatmul` (operands read
/// in place, in L1/L2) and the scores within a modest per-thread buffer.
func headAttentionFits(m: Int, depth: Int, n: Int, width: Int) -> Bool {
    m > 0 && depth > 0 && n > 0 && width > 0 && depth <= 512 && depth * n <= 1 << 16 && n <= 512 && n * width <= 1 << 16
        && m * n <= 1 << 18
}
