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
