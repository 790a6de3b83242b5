import Testing
import Tensor
import CKernelShim
@testable import Engine
import TestSupport

/// The 4-bit MatMulNBits kernels over packed weights against the dequantize-at-load twin (`NBitsLayout.dequantized`
/// times the plain product), and their vector bodies against the portable C twins.
@Suite struct MatMulNBitsKernelTests {
    /// One random 4-bit B: packed bytes (padding nibbles past K random too), scales, zero points and bias.
    struct Case {
        let layout: NBitsLayout
        let packed: Tensor
        let scales: [Float]
        let zeros: [Float]?
        let bias: [Float]?

        init(k: Int, n: Int, blockSize: Int, zeros hasZeros: Bool, bias hasBias: Bool, _ rng: inout SeededGenerator) {
            layout = NBitsLayout(k: k, n: n, bits: 4, blockSize: blockSize)
            let bytes = (0..<(n * layout.blocks * layout.blob)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            packed = Tensor(shape: [n, layout.blocks, layout.blob], scalars: bytes)
            scales = (0..<(n * layout.blocks)).map { _ in Float.random(in: 0.01..<0.1, using: &rng) }
            zeros = hasZeros ? (0..<(n * layout.blocks)).map { _ in Float(Int.random(in: 0...15, using: &rng)) } : nil
            bias = hasBias ? rng.floats(n) : nil
        }

        /// The packed kernel's product, with the zero points as floats or (`bytes`) as bytes.
        func packedProduct(_ a: [Float], rows: Int, bytes: Bool = false) -> [Float] {
            let matrix = bytes ? PackedNBitsMatrix(layout: layout, packed: packed, scales: scales, zeroBytes: zeros.map { $0.map { UInt8($0) } }, bias: bias)
                : PackedNBitsMatrix(layout: layout, packed: packed, scales: scales, zeros: zeros, bias: bias)
            var out = [Float](repeating: .nan, count: rows * layout.n)
            out.withUnsafeMutableBufferPointer { o in a.withUnsafeBufferPointer { matrix.multiply($0.baseAddress!, rows: rows, out: o.baseAddress!) } }
            return out
        }

        /// The twin: B dequantized at load, times the plain triple loop.
        func referenceProduct(_ a: [Float], rows: Int) -> [Float] {
            let parts = NBitsParts(scales: scales, zeros: zeros ?? [Float](repeating: 8, count: scales.count), groups: nil)
            let weights = layout.dequantized(packed: packed, parts).scalars(as: Float.self)
            var out = [Float](repeating: 0, count: rows * layout.n)
            a.withUnsafeBufferPointer { ap in
                weights.withUnsafeBufferPointer { w in
                    out.withUnsafeMutableBufferPointer { o in
                        if let bias {
                            bias.withUnsafeBufferPointer {
                                packedMatmulReference(ap.baseAddress!, lda: layout.k, rows: rows, b: w.baseAddress!, depth: layout.k, columns: layout.n,
                                                      bias: $0.baseAddress, residual: nil, activation: .none, out: o.baseAddress!)
                            }
                        } else {
                            packedMatmulReference(ap.baseAddress!, lda: layout.k, rows: rows, b: w.baseAddress!, depth: layout.k, columns: layout.n,
                                                  bias: nil, residual: nil, activation: .none, out: o.baseAddress!)
                        }
                    }
                }
            }
            return out
        }
    }

    /// Within the models' tolerance of the reference: 1e-4 of its largest magnitude plus 1e-5.
    func expectWithinTolerance(_ actual: [Float], _ expected: [Float], _ context: String) {
        #expect(actual.count == expected.count, "\(context): count")
        let scale = expected.reduce(0) { max($0, abs($1)) }
        let worst = zip(actual, expected).map { abs($0 - $1) }.max() ?? 0
        #expect(worst <= 1e-4 * scale + 1e-5, "\(context): max diff \(worst), max|ref| \(scale)")
    }

    /// Block sizes 16-256, K a multiple of the block or not, N not a multiple of 4, 8, 16 or 32, with and without zero
    /// points and bias; 1-5 rows (gemv), 9 and 37 (panels), at one and two threads.
    @Test func packedProductMatchesDequantizedTwin() {
        var rng = SeededGenerator(seed: 41)
        defer { EngineThreads.configure(threads: 2) }
        for (k, n, blockSize) in [(64, 37, 16), (100, 45, 32), (256, 70, 128), (300, 33, 256), (777, 129, 32), (4096, 96, 128)] {
            for (hasZeros, hasBias) in [(false, false), (true, true), (true, false), (false, true)] {
                let c = Case(k: k, n: n, blockSize: blockSize, zeros: hasZeros, bias: hasBias, &rng)
                for rows in [1, 2, 3, 4, 5, 9, 37] {
                    let a = rng.floats(rows * k)
                    let expected = c.referenceProduct(a, rows: rows)
                    for threads in [1, 2] {
                        EngineThreads.configure(threads: threads)
                        // Integer zero points as bytes too, at one thread.
                        for bytes in hasZeros && threads == 1 ? [false, true] : [false] {
                            expectWithinTolerance(c.packedProduct(a, rows: rows, bytes: bytes), expected,
                                                  "K \(k) N \(n) block \(blockSize) zeros \(hasZeros) bytes \(bytes) bias \(hasBias) rows \(rows) threads \(threads)")
                        }
                    }
                }
            }
        }
    }

    /// The dispatched gemv (AVX-512F or AVX2 + FMA here) against its portable C twin on the same reordered rows, in
    /// both A layouts.
    @Test(arguments: [16, 32]) func gemvMatchesPortableTwin(group: Int) {
        var rng = SeededGenerator(seed: 42)
        for (k, n, blockSize) in [(48, 9, 16), (200, 23, 64), (1000, 17, 256), (70, 13, 32)] where blockSize >= group {
            let c = Case(k: k, n: n, blockSize: blockSize, zeros: true, bias: true, &rng)
            let (blocks, padded) = (c.layout.blocks, c.layout.blocks * blockSize)
            for rows in 1...4 {
                let a = rng.floats(rows * k)
                var prepared = [Float](repeating: 0, count: rows * padded)
                osprey_nbits4_prepare_rows(rows, a, k, k, blocks, blockSize, group, &prepared)
                var plain = [Float](repeating: .nan, count: rows * n)
                c.packed.withUnsafeBytes { raw in
                    // Columns 1..<n: a range that starts past 0 and ends off the 4-column tiles.
                    osprey_nbits4_gemv_portable(rows, prepared, raw.bindMemory(to: UInt8.self).baseAddress!, c.scales, c.zeros!, nil, blocks,
                                                blockSize, group, c.bias!, &plain, n, 1, n)
                }
                for r in 0..<rows { plain[r * n] = 0 }
                // The same zero points as bytes on even row counts.
                let zeroBytes = c.zeros!.map { UInt8($0) }
                forEachFloatKernelBody { body in
                    var fast = [Float](repeating: .nan, count: rows * n)
                    c.packed.withUnsafeBytes { raw in
                        let b = raw.bindMemory(to: UInt8.self).baseAddress!
                        if rows % 2 == 0 {
                            osprey_nbits4_gemv(rows, prepared, b, c.scales, nil, zeroBytes, blocks, blockSize, group, c.bias!, &fast, n, 1, n)
                        } else {
                            osprey_nbits4_gemv(rows, prepared, b, c.scales, c.zeros!, nil, blocks, blockSize, group, c.bias!, &fast, n, 1, n)
                        }
                    }
                    for r in 0..<rows { fast[r * n] = 0 }
                    expectWithinTolerance(fast, plain, "gemv \(body) group \(group) K \(k) N \(n) block \(blockSize) rows \(rows)")
                }
            }
        }
    }

    /// The vector strip dequantization (AVX-512F and AVX2) equals the portable one and the load-time twin exactly (the
    /// same (q - z) * s).
    @Test func dequantizedStripIsExact() {
        var rng = SeededGenerator(seed: 43)
        for (k, n, blockSize, hasZeros) in [(40, 21, 16, true), (96, 40, 32, false), (130, 7, 128, true), (64, 29, 32, true)] {
            let c = Case(k: k, n: n, blockSize: blockSize, zeros: hasZeros, bias: false, &rng)
            let padded = c.layout.blocks * blockSize
            let parts = NBitsParts(scales: c.scales, zeros: c.zeros ?? [Float](repeating: 8, count: c.scales.count), groups: nil)
            let twin = c.layout.dequantized(packed: c.packed, parts).scalars(as: Float.self)
            for c0 in stride(from: 0, to: n, by: 16) {
                var plain = [Float](repeating: .nan, count: padded * 16)
                c.packed.withUnsafeBytes { raw in
                    let b = raw.bindMemory(to: UInt8.self).baseAddress!
                    osprey_nbits4_dequantize_strip(b, c.scales, c.zeros, nil, c.layout.blocks, blockSize, n, c0, &plain, 1)
                }
                forEachFloatKernelBody { body in
                    var fast = [Float](repeating: .nan, count: padded * 16)
                    c.packed.withUnsafeBytes { raw in
                        let b = raw.bindMemory(to: UInt8.self).baseAddress!
                        osprey_nbits4_dequantize_strip(b, c.scales, c.zeros, nil, c.layout.blocks, blockSize, n, c0, &fast, 0)
                    }
                    #expect(fast == plain, "\(body) strip \(c0) of K \(k) N \(n) block \(blockSize)")
                }
                for p in 0..<k {
                    for j in 0..<16 {
                        let expected: Float = c0 + j < n ? twin[p * n + c0 + j] : 0
                        if plain[p * 16 + j] != expected { Issue.record("strip \(c0) p \(p) j \(j): \(plain[p * 16 + j]) vs \(expected)"); return }
                    }
                }
            }
        }
    }
}
