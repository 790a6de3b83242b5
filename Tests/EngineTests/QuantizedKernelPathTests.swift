import CKernelShim
import Testing
import Tensor
@testable import Engine
import TestSupport

/// Every body of the u8 x s8 kernels this CPU has (portable, AVX2, AVX-VNNI, AVX512-VNNI), forced one at a time,
/// against the exact sums and the portable twin: the row GEMM and the convolution GEMM on odd shapes (1-9 and 13
/// rows: partial and whole 6-row (ymm) and 8-row (zmm) tiles, columns off the 16-column panels, K off whole quads), full-range int8 weights (-128 and 127 against 255) on the
/// paths that take them, and on the AVX2 path (which must hand them to the portable body).
@Suite(.serialized) struct QuantizedKernelPathTests {
    /// The bodies to run here: each path the CPU supports.
    private var paths: [Int32] {
        let all = [OSPREY_QPATH_PORTABLE, OSPREY_QPATH_AVX2, OSPREY_QPATH_AVXVNNI, OSPREY_QPATH_AVX512VNNI].map { Int32($0) }
        defer { _ = osprey_qkernels_force_path(-1) }
        return all.filter { osprey_qkernels_force_path($0) == $0 }
    }

    /// Weights for one case: random in [-64, 64] or over int8's whole range with both ends present.
    private func weights(_ count: Int, fullRange: Bool, _ rng: inout SeededGenerator) -> [Int8] {
        var w = (0..<count).map { _ in fullRange ? Int8.random(in: .min ... .max, using: &rng) : Int8.random(in: -64...64, using: &rng) }
        if fullRange && count >= 2 { w[0] = -128; w[count - 1] = 127 }
        return w
    }

    /// Activations with many 255s (the products that saturate vpmaddubsw's pairs).
    private func activations(_ count: Int, _ rng: inout SeededGenerator) -> [UInt8] {
        (0..<count).map { _ in Bool.random(using: &rng) ? 255 : UInt8.random(in: 0...255, using: &rng) }
    }

    /// The epilogues to store through: int32, uint8 and int8 requantized, float.
    private func epilogue(_ kind: Int, bias: UnsafePointer<Int32>, scale: UnsafePointer<Float>, floatBias: UnsafePointer<Float>) -> osprey_qepilogue {
        osprey_qepilogue(bias: bias, scale: scale, float_bias: kind == OSPREY_QOUT_F32 ? floatBias : nil, zero_point: kind == OSPREY_QOUT_S8 ? -3 : 7,
                         kind: Int32(kind), transposed: 0)
    }

    private func kinds() -> [Int] { [OSPREY_QOUT_INT32, OSPREY_QOUT_U8, OSPREY_QOUT_S8, OSPREY_QOUT_F32].map { Int($0) } }

    /// `osprey_qgemv_u8s8` (x: M x K activations, `flip` for int8; weights N rows of K) on `path`, bytes of the output.
    private func rowGemm(path: Int32, m: Int, n: Int, k: Int, x: [UInt8], flip: Bool, w: [Int8], fullRange: Bool, kind: Int,
                         bias: [Int32], scale: [Float], floatBias: [Float]) -> [UInt8] {
        let stride = (k + 3) & ~3
        var rows = [Int8](repeating: 0, count: n * stride)
        for c in 0..<n { for i in 0..<k { rows[c * stride + i] = w[c * k + i] } }
        var packed = [UInt8](repeating: 0, count: (n + 15) / 16 * stride / 4 * 64)
        rows.withUnsafeBytes { osprey_qpack_u8_rows(Int32(k), Int32(n), $0.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(stride), 0, &packed) }
        let size = kind == OSPREY_QOUT_U8 || kind == OSPREY_QOUT_S8 ? 1 : 4
        var out = [UInt8](repeating: 0xA5, count: m * n * size)
        _ = osprey_qkernels_force_path(path)
        defer { _ = osprey_qkernels_force_path(-1) }
        var ep = epilogue(kind, bias: bias, scale: scale, floatBias: floatBias)
        osprey_qgemv_u8s8(Int32(m), Int32(n), Int32(k), x, Int32(k), flip ? 1 : 0, fullRange ? 1 : 0, packed, &ep, &out, Int32(n))
        return out
    }

    @Test func rowGemmBodiesMatchTheExactSums() {
        var rng = SeededGenerator(seed: 101)
        let available = paths
        #expect(available.contains(Int32(OSPREY_QPATH_PORTABLE)))
        for m in [1, 2, 3, 4, 5, 6, 7, 8, 9, 13] {
            for (n, k) in [(1, 1), (5, 3), (17, 6), (33, 13), (16, 64), (20, 71)] {
                for fullRange in [false, true] {
                    let x = activations(m * k, &rng), w = weights(n * k, fullRange: fullRange, &rng)
                    let bias = (0..<n).map { _ in Int32.random(in: -5000...5000, using: &rng) }
                    let scale = (0..<n).map { _ in Float.random(in: 0.0005...0.004, using: &rng) }, floatBias = rng.floats(n)
                    for flip in [false, true] {
                        // Exact sums: x read as uint8 (XOR 0x80 for int8), times w, plus bias.
                        var exact = [Int32](repeating: 0, count: m * n)
                        for r in 0..<m { for c in 0..<n {
                            var s = bias[c]
                            for i in 0..<k { s += Int32(x[r * k + i] ^ (flip ? 0x80 : 0)) * Int32(w[c * k + i]) }
                            exact[r * n + c] = s
                        } }
                        for kind in kinds() {
                            let reference = rowGemm(path: Int32(OSPREY_QPATH_PORTABLE), m: m, n: n, k: k, x: x, flip: flip, w: w, fullRange: fullRange,
                                                    kind: kind, bias: bias, scale: scale, floatBias: floatBias)
                            if kind == OSPREY_QOUT_INT32 {
                                let sums = reference.withUnsafeBytes { Array($0.bindMemory(to: Int32.self)) }
                                #expect(sums == exact, "portable row GEMM \(m)x\(n)x\(k) full \(fullRange) flip \(flip)")
                            }
                            for path in available where path != OSPREY_QPATH_PORTABLE {
                                // The AVX2 body only ever sees weights in [-64, 64]; full-range calls must fall back to exact.
                                let got = rowGemm(path: path, m: m, n: n, k: k, x: x, flip: flip, w: w, fullRange: fullRange, kind: kind,
                                                  bias: bias, scale: scale, floatBias: floatBias)
                                #expect(got == reference, "row GEMM path \(path) \(m)x\(n)x\(k) full \(fullRange) flip \(flip) kind \(kind)")
                            }
                        }
                    }
                }
            }
        }
    }

    /// `osprey_qgemm_packed` (A: M rows of weights, B: K x N activations packed into panels) on `path`.
    private func convGemm(path: Int32, m: Int, n: Int, k: Int, a: [Int8], b: [UInt8], wide: Int32, kind: Int, bias: [Int32], scale: [Float]) -> [UInt8] {
        let stride = (k + 3) & ~3
        var rows = [Int8](repeating: 0, count: m * stride)
        for r in 0..<m { for i in 0..<k { rows[r * stride + i] = a[r * k + i] } }
        _ = osprey_qkernels_force_path(path)
        defer { _ = osprey_qkernels_force_path(-1) }
        var packed = [UInt8](repeating: 0, count: (n + 15) / 16 * stride / 4 * 64)
        osprey_qpack_u8(Int32(k), Int32(n), b, Int32(n), 0, &packed)
        let size = kind == OSPREY_QOUT_U8 || kind == OSPREY_QOUT_S8 ? 1 : 4
        var out = [UInt8](repeating: 0xA5, count: m * n * size)
        var ep = epilogue(kind, bias: bias, scale: scale, floatBias: scale)
        osprey_qgemm_packed(wide, Int32(m), Int32(n), Int32(stride / 4), rows, Int32(stride), packed, &ep, &out, Int32(n))
        return out
    }

    @Test func convolutionGemmBodiesMatchTheExactSums() {
        var rng = SeededGenerator(seed: 102)
        let available = paths
        for m in [1, 2, 3, 4, 5, 6, 7, 8, 9, 13] {
            for (n, k) in [(1, 1), (15, 3), (17, 9), (40, 27), (32, 64)] {
                for fullRange in [false, true] {
                    let a = weights(m * k, fullRange: fullRange, &rng), b = activations(k * n, &rng)
                    let bias = (0..<m).map { _ in Int32.random(in: -5000...5000, using: &rng) }
                    let scale = (0..<m).map { _ in Float.random(in: 0.0005...0.004, using: &rng) }
                    var exact = [Int32](repeating: 0, count: m * n)
                    for r in 0..<m { for c in 0..<n {
                        var s = bias[r]
                        for i in 0..<k { s += Int32(a[r * k + i]) * Int32(b[i * n + c]) }
                        exact[r * n + c] = s
                    } }
                    let wide: Int32 = fullRange ? 2 : 0
                    for kind in kinds() where kind != OSPREY_QOUT_F32 {
                        let reference = convGemm(path: Int32(OSPREY_QPATH_PORTABLE), m: m, n: n, k: k, a: a, b: b, wide: wide, kind: kind, bias: bias, scale: scale)
                        if kind == OSPREY_QOUT_INT32 {
                            #expect(reference.withUnsafeBytes { Array($0.bindMemory(to: Int32.self)) } == exact, "portable conv GEMM \(m)x\(n)x\(k) full \(fullRange)")
                        }
                        for path in available where path != OSPREY_QPATH_PORTABLE {
                            let got = convGemm(path: path, m: m, n: n, k: k, a: a, b: b, wide: wide, kind: kind, bias: bias, scale: scale)
                            #expect(got == reference, "conv GEMM path \(path) \(m)x\(n)x\(k) full \(fullRange) kind \(kind)")
                        }
                    }
                }
            }
        }
    }

    /// The int16-pair product (vpmaddwd, or VNNI's vpdpwssd) on every path: exact for any centred 8-bit values.
    @Test func int16GemmBodiesMatchTheExactSums() {
        var rng = SeededGenerator(seed: 103)
        let available = paths
        for m in [1, 4, 7, 8, 11] {
            for (n, k) in [(3, 1), (17, 5), (33, 40)] {
                let a = (0..<(m * k)).map { _ in Int16.random(in: -255...255, using: &rng) }
                let b = (0..<(k * n)).map { _ in UInt8.random(in: 0...255, using: &rng) }
                let stride = (k + 1) & ~1
                var rows = [Int16](repeating: 0, count: m * stride)
                for r in 0..<m { for i in 0..<k { rows[r * stride + i] = a[r * k + i] } }
                var exact = [Int32](repeating: 0, count: m * n)
                for r in 0..<m { for c in 0..<n { for i in 0..<k { exact[r * n + c] += Int32(a[r * k + i]) * (Int32(b[i * n + c]) - 200) } } }
                for path in available {
                    _ = osprey_qkernels_force_path(path)
                    var packed = [Int16](repeating: 0, count: (n + 15) / 16 * stride * 16)
                    osprey_qpack_s16(Int32(k), Int32(n), b, Int32(n), 0, 200, &packed)
                    var out = [Int32](repeating: -1, count: m * n)
                    osprey_qgemm_s16(Int32(m), Int32(n), Int32(stride / 2), rows, Int32(stride), packed, &out, Int32(n))
                    _ = osprey_qkernels_force_path(-1)
                    #expect(out == exact, "int16 GEMM path \(path) \(m)x\(n)x\(k)")
                }
            }
        }
    }

    /// Plans keep full-range int8 weights in one u8 x s8 pass exactly when the current path is a VNNI one.
    @Test func plansKeepFullRangeWeightsOnlyWhereExact() {
        let w = Tensor(shape: [3, 2], scalars: [Int8(-128), 127, 5, -70, 64, 0])
        let vnni = paths.contains { $0 >= OSPREY_QPATH_AVXVNNI }
        #expect((QuantizedMatMulPlan(w, zero: nil) != nil) == vnni)
        #expect(QuantizedMatMulPlan(w, zero: nil, fullRange: true)?.fullRange == true)
        #expect(QuantizedMatMulPlan(w, zero: nil, fullRange: false) == nil)
        _ = osprey_qkernels_force_path(Int32(OSPREY_QPATH_AVX2))
        #expect(osprey_qkernels_exact_int8() == 0)
        _ = osprey_qkernels_force_path(-1)
    }
}
