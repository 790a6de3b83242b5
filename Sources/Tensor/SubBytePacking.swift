/// ONNX's wire packing of 4-bit and 2-bit elements, several per byte with the first element in the lowest bits.
public enum SubBytePacking {
    /// Unpacks `count` elements of `bits` bits from `packed` into one byte each (sign-extended when `signed`).
    public static func unpack(_ packed: UnsafeRawBufferPointer, count: Int, bits: Int, signed: Bool, into out: UnsafeMutableRawBufferPointer) {
        let perByte = 8 / bits, mask = UInt8((1 << bits) - 1), signBit = UInt8(1 << (bits - 1))
        for i in 0..<count {
            let value = (packed[i / perByte] >> UInt8((i % perByte) * bits)) & mask
            out[i] = signed && value & signBit != 0 ? value | ~mask : value
        }
    }

    /// Bytes needed for `count` packed elements of `bits` bits.
    public static func packedByteCount(_ count: Int, bits: Int) -> Int { (count * bits + 7) / 8 }
}
