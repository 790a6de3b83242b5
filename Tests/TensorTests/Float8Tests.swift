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

    @Test func fourBitUnpacking() {
        let packed: [UInt8] = [0x87, 0x0F]
        var signed = [UInt8](repeating: 0, count: 3), unsigned = [UInt8](repeating: 0, count: 3)
        packed.withUnsafeBytes { src in
            signed.withUnsafeMutableBytes { FourBitPacking.unpack(src, count: 3, signed: true, into: $0) }
            unsigned.withUnsafeMutableBytes { FourBitPacking.unpack(src, count: 3, signed: false, into: $0) }
        }
        #expect(signed.map { Int8(bitPattern: $0) } == [7, -8, -1])
        #expect(unsigned == [7, 8, 15])
        #expect(FourBitPacking.packedByteCount(5) == 3)
    }
}
