import CKernelShim
import Tensor

/// MatMulNBits' constant 4-bit B kept packed as the file stores it ([N][blocks][block_size / 2] bytes, two weights a
/// byte), with its scales, zero points and bias as floats: the weights take an eighth of a dequantized float copy.
///
/// A decode step (1-4 rows of A) streams each packed byte once through the C gemv, split over columns across the
/// compute threads; a prompt goes through 32-column panels dequantized into cache for the packed float micro-kernel.
final class PackedNBitsMatrix: @unchecked Sendable {
    /// K, N, bits (4) and block size.
    let layout: NBitsLayout
    /// B's bytes (uint8, N * blocks * block_size / 2).
    let packed: Tensor
    /// One scale per (column, block), [N * blocks].
    let scales: [Float]
    /// One float zero point per (column, block), or nil.
    let zeros: [Float]?
    /// One integer zero point per (column, block) (the packed uint8 ones unpacked), or nil; 8 everywhere when both are nil.
    let zeroBytes: [UInt8]?
    /// N floats, or nil.
    let bias: [Float]?
    /// The int8 product of accuracy_level 4 (A quantized per block), or nil for the float one.
    let int8: NBitsInt8Product?

    /// Rows of A per gemv call (its C bodies' limit).
    static let gemvRows = 4
    /// Rows of A up to which the gemv runs (in calls of up to four rows, each streaming B once); more go through
    /// dequantized panels. At K = N = 4096 (AVX-512 here) two gemv passes of four rows took 2.2 ms where the panels'
    /// dequantization alone took 2.5; the panels win from about 16 rows.
    static let panelRows = 9

    /// Keeps `packed` (4-bit B) and the parameters as given (at most one of `zeros` and `zeroBytes`); `int8` (blocks of
    /// 32 or more only) multiplies as onnxruntime does at accuracy_level 4.
    init(layout: NBitsLayout, packed: Tensor, scales: [Float], zeros: [Float]? = nil, zeroBytes: [UInt8]? = nil, bias: [Float]?,
         int8: Bool = false) {
        precondition(layout.bits == 4 && packed.count == layout.n * layout.blocks * layout.blob, "4-bit B of the layout's size")
        precondition(zeros == nil || zeroBytes == nil, "one kind of zero points")
        precondition(!int8 || (layout.blockSize >= 32 && zeros == nil), "the int8 product reads blocks of 32 or more, integer zero points")
        (self.layout, self.packed, self.scales, self.zeros, self.zeroBytes, self.bias) = (layout, packed, scales, zeros, zeroBytes, bias)
        self.int8 = int8 ? NBitsInt8Product(layout: layout, scales: scales, zeroBytes: zeroBytes) : nil
    }

    /// out[r * N + c] = bias[c] + sum_k a[r * K + k] * w(k, c) for r < rows (A and out dense, row-major).
    func multiply(_ a: UnsafePointer<Float>, rows: Int, out: UnsafeMutablePointer<Float>) {
        let (k, n) = (layout.k, layout.n)
        packed.withUnsafeBytes { raw in
            let b = raw.bindMemory(to: UInt8.self).baseAddress!
            scales.withUnsafeBufferPointer { s in
                withOptionalPointer(zeros) { z in
                  withOptionalPointer(zeroBytes) { zb in
                    withOptionalPointer(bias) { bias in
                        if let int8 {
                            int8.multiply(a, rows: rows, layout: layout, packed: b, bias: bias, out: out)
                            return
                        }
                        var row = 0
                        // Decode steps in groups of up to four rows; a prompt's rows all go through the panels.
                        if rows >= Self.panelRows {
                            panels(a, rows: rows, b, s.baseAddress!, z, zb, bias, out)
                            row = rows
                        }
                        while row < rows {
                            let count = min(Self.gemvRows, rows - row)
                            gemv(a + row * k, rows: count, b, s.baseAddress!, z, zb, bias, out + row * n)
                            row += count
                        }
                    }
                  }
                }
            }
        }
    }

    /// 1-4 rows: A reordered once, then the columns split across the threads.
    private func gemv(_ a: UnsafePointer<Float>, rows: Int, _ b: UnsafePointer<UInt8>, _ s: UnsafePointer<Float>,
                      _ z: UnsafePointer<Float>?, _ zb: UnsafePointer<UInt8>?, _ bias: UnsafePointer<Float>?, _ out: UnsafeMutablePointer<Float>) {
        let (k, n, blocks, size) = (layout.k, layout.n, layout.blocks, layout.blockSize)
        let padded = blocks * size
        let prepared = allocateFloats(rows * padded)
        defer { prepared.deallocate() }
        // One layout for both calls, even if a test switches the AVX-512 bodies off in between.
        let group = osprey_nbits4_group(size)
        osprey_nbits4_prepare_rows(rows, a, k, k, blocks, size, group, prepared)
        // About 64k weights a part at least: below that a second thread's wake-up costs more than it saves.
        parallelRanges(n, minimumChunk: max(4, (1 << 16) / padded)) { range in
            osprey_nbits4_gemv(rows, prepared, b, s, z, zb, blocks, size, group, bias, out, n, range.lowerBound, range.upperBound)
        }
    }

    /// More rows: pairs of 16-column strips split across the threads, each part with its own panel.
    private func panels(_ a: UnsafePointer<Float>, rows: Int, _ b: UnsafePointer<UInt8>, _ s: UnsafePointer<Float>,
                        _ z: UnsafePointer<Float>?, _ zb: UnsafePointer<UInt8>?, _ bias: UnsafePointer<Float>?, _ out: UnsafeMutablePointer<Float>) {
        let (k, n, blocks, size) = (layout.k, layout.n, layout.blocks, layout.blockSize)
        let pairs = (n + 31) / 32, padded = blocks * size
        let run = { (range: Range<Int>) in
            let panel = allocateFloats(2 * padded * 16)
            defer { panel.deallocate() }
            osprey_nbits4_gemm(rows, a, k, k, b, s, z, zb, blocks, size, n, bias, out, n, range.lowerBound, range.upperBound, panel)
        }
        // Below about a million multiply-adds a second thread's wake-up costs more than it saves.
        if rows * n * k < 1 << 20 { run(0..<pairs) } else { parallelRanges(pairs, run) }
    }
}

/// `body` with a pointer to `values`' elements, or nil when `values` is nil.
func withOptionalPointer<T, R>(_ values: [T]?, _ body: (UnsafePointer<T>?) -> R) -> R {
    guard let values else { return body(nil) }
    return values.withUnsafeBufferPointer { body($0.baseAddress) }
}
