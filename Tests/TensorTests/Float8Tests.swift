import Testing
@testable import Tensor

/// The 8-bit float formats and 4-bit unpacking, against values the ONNX spec tabulates.
@Suite struct Float8Tests {
    static let formats: [DType] = [.float8e4m3fn, .float8e4m3fnuz, .float8e5m2, .float8e5m2fnuz]

    /// Every non-NaN bit pattern decodes to a float that encodes back to the same pattern.
    @Test(arguments: formats) func everyCodeRoundTrips(_ dtype: DType) throws {
        let format = try #require(Float8Format(dtype))
        for code in 0...255 {
            let value = format.decode(UInt8(code))
            if value.isNaN { continue }
            #expect(format.encode(value, saturate: false) == UInt8(code), "\(dtype) code \(code) = \(value)")
        }
    }

    @Test func largestFiniteValues() {
        #expect(Float8Format(.float8e4m3fn)!.decode(0x7E) == 448)
        #expect(Float8Format(.float8e4m3fnuz)!.decode(0x7F) == 240)
        #expect(Float8Format(.float8e5m2)!.decode(0x7B) == 57344)
        #expect(Float8Format(.float8e5m2fnuz)!.decode(0x7F) == 57344)
        #expect(Float8Format(.float8e5m2)!.decode(0x7C) == .infinity)
    }

    /// Saturation clamps to the largest finite value; without it E5M2 overflows to infinity and the others to NaN.
    @Test func saturation() {
        let fn = Float8Format(.float8e4m3fn)!, e5 = Float8Format(.float8e5m2)!, uz = Float8Format(.float8e4m3fnuz)!
        #expect(fn.encode(1e6, saturate: true) == 0x7E)
        #expect(fn.encode(-.infinity, saturate: true) == 0xFE)
        #expect(fn.decode(fn.encode(1e6, saturate: false)).isNaN)
        #expect(e5.encode(1e6, saturate: false) == 0x7C)
        #expect(uz.encode(-1e-9, saturate: true) == 0, "no negative zero in the UZ formats")
        #expect(fn.encode(-1e-9, saturate: true) == 0x80)
        // 464 is halfway between 448 (even mantissa) and 480: ties to even stay finite.
        #expect(fn.encode(464, saturate: false) == 0x7E)
        #expect(fn.encode(0.48033666, saturate: true) == 0x2F, "0.46875, as the ONNX Cast case expects")
    }

    /// `count` elements of `bits` bits unpacked from `packed`, read as signed and as unsigned.
    private static func unpacked(_ packed: [UInt8], count: Int, bits: Int) -> (signed: [Int8], unsigned: [UInt8]) {
        var signed = [UInt8](repeating: 0, count: count), unsigned = [UInt8](repeating: 0, count: count)
        packed.withUnsafeBytes { src in
            signed.withUnsafeMutableBytes { SubBytePacking.unpack(src, count: count, bits: bits, signed: true, into: $0) }
            unsigned.withUnsafeMutableBytes { SubBytePacking.unpack(src, count: count, bits: bits, signed: false, into: $0) }
        }
        return (signed.map { Int8(bitPattern: $0) }, unsigned)
    }

    @Test func fourBitUnpacking() {
        let (signed, unsigned) = Self.unpacked([0x87, 0x0F], count: 3, bits: 4)
        #expect(signed == [7, -8, -1])
        #expect(unsigned == [7, 8, 15])
        #expect(SubBytePacking.packedByteCount(5, bits: 4) == 3)
    }

    @Test func twoBitUnpacking() {
        // 0b11_10_01_00 then 0b00_00_00_10: elements 0, 1, 2, 3, 2 (first element in the lowest bits).
        let (signed, unsigned) = Self.unpacked([0xE4, 0x02], count: 5, bits: 2)
        #expect(unsigned == [0, 1, 2, 3, 2])
        #expect(signed == [0, 1, -2, -1, -2])
        #expect(SubBytePacking.packedByteCount(5, bits: 2) == 2)
    }

    /// Every float4 code decodes to its value and encodes back; ties go to the even code, beyond 6 saturates, as
    /// ml_dtypes (ONNX's reference) converts.
    @Test func float4E2M1RoundTripsAndRoundsToEven() {
        for code in UInt8(0)..<16 where code != 0x8 { #expect(Float4E2M1.encode(Float4E2M1.decode(code)) == code) }
        let cases: [(Float, Float)] = [(0.25, 0), (0.75, 1), (1.25, 1), (1.75, 2), (2.5, 2), (3.5, 4), (5, 4), (7, 6),
                                       (-9, -6), (.infinity, 6), (-3.5, -4), (1e-7, 0)]
        for (value, expected) in cases { #expect(Float4E2M1.decode(Float4E2M1.encode(value)) == expected, "\(value)") }
        #expect(Float4E2M1.encode(.nan) == 0x8)
    }

    /// E8M0 keeps the float32 exponent, rounded up, down or to nearest; 0xFF is NaN; saturation stops at 2^127.
    @Test func float8E8M0Rounding() {
        #expect(Float8E8M0.decode(127) == 1 && Float8E8M0.decode(0) == Float(sign: .plus, exponent: -127, significand: 1))
        #expect(Float8E8M0.decode(0xFF).isNaN)
        #expect(Float8E8M0.encode(1.1, saturate: true, rounding: .up) == 128)
        #expect(Float8E8M0.encode(1.1, saturate: true, rounding: .down) == 127)
        #expect(Float8E8M0.encode(1.1, saturate: true, rounding: .nearest) == 127)
        #expect(Float8E8M0.encode(1.6, saturate: true, rounding: .nearest) == 128)
        #expect(Float8E8M0.encode(0.124, saturate: true, rounding: .up) == 124)
        #expect(Float8E8M0.encode(-4, saturate: true, rounding: .up) == 129)
        #expect(Float8E8M0.encode(.greatestFiniteMagnitude, saturate: true, rounding: .up) == 0xFE)
        #expect(Float8E8M0.encode(.greatestFiniteMagnitude, saturate: false, rounding: .up) == 0xFF)
        #expect(Float8E8M0.encode(.infinity, saturate: true, rounding: .up) == 0xFF)
    }
}
