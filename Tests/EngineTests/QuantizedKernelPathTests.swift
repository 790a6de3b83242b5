import CKernelShim
import Testing
import Tensor
@testable import Engine
import TestSupport

/// Every body of the u8 x s8 kernels this CPU has (portable, AVX2, AVX-VNNI, AVX512-VNNI), forced one at a time,
/// against the exact sums and the portable twin: the row GEMM and the convolution GEMM on odd shapes (1-9 and 13
/// rows: partial and whole 6-row (ymm) and 8-row (zmm) tiles, columns off the 16-column panels and in whole pairs of
/// panels (the zmm row GEMM's two-panel tiles), K off whole quads), full-range int8 weights (-128 and 127 against 255) on the
/// paths that take them, and on the AVX2 path (which must hand them to the portable body); the depthwise planes.
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
            for (n, k) in [(1, 1), (5, 3), (17, 6), (33, 13), (16, 64), (20, 71), (48, 9), (64, 20), (32, 77)] {
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
            for (n, k) in [(1, 1), (15, 3), (17, 9), (40, 27), (32, 64), (64, 12), (48, 9), (48, 32)] {
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

    /// The depthwise planes (`osprey_qdepthwise_planes`) on every path against the portable body: wide planes (rows of
    /// 16-output vectors), small ones (the zmm body's runs across rows, the AVX2 channel kernel), strides 1-3 and unequal,
    /// dilation, 1 x 1 to 5 x 5 windows, int8 and uint8 inputs, every output kind, a plane range starting mid-image, and
    /// weights beyond int8 (which the zmm body hands to the AVX2 one).
    @Test func depthwiseBodiesMatchThePortableBody() {
        var rng = SeededGenerator(seed: 104)
        let available = paths
        // (h, w, kh, kw, sh, sw, pad, dilation)
        let shapes = [(7, 7, 3, 3, 1, 1, 1, 1), (14, 14, 3, 3, 2, 2, 1, 1), (40, 37, 3, 3, 1, 1, 1, 1), (33, 50, 3, 3, 2, 2, 1, 1),
                      (9, 11, 5, 5, 1, 1, 2, 1), (12, 10, 3, 3, 1, 2, 1, 1), (13, 13, 3, 3, 3, 3, 0, 1), (10, 19, 3, 3, 1, 1, 2, 2),
                      (6, 5, 1, 1, 1, 1, 0, 1), (20, 20, 3, 5, 1, 1, 1, 1)]
        let channels = 5, images = 2
        for (h, w, kh, kw, sh, sw, pad, dilation) in shapes {
            let oh = (h + 2 * pad - dilation * (kh - 1) - 1) / sh + 1, ow = (w + 2 * pad - dilation * (kw - 1) - 1) / sw + 1
            for (isSigned, wide) in [(false, false), (true, false), (false, true)] {
                let x = (0..<(images * channels * h * w)).map { _ in UInt8.random(in: 0...255, using: &rng) }
                var weights = (0..<(channels * kh * kw)).map { _ in Int32.random(in: -128...127, using: &rng) }
                if wide { weights[kh * kw - 1] = 200 }
                let bias = (0..<channels).map { _ in Int32.random(in: -3000...3000, using: &rng) }
                let scale = (0..<channels).map { _ in Float.random(in: 0.002...0.01, using: &rng) }, floatBias = rng.floats(channels)
                var packed = [Int32](repeating: 0, count: Int(osprey_qdepthwise_channels_packed_count(Int32(channels), Int32(kh * kw))))
                osprey_qdepthwise_channels_pack(weights, Int32(channels), Int32(kh * kw), &packed)
                var scratch = [Int32](repeating: 0, count: Int(osprey_qdepthwise_scratch(Int32(h), Int32(w), Int32(kh), Int32(kw), Int32(sh), Int32(sw),
                                                                                         Int32(dilation), Int32(dilation), Int32(pad), Int32(pad), Int32(oh), Int32(ow))))
                let xZero: Int32 = isSigned ? -5 : 131
                for kind in kinds() {
                    let size = kind == OSPREY_QOUT_U8 || kind == OSPREY_QOUT_S8 ? 1 : 4
                    func run(_ path: Int32) -> [UInt8] {
                        var out = [UInt8](repeating: 0xA5, count: images * channels * oh * ow * size)
                        _ = osprey_qkernels_force_path(path)
                        defer { _ = osprey_qkernels_force_path(-1) }
                        var ep = epilogue(kind, bias: bias, scale: scale, floatBias: floatBias)
                        // Planes 3 on: the range starts mid-image and crosses into the next one.
                        osprey_qdepthwise_planes(x, isSigned ? 1 : 0, xZero, 3, Int32(images * channels - 3), Int32(channels), Int32(h), Int32(w), weights,
                                                 packed, Int32(kh), Int32(kw), Int32(sh), Int32(sw), Int32(dilation), Int32(dilation), Int32(pad), Int32(pad),
                                                 Int32(oh), Int32(ow), &ep, &out, &scratch)
                        return out
                    }
                    let reference = run(Int32(OSPREY_QPATH_PORTABLE))
                    for path in available where path != OSPREY_QPATH_PORTABLE {
                        #expect(run(path) == reference, "depthwise path \(path) \(h)x\(w) k \(kh)x\(kw) s \(sh),\(sw) signed \(isSigned) wide \(wide) kind \(kind)")
                    }
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
