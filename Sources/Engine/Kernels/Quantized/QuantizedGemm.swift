import CKernelShim

// Integer matrix products for the quantized operators (MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv, the
// dynamic-quantization MatMuls): 8-bit operands minus their zero points, widened to int16, multiplied with int32
// accumulation by `osprey_qgemm_s16` (AVX2 vpmaddwd when present). Exact to the ONNX definition
// sum_k (a[m,k] - a_zero) * (b[k,n] - b_zero): every partial sum fits int32 for K up to 16,000.

/// The right-hand operand of an integer GEMM, packed once: K x N values minus their zero points, as int16 pairs in
/// panels of 16 columns (`osprey_qgemm_s16`'s layout). Weights are packed at compile time; activations per call.
public struct PackedQuantizedMatrix: @unchecked Sendable {
    /// Rows (the reduction length).
    public let k: Int
    /// Columns.
    public let n: Int
    /// K rounded up to pairs.
    let kpairs: Int
    /// The panels; immutable after init, so sharing across threads is safe.
    let storage: UnsafeMutablePointer<Int16>
    private let owner: PanelStorage

    /// Int16s in one 16-column panel.
    var panelCount: Int { kpairs * 2 * Int(OSPREY_QGEMM_PANEL) }

    /// Packs `b` (K x N, element (r, c) at `r * rowStride + c * columnStride`) minus `zeroPoints` (one value, or one per column).
    public init<T: FixedWidthInteger>(k: Int, n: Int, values b: UnsafePointer<T>, rowStride: Int, columnStride: Int = 1,
                                      zeroPoints: [Int32]) {
        precondition(zeroPoints.count == 1 || zeroPoints.count == n, "zero points: one, or one per column")
        self.k = k
        self.n = n
        kpairs = (k + 1) / 2
        let panel = Int(OSPREY_QGEMM_PANEL)
        let panels = (n + panel - 1) / panel
        owner = PanelStorage(count: max(1, panels * kpairs * 2 * panel))
        storage = owner.pointer
        storage.initialize(repeating: 0, count: max(1, panels * kpairs * 2 * panel))
        for j in 0..<panels {
            let base = storage + j * kpairs * 2 * panel
            for c in 0..<min(panel, n - j * panel) {
                let column = j * panel + c
                let zero = zeroPoints.count == 1 ? zeroPoints[0] : zeroPoints[column]
                for r in 0..<k {
                    let value = Int32(truncatingIfNeeded: b[r * rowStride + column * columnStride]) - zero
                    base[(r / 2) * 2 * panel + 2 * c + (r & 1)] = Int16(truncatingIfNeeded: value)
                }
            }
        }
    }
}

/// Owns a packed matrix's memory (freed with the last copy of the struct).
private final class PanelStorage {
    let pointer: UnsafeMutablePointer<Int16>
    init(count: Int) { pointer = .allocate(capacity: count) }
    deinit { pointer.deallocate() }
}

/// Left-hand rows widened for `quantizedGemm`: M x K values minus their zero points (one, or one per row),
/// K padded to pairs with zeros, into `out` (M x `quantizedRowStride(k)` int16s).
public func widenQuantizedRows<T: FixedWidthInteger>(m: Int, k: Int, values a: UnsafePointer<T>, rowStride: Int,
                                                     zeroPoints: [Int32], into out: UnsafeMutablePointer<Int16>) {
    precondition(zeroPoints.count == 1 || zeroPoints.count == m, "zero points: one, or one per row")
    let stride = quantizedRowStride(k)
    for r in 0..<m {
        let zero = zeroPoints.count == 1 ? zeroPoints[0] : zeroPoints[r]
        let src = a + r * rowStride, dst = out + r * stride
        for i in 0..<k { dst[i] = Int16(truncatingIfNeeded: Int32(truncatingIfNeeded: src[i]) - zero) }
        if k < stride { dst[k] = 0 }
    }
}

/// Int16s per widened row: K rounded up to an even count.
public func quantizedRowStride(_ k: Int) -> Int { (k + 1) & ~1 }

/// C[M x N] (int32, row stride ldc) = widened A (from `widenQuantizedRows`) x packed B; column panels are split
/// across the compute threads when the product is large enough to pay for it.
public func quantizedGemm(m: Int, a: UnsafePointer<Int16>, b: PackedQuantizedMatrix, c: UnsafeMutablePointer<Int32>, ldc: Int) {
    let panel = Int(OSPREY_QGEMM_PANEL)
    let panels = (b.n + panel - 1) / panel
    let lda = quantizedRowStride(b.k)
    // About 64K multiply-adds per chunk: below that a hand-off to another thread costs more than it saves.
    let perPanel = max(1, m * b.kpairs * 2 * panel)
    parallelRanges(panels, minimumChunk: max(1, 65_536 / perPanel)) { range in
        let first = range.lowerBound * panel
        let columns = min(b.n, range.upperBound * panel) - first
        osprey_qgemm_s16(Int32(m), Int32(columns), Int32(b.kpairs), a, Int32(lda),
                         b.storage + range.lowerBound * b.panelCount, c + first, Int32(ldc))
    }
}

/// Plain reference twin of `quantizedGemm` on the original 8-bit values: sum_k (a - za) * (b - zb), int32.
public func quantizedGemmReference<A: FixedWidthInteger, B: FixedWidthInteger>(
    m: Int, n: Int, k: Int, a: UnsafePointer<A>, aZero: [Int32], b: UnsafePointer<B>, bZero: [Int32], c: UnsafeMutablePointer<Int32>) {
    for i in 0..<m {
        for j in 0..<n {
            var sum: Int32 = 0
            let za = aZero.count == 1 ? aZero[0] : aZero[i], zb = bZero.count == 1 ? bZero[0] : bZero[j]
            for p in 0..<k { sum &+= (Int32(truncatingIfNeeded: a[i * k + p]) - za) * (Int32(truncatingIfNeeded: b[p * n + j]) - zb) }
            c[i * n + j] = sum
        }
    }
}
