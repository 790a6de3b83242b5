/// ONNX's wire packing of 4-bit and 2-bit elements, several per byte with the first element in the lowest bits.
public enum SubBytePacking {
    /// Unpacks `count` elements of `bits` bits from `packed` into one byte each (sign-extended when `signed`).
    public static func unpack(_ packed: UnsafeRawBufferPointer, count: Int, bits: Int, signed: Bool, into out: UnsafeMutableRawBufferPointer) {
        let perByte = 8 / bits
        for i in 0..<count { out[i] = lowBits(packed[i / perByte] >> UInt8((i % perByte) * bits), bits: bits, signed: signed) }
    }

    /// The low `bits` bits of `value` as one element's byte: sign-extended when `signed` (Cast's narrowing to int4/int2
    /// keeps them the same way: -9 becomes int4 7).
    @inline(__always)
    public static func lowBits(_ value: UInt8, bits: Int, signed: Bool) -> UInt8 {
        let mask = UInt8((1 << bits) - 1), low = value & mask
        return signed && low & UInt8(1 << (bits - 1)) != 0 ? low | ~mask : low
    }

    /// Bytes needed for `count` packed elements of `bits` bits.
    public static func packedByteCount(_ count: Int, bits: Int) -> Int { (count * bits + 7) / 8 }
}
