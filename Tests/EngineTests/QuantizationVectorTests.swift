import CKernelShim
import Testing
import Tensor
@testable import Engine
import TestSupport

/// The 16-lane quantization bodies against their scalar twins, bit for bit.
@Suite struct QuantizationVectorTests {
    @Test func dynamicQuantizeLinearMatchesTheReference() {
        var rng = SeededGenerator(seed: 41)
        for count in [0, 1, 15, 16, 17, 100, 1031] {
            for (shift, spread) in [(Float(0), Float(3)), (2, 1), (-5, 2), (0, 0)] {
                let x = Tensor(shape: [count], scalars: rng.floats(count).map { $0 * spread + shift })
                let fast = dynamicQuantizeLinearVector(x), reference = dynamicQuantizeLinearReference(x)
                #expect(fast[0].scalars(as: UInt8.self) == reference[0].scalars(as: UInt8.self), "count \(count) shift \(shift)")
                #expect(fast[1].scalars(as: Float.self) == reference[1].scalars(as: Float.self), "count \(count) shift \(shift)")
                #expect(fast[2].scalars(as: UInt8.self) == reference[2].scalars(as: UInt8.self), "count \(count) shift \(shift)")
            }
        }
    }

    @Test func dynamicQuantizeLinearRoundsTiesToEven() {
        // Range [-0.5, 127]: scale 0.5, zero point 1; x / scale lands on .5 ties.
        let x = Tensor(shape: [6], scalars: [Float(-0.5), 127, 0.25, 0.75, 1.25, 2.75])
        let fast = dynamicQuantizeLinearVector(x), reference = dynamicQuantizeLinearReference(x)
        #expect(fast[0].scalars(as: UInt8.self) == reference[0].scalars(as: UInt8.self))
        #expect(fast[0].scalars(as: UInt8.self) == [0, 255, 1, 3, 3, 7])
    }

    @Test(arguments: [DType.uint8, .int8]) func requantizationWithOneMultiplierMatchesTheTable(_ dtype: DType) throws {
        var rng = SeededGenerator(seed: 43)
        let values = (0..<555).map { _ in Int32.random(in: -40_000...40_000, using: &rng) } + [Int32.max, Int32.min, 0, 50, -50]
        let sums = Tensor(shape: [values.count], scalars: values)
        let zero = dtype == .int8 ? Tensor(scalar: Int8(-3)) : Tensor(scalar: UInt8(130))
        let flat = try #require(requantizedMatMulSums(sums, aScale: [0.02], bScale: [0.013], yScale: 0.31, yZero: zero))
        // The same scales given per row and per column take the per-element table.
        let table = try #require(requantizedMatMulSums(sums, aScale: [0.02], bScale: [Double](repeating: 0.013, count: sums.count), yScale: 0.31, yZero: zero))
        #expect(flat.dtype == dtype && flat.doubles == table.doubles)
    }

    @Test(arguments: [false, true]) func quantizeAndDequantizeRunsCoverTheirTails(_ signed: Bool) {
        var rng = SeededGenerator(seed: 47)
        for count in [1, 15, 16, 31, 64] {
            let x = rng.floats(count).map { $0 * 40 }
            var bytes = [UInt8](repeating: 0, count: count)
            x.withUnsafeBufferPointer { quantizeRun($0.baseAddress!, count: count, scale: 0.25, zero: signed ? -7 : 100, signed: signed, into: &bytes) }
            let expected = x.map { v -> Int in
                let q = Int((v / 0.25).rounded(.toNearestOrEven)) + (signed ? -7 : 100)
                return min(max(q, signed ? -128 : 0), signed ? 127 : 255)
            }
            #expect(bytes.map { signed ? Int(Int8(bitPattern: $0)) : Int($0) } == expected, "count \(count)")
            var back = [Float](repeating: 0, count: count)
            bytes.withUnsafeBytes { dequantizeRun($0.baseAddress!, count: count, scale: 0.25, zero: signed ? -7 : 100, signed: signed, into: &back) }
            #expect(back == expected.map { (Float($0) - (signed ? -7 : 100)) * 0.25 }, "count \(count)")
        }
    }
}

/// The AVX2 bodies of quantize_linear.c against their portable twins, bit for bit, on values that reach every branch:
/// ties, both saturation bounds, infinities, NaN, and counts that leave every tail length.
@Suite(.serialized) struct QuantizeLinearKernelTests {
    /// Runs `body` with the AVX2 bodies, then with the portable ones.
    private func both<T: Equatable>(_ body: () -> T) -> (fast: T, portable: T) {
        let fast = body()
        osprey_qkernels_force_portable(1)
        defer { osprey_qkernels_force_portable(0) }
        return (fast, body())
    }

    private func awkward(_ count: Int, _ rng: inout SeededGenerator) -> [Float] {
        let special: [Float] = [.nan, .infinity, -.infinity, 0.5, 1.5, 2.5, -0.5, -2.5, 1e30, -1e30, 0, -0.0]
        return (0..<count).map { i in i % 7 == 3 ? special[(i / 7) % special.count] : (Float.random(in: -1...1, using: &rng) * 200).rounded() / 4 }
    }

    @Test(arguments: [false, true]) func quantizeRequantizeAndDequantizeMatchTheirPortableBodies(_ signed: Bool) {
        var rng = SeededGenerator(seed: 48)
        let zero: Float = signed ? -7 : 100
        for count in [0, 1, 15, 16, 31, 32, 33, 63, 100, 257] {
            let x = awkward(count, &rng)
            let q = both { () -> [UInt8] in
                var out = [UInt8](repeating: 0, count: count)
                osprey_quantize_f32(x, count, 0.25, zero, signed ? 1 : 0, &out)
                return out
            }
            #expect(q.fast == q.portable, "quantize count \(count)")
            // The scalar definition: NaN to 0, else round half to even of x / scale plus zero, saturated.
            let expected = x.map { v -> UInt8 in
                guard !v.isNaN else { return 0 }
                let r = Swift.min(Swift.max((v / 0.25).rounded(.toNearestOrEven) + zero, signed ? -128 : 0), signed ? 127 : 255)
                return signed ? UInt8(bitPattern: Int8(r)) : UInt8(r)
            }
            #expect(q.fast == expected, "quantize vs definition, count \(count)")
            let sums = (0..<count).map { i in i % 5 == 0 ? [Int32.max, Int32.min, 0, 77, -77][(i / 5) % 5] : Int32.random(in: -90_000...90_000, using: &rng) }
            let r = both { () -> [UInt8] in
                var out = [UInt8](repeating: 0, count: count)
                osprey_requantize_i32(sums, count, 0.0031, zero, signed ? 1 : 0, &out)
                return out
            }
            #expect(r.fast == r.portable, "requantize count \(count)")
            let d = both { () -> [Float] in
                var out = [Float](repeating: 0, count: count)
                osprey_dequantize_u8(q.fast, count, 0.37, zero, signed ? 1 : 0, &out)
                return out
            }
            #expect(d.fast == d.portable, "dequantize count \(count)")
            #expect(d.fast == q.fast.map { ((signed ? Float(Int8(bitPattern: $0)) : Float($0)) - zero) * 0.37 }, "dequantize vs definition")
            let range = both { () -> [Float] in
                var low: Float = 1, high: Float = -1
                osprey_range_with_zero_f32(x, count, &low, &high)
                return [low, high]
            }
            let finite = x.filter { !$0.isNaN }
            #expect(range.fast == range.portable && range.fast == [Swift.min(0, finite.min() ?? 0), Swift.max(0, finite.max() ?? 0)], "range count \(count)")
        }
    }
}
