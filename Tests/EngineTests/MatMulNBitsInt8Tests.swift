import Testing
import Tensor
import CKernelShim
@testable import Engine
import TestSupport

/// MatMulNBits' accuracy-level-4 product (A quantized to int8 per block, integer dots; nbits_int8.c): every vector body
/// the CPU has against the portable twin, exactly where every float step is exact, and the whole product against a
/// plain statement of onnxruntime's arithmetic.
@Suite struct MatMulNBitsInt8Tests {
    /// The vector bodies this CPU runs (OSPREY_QPATH_AVX2, AVXVNNI, AVX512VNNI).
    static let vectorPaths: [Int32] = [1, 2, 3].filter { osprey_nbits4_int8_supports($0) == 1 }

    /// One 4-bit B with byte zero points, as the kernels take it.
    struct Weights {
        let layout: NBitsLayout
        let bytes: [UInt8]
        let scales: [Float]
        let zeros: [UInt8]
        let bias: [Float]

        /// Random nibbles and zero points; scales from `scale`, bias from `bias`.
        init(k: Int, n: Int, blockSize: Int, _ rng: inout SeededGenerator, scale: (inout SeededGenerator) -> Float, bias: (inout SeededGenerator) -> Float) {
            layout = NBitsLayout(k: k, n: n, bits: 4, blockSize: blockSize)
            bytes = (0..<(n * layout.blocks * layout.blob)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            scales = (0..<(n * layout.blocks)).map { _ in scale(&rng) }
            zeros = (0..<(n * layout.blocks)).map { _ in UInt8.random(in: 0...15, using: &rng) }
            self.bias = (0..<n).map { _ in bias(&rng) }
        }

        /// The int8 product's parameters.
        var product: NBitsInt8Product { NBitsInt8Product(layout: layout, scales: scales, zeroBytes: zeros) }

        /// Columns 1..<n of rows 0..<rows through body `path` (-1: the portable twin over `span`'s layout).
        func gemv(_ a: [Float], rows: Int, path: Int32, span: Int) -> [Float] {
            let (k, n, blocks, size) = (layout.k, layout.n, layout.blocks, layout.blockSize)
            let padded = blocks * size
            var codes = [Int8](repeating: 0, count: rows * padded), lanes = [Float](repeating: 0, count: rows * padded / 8)
            var sums = [Float](repeating: 0, count: rows * blocks)
            osprey_nbits4_int8_quantize(rows, a, k, k, blocks, size, span, &codes, &lanes, &sums, path < 0 ? 1 : 0)
            let p = product
            var y = [Float](repeating: 0, count: rows * n)
            if path < 0 {
                osprey_nbits4_int8_gemv_portable(rows, span, codes, lanes, sums, bytes, p.groupScales, scales, zeros, blocks, size, bias, &y, n, 1, n)
            } else {
                osprey_nbits4_int8_gemv(path, rows, codes, lanes, sums, bytes, p.groupScales, scales, zeros, blocks, size, bias, &y, n, 1, n)
            }
            return y
        }
    }

    /// K a multiple of 128 or leaving a short last span (32, 64 or 96 values), blocks of 32-256, N off the tiles.
    static let shapes = [(256, 13, 32), (96, 7, 32), (160, 11, 32), (200, 9, 64), (1000, 5, 128), (300, 6, 256)]

    @Test func vectorBodiesMatchPortableTwin() {
        var rng = SeededGenerator(seed: 7)
        for (k, n, size) in Self.shapes {
            let w = Weights(k: k, n: n, blockSize: size, &rng, scale: { Float.random(in: 0.01..<0.1, using: &$0) }, bias: { Float.random(in: -1..<1, using: &$0) })
            for rows in 1...4 {
                let a = rng.floats(rows * k)
                for path in Self.vectorPaths {
                    let span = osprey_nbits4_int8_span(path)
                    let (fast, plain) = (w.gemv(a, rows: rows, path: path, span: span), w.gemv(a, rows: rows, path: -1, span: span))
                    // The same integer dots; only the float sums' order differs.
                    let scale = plain.reduce(0) { max($0, abs($1)) }
                    let worst = zip(fast, plain).map { abs($0 - $1) }.max() ?? 0
                    #expect(worst <= 1e-5 * scale, "path \(path) K \(k) N \(n) block \(size) rows \(rows): \(worst) of \(scale)")
                }
            }
        }
    }

    /// The AVX2 quantization writes the portable one's codes, scales and sums bit for bit (ties included: values at
    /// exact halves of a code step), in both span layouts.
    @Test func vectorQuantizationIsBitExact() {
        var rng = SeededGenerator(seed: 10)
        for (k, size) in [(256, 32), (200, 64), (1000, 128), (96, 32)] {
            let layout = NBitsLayout(k: k, n: 1, bits: 4, blockSize: size)
            let (blocks, padded, rows) = (layout.blocks, layout.blocks * size, 3)
            var a = rng.floats(rows * k)
            // Halves of a code step: max|a| = 127 makes the step 1.
            for i in stride(from: 0, to: rows * k, by: size) { a[i] = 127; if i + 1 < a.count { a[i + 1] = 2.5 } }
            for span in [64, 128] {
                func run(_ portable: Int32) -> ([Int8], [Float], [Float]) {
                    var codes = [Int8](repeating: 0, count: rows * padded), lanes = [Float](repeating: 0, count: rows * padded / 8)
                    var sums = [Float](repeating: 0, count: rows * blocks)
                    osprey_nbits4_int8_quantize(rows, a, k, k, blocks, size, span, &codes, &lanes, &sums, portable)
                    return (codes, lanes, sums)
                }
                let (fast, plain) = (run(0), run(1))
                #expect(fast.0 == plain.0 && fast.1 == plain.1 && fast.2 == plain.2, "K \(k) block \(size) span \(span)")
            }
        }
    }

    /// Integer A with max|a| = 127 in every block (so its scale is exactly 1), scales of 1 and integer bias: every
    /// float step is exact, so each body equals the integer sum of (q - zero) * a exactly.
    @Test func integerInputsAreExact() {
        var rng = SeededGenerator(seed: 8)
        for (k, n, size) in Self.shapes {
            let w = Weights(k: k, n: n, blockSize: size, &rng, scale: { _ in 1 }, bias: { Float(Int.random(in: -50...50, using: &$0)) })
            for rows in 1...4 {
                var a = (0..<(rows * k)).map { _ in Float(Int.random(in: -127...127, using: &rng)) }
                for r in 0..<rows { for start in stride(from: 0, to: k, by: size) { a[r * k + start] = 127 } }
                var expected = [Float](repeating: 0, count: rows * n)
                for r in 0..<rows {
                    for c in 1..<n {
                        var total = Int(w.bias[c])
                        for i in 0..<k {
                            let byte = Int(w.bytes[c * w.layout.blocks * w.layout.blob + i / 2])
                            total += ((byte >> ((i & 1) * 4)) & 15 - Int(w.zeros[c * w.layout.blocks + i / size])) * Int(a[r * k + i])
                        }
                        expected[r * n + c] = Float(total)
                    }
                }
                for path in [Int32(0)] + Self.vectorPaths {
                    let y = w.gemv(a, rows: rows, path: path == 0 ? -1 : path, span: osprey_nbits4_int8_span(path))
                    #expect(y == expected, "path \(path) K \(k) N \(n) block \(size) rows \(rows)")
                }
            }
        }
    }

    /// The whole product (1, 5 and 37 rows, threads and cache chunks included) against onnxruntime's arithmetic
    /// written plainly in Double: codes nearbyint(a * 127 / max|a|) per block, scale max|a| / 127 in float.
    @Test func productMatchesOnnxRuntimeArithmetic() {
        var rng = SeededGenerator(seed: 9)
        for (k, n, size) in [(256, 70, 32), (200, 37, 64)] {
            let w = Weights(k: k, n: n, blockSize: size, &rng, scale: { Float.random(in: 0.01..<0.1, using: &$0) }, bias: { Float.random(in: -1..<1, using: &$0) })
            let packed = Tensor(shape: [n, w.layout.blocks, w.layout.blob], scalars: w.bytes)
            let matrix = PackedNBitsMatrix(layout: w.layout, packed: packed, scales: w.scales, zeroBytes: w.zeros, bias: w.bias, int8: true)
            for rows in [1, 5, 37] {
                let a = rng.floats(rows * k)
                var y = [Float](repeating: .nan, count: rows * n)
                y.withUnsafeMutableBufferPointer { o in a.withUnsafeBufferPointer { matrix.multiply($0.baseAddress!, rows: rows, out: o.baseAddress!) } }
                var expected = [Double](repeating: 0, count: rows * n)
                for r in 0..<rows {
                    for start in stride(from: 0, to: k, by: size) {
                        let block = a[(r * k + start)..<(r * k + min(k, start + size))]
                        let amax = block.reduce(Float(0)) { max($0, abs($1)) }
                        let (scale, inverse) = (amax / 127, amax == 0 ? 0 : 127 / amax)
                        let codes = block.map { ($0 * inverse).rounded(.toNearestOrEven) }
                        for c in 0..<n {
                            var dot = 0.0
                            for (i, code) in codes.enumerated() {
                                let index = start + i, byte = Int(w.bytes[c * w.layout.blocks * w.layout.blob + index / 2])
                                dot += Double((byte >> ((index & 1) * 4)) & 15 - Int(w.zeros[c * w.layout.blocks + start / size])) * Double(code)
                            }
                            expected[r * n + c] += dot * Double(scale) * Double(w.scales[c * w.layout.blocks + start / size])
                        }
                    }
                    for c in 0..<n { expected[r * n + c] += Double(w.bias[c]) }
                }
                let worst = zip(y, expected).map { abs(Double($0) - $1) }.max() ?? 0
                let scale = expected.reduce(0) { max($0, abs($1)) }
                #expect(worst <= 1e-5 * scale, "K \(k) N \(n) block \(size) rows \(rows): \(worst) of \(scale)")
            }
        }
    }
}
