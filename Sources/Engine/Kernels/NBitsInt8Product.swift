import CKernelShim

/// MatMulNBits' 4-bit product at accuracy_level 4, as onnxruntime computes it there: each row of A quantized to int8
/// per block (symmetric, scale max|a| / 127), integer dots of the codes with B's nibbles per 32-value group, scaled
/// in float (nbits_int8.c). B, its scales and zero points stay the packed matrix's (shared storage); blocks over 32
/// add their scales repeated per 32-value group.
struct NBitsInt8Product: Sendable {
    /// B's scale per (column, 32-value group), [N * padded / 32] (the scales themselves for blocks of 32).
    let groupScales: [Float]
    /// B's scale per (column, block), [N * blocks].
    let scales: [Float]
    /// B's zero point per (column, block) (the packed uint8 ones unpacked), or nil for 8.
    let zeroBytes: [UInt8]?

    /// Columns per cache chunk of a prompt: 64 columns of B at K = 4096 are 128 KiB, which stay in L2 while every
    /// group of four rows passes over them.
    static let chunkColumns = 64

    /// The parameters for `layout` (4 bits, block_size >= 32): integer zero points only (onnxruntime keeps the float
    /// product for float ones).
    init(layout: NBitsLayout, scales: [Float], zeroBytes: [UInt8]?) {
        let (n, blocks, perBlock) = (layout.n, layout.blocks, layout.blockSize / 32)
        if perBlock == 1 {
            // Blocks of 32: the scales themselves, sharing their storage (a quarter of B's bytes not copied).
            groupScales = scales
        } else {
            var groups = [Float](repeating: 0, count: n * blocks * perBlock)
            for i in 0..<(n * blocks) { for g in 0..<perBlock { groups[i * perBlock + g] = scales[i] } }
            groupScales = groups
        }
        (self.scales, self.zeroBytes) = (scales, zeroBytes)
    }

    /// out[r * N + c] = bias[c] + the accuracy-level-4 product of row r of A (dense, row-major) and column c of B.
    func multiply(_ a: UnsafePointer<Float>, rows: Int, layout: NBitsLayout, packed b: UnsafePointer<UInt8>, bias: UnsafePointer<Float>?,
                  out: UnsafeMutablePointer<Float>) {
        let (k, n, blocks, size) = (layout.k, layout.n, layout.blocks, layout.blockSize)
        let padded = blocks * size
        // One body for the quantization's layout and the products, even if a test forces another in between.
        let path = osprey_qkernels_path()
        let codes = UnsafeMutablePointer<Int8>.allocate(capacity: rows * padded)
        let lanes = allocateFloats(rows * padded / 8), sums = allocateFloats(rows * blocks)
        defer { codes.deallocate(); lanes.deallocate(); sums.deallocate() }
        osprey_nbits4_int8_quantize(rows, a, k, k, blocks, size, osprey_nbits4_int8_span(path), codes, lanes, sums, 0)
        groupScales.withUnsafeBufferPointer { g in
          scales.withUnsafeBufferPointer { s in
            withOptionalPointer(zeroBytes) { z in
                let (g, s) = (g.baseAddress!, s.baseAddress!)
                // Columns split across the threads; inside a part, chunks of columns stay in cache while the rows pass.
                let minimum = rows > 4 ? Self.chunkColumns : max(4, (1 << 16) / padded)
                parallelRanges(n, minimumChunk: minimum) { range in
                    var c0 = range.lowerBound
                    while c0 < range.upperBound {
                        let c1 = min(range.upperBound, c0 + Self.chunkColumns)
                        var row = 0
                        while row < rows {
                            let count = min(4, rows - row)
                            osprey_nbits4_int8_gemv(path, count, codes + row * padded, lanes + row * (padded / 8), sums + row * blocks, b,
                                                    g, s, z, blocks, size, bias, out + row * n, n, c0, c1)
                            row += count
                        }
                        c0 = c1
                    }
                }
            }
          }
        }
    }
}
