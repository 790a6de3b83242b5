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

/// Where each head's matrix of one attention operand lies: head i = (b, h), b = i / headsPerBatch and
/// h = i % headsPerBatch, starts b * batchStride + h * headStride floats in, its rows `rowStride` apart, its columns
/// contiguous. Dense stacks of heads ([..., rows, columns]) and heads interleaved token by token ([batch, rows, heads,
/// columns]: the layout exporters reshape the projections to, before their Transpose(0, 2, 1, 3)) are both such views.
struct HeadLayout: Equatable {
    let headsPerBatch: Int, batchStride: Int, headStride: Int, rowStride: Int

    /// Heads one after the other, each `rows` x `columns`.
    static func stacked(rows: Int, columns: Int) -> HeadLayout {
        HeadLayout(headsPerBatch: 1, batchStride: rows * columns, headStride: 0, rowStride: columns)
    }

    /// [batch, rows, heads, columns].
    static func interleaved(rows: Int, heads: Int, columns: Int) -> HeadLayout {
        HeadLayout(headsPerBatch: heads, batchStride: rows * heads * columns, headStride: columns, rowStride: heads * columns)
    }

    /// Floats from the operand's start to head `head`'s first row.
    func offset(_ head: Int) -> Int { head / headsPerBatch * batchStride + head % headsPerBatch * headStride }
}

/// One attention operand as `headAttention` reads it: its floats, each head's layout, and a factor each value is
/// multiplied by as it is read (an exporter's Mul by a scalar, absorbed; the same product the Mul computed).
struct HeadOperand {
    let base: UnsafePointer<Float>
    let layout: HeadLayout
    var scale: Float? = nil

    /// Head `head`'s first row.
    func head(_ head: Int) -> UnsafePointer<Float> { base + layout.offset(head) }
}

/// out[h] = softmax(q[h] k[h] + mask[h]) v[h] for each head h, softmax along the last axis (rows that come out NaN
/// written as `fill` when given, as `SoftmaxReplaceNaN` does): q[h] m x depth, k[h] depth x n (keys already transposed)
/// or, with `keysAsRows`, n x depth (the keys before their transpose), v[h] n x width, out[h] m x width, each in its
/// layout; heads split across the threads.
///
/// Exported attention is MatMul -> [Add(mask)] -> Softmax -> MatMul over [batch, heads, tokens, size] tensors. Run as
/// separate steps, ViT-B/16's 12 x 197 x 197 scores (1.9 MB) went out to L3 and back twice; here each head's scores
/// (155 KB) are written, masked, normalised and read again while they sit in the computing core's L2. Scaled queries
/// are copied (and scaled) per head, keys read as rows are transposed (and scaled) per head, into the same scratch.
func headAttention(q: HeadOperand, k: HeadOperand, keysAsRows: Bool = false, v: HeadOperand, heads: Int, m: Int, depth: Int, n: Int,
                   width: Int, mask: AttentionMask? = nil, fill: Float? = nil, out: UnsafeMutablePointer<Float>, outLayout: HeadLayout) {
    let copiesQ = q.scale != nil, copiesK = keysAsRows || k.scale != nil
    let scratchFloats = m * n + (copiesQ ? m * depth : 0) + (copiesK ? depth * n : 0)
    let transposesFast = osprey_transpose_tiles_fast() == 1
    let head = { (h: Int) in
        withThreadScratch(scratchFloats, slot: .scores) { scores in
            var (a, lda) = (q.head(h), q.layout.rowStride)
            if let scale = q.scale {
                let copy = scores + m * n
                copyScaledRows(a, rowStride: lda, rows: m, columns: depth, scale: scale, into: copy)
                (a, lda) = (UnsafePointer(copy), depth)
            }
            var (b, ldb) = (k.head(h), k.layout.rowStride)
            if copiesK {
                let copy = scores + m * n + (copiesQ ? m * depth : 0), scale = k.scale ?? 1
                if keysAsRows && transposesFast {
                    osprey_transpose_scaled_f32(b, ldb, copy, n, n, depth, scale)
                } else if keysAsRows {
                    // Key j's depth values are row j of the source; they become column j of K^T.
                    for j in 0..<n {
                        for p in 0..<depth { copy[p * n + j] = b[j * ldb + p] * scale }
                    }
                } else {
                    copyScaledRows(b, rowStride: ldb, rows: depth, columns: n, scale: scale, into: copy)
                }
                (b, ldb) = (UnsafePointer(copy), n)
            }
            smallMatmul(m: m, n: n, k: depth, a: a, lda: lda, b: b, ldb: ldb, c: scores, ldc: n)
            mask?.add(head: h, to: scores, rows: m, columns: n)
            softmaxHeadRows(scores, rows: m, columns: n, fill: fill)
            smallMatmul(m: m, n: width, k: n, a: scores, lda: n, b: v.head(h), ldb: v.layout.rowStride, c: out + outLayout.offset(h),
                        ldc: outLayout.rowStride)
        }
    }
    if EngineThreads.threads > 1 && heads > 1 {
        parallelFor(heads, head)
    } else {
        for h in 0..<heads { head(h) }
    }
}

/// target[i * columns + p] = source[i * rowStride + p] * scale: one head's operand, scaled as its absorbed Mul did,
/// into dense rows.
private func copyScaledRows(_ source: UnsafePointer<Float>, rowStride: Int, rows: Int, columns: Int, scale: Float,
                            into target: UnsafeMutablePointer<Float>) {
    for i in 0..<rows {
        let from = source + i * rowStride, to = target + i * columns
        var p = 0
        while p + 16 <= columns { (to + p).store((from + p).vector(SIMD16<Float>.self) * scale); p += 16 }
        while p < columns { to[p] = from[p] * scale; p += 1 }
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
