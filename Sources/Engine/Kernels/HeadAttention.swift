import CKernelShim
import Tensor

/// An additive mask read for each head's scores where it broadcasts: element (i, j) of head h at
/// `base[headOffsets[h] + i * rowStride + j * columnStride]` (a stride is 0 along a broadcast axis).
struct AttentionMask {
    /// Where the mask's floats start.
    let base: UnsafePointer<Float>
    /// The offsets and strides.
    let layout: Layout

    /// The offsets of each head's mask and the strides within it, from the mask's shape broadcast to the scores'.
    struct Layout {
        let headOffsets: [Int]
        let rowStride: Int, columnStride: Int

        /// Nil unless `mask` broadcasts to `scores` ([batch axes..., m, n]) by the ONNX rules.
        init?(mask: [Int], scores: [Int]) {
            guard scores.count >= 2, broadcastShape(mask, scores) == scores else { return nil }
            let strides = broadcastStrides(mask, to: scores)
            let batchAxes = scores.count - 2
            var offsets = [0]
            for axis in 0..<batchAxes {
                offsets = offsets.flatMap { base in (0..<scores[axis]).map { base + $0 * strides[axis] } }
            }
            (headOffsets, rowStride, columnStride) = (offsets, strides[batchAxes], strides[batchAxes + 1])
        }
    }

    /// Adds head `h`'s mask to its `rows` x `columns` scores in place (the unfused Add's own kernel, on one thread:
    /// the heads are what the threads share).
    func add(head h: Int, to scores: UnsafeMutablePointer<Float>, rows: Int, columns: Int) {
        floatBinary(.add, scores, strides: [columns, 1], base + layout.headOffsets[h], strides: [layout.rowStride, layout.columnStride],
                    into: scores, shape: [rows, columns], parallel: false)
    }
}

/// out[h] = softmax(q[h] k[h] + mask[h]) v[h] for each head h, softmax along the last axis (rows that come out NaN
/// written as `fill` when given, as `SoftmaxReplaceNaN` does): q [heads, m, depth], k [heads, depth, n] (keys already
/// transposed), v [heads, n, width], all dense; heads split across the threads.
///
/// Exported attention is MatMul -> [Add(mask)] -> Softmax -> MatMul over [batch, heads, tokens, size] tensors. Run as
/// separate steps, ViT-B/16's 12 x 197 x 197 scores (1.9 MB) went out to L3 and back twice; here each head's scores
/// (155 KB) are written, masked, normalised and read again while they sit in the computing core's L2.
func headAttention(q: UnsafePointer<Float>, k: UnsafePointer<Float>, v: UnsafePointer<Float>, heads: Int, m: Int, depth: Int, n: Int,
                   width: Int, mask: AttentionMask? = nil, fill: Float? = nil, out: UnsafeMutablePointer<Float>) {
    let head = { (h: Int) in
        withThreadScratch(m * n, slot: .scores) { scores in
            smallMatmul(m: m, n: n, k: depth, a: q + h * m * depth, lda: depth, b: k + h * depth * n, ldb: n, c: scores, ldc: n)
            mask?.add(head: h, to: scores, rows: m, columns: n)
            softmaxHeadRows(scores, rows: m, columns: n, fill: fill)
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
private func softmaxHeadRows(_ data: UnsafeMutablePointer<Float>, rows: Int, columns: Int, fill: Float?) {
    if hasFastLogisticKernel {
        osprey_softmax_rows_f32(UnsafePointer(data), data, rows, columns, fill == nil ? 0 : 1, fill ?? 0)
    } else {
        softmaxRowsPortable(data, rows: rows, columns: columns, nanFill: fill)
    }
}

/// Whether `headAttention` takes these per-head sizes: both products small enough for `smallMatmul` (operands read
/// in place, in L1/L2) and the scores within a modest per-thread buffer.
func headAttentionFits(m: Int, depth: Int, n: Int, width: Int) -> Bool {
    m > 0 && depth > 0 && n > 0 && width > 0 && depth <= 512 && depth * n <= 1 << 16 && n <= 512 && n * width <= 1 << 16
        && m * n <= 1 << 18
}
