/// Packed and unpacked repeated scalar fields: protobuf writers may use either form, even mixed.
public enum RepeatedFields {
    /// Number of values in varint fields (each packed payload counts its terminating bytes).
    public static func varintCount(_ fields: [WireField], _ name: String) throws -> Int {
        var count = 0
        for field in fields {
            switch field.wireType {
            case .varint: count += 1
            case .lengthDelimited:
                for byte in field.bytes where byte & 0x80 == 0 { count += 1 }
                if let last = field.bytes.last, last & 0x80 != 0 {
                    throw ProtobufError(.truncated, "packed field '\(name)' ends inside a varint")
                }
            default:
                throw ProtobufError(.malformed, "field '\(name)' has wire type \(field.wireType.rawValue), expected varints")
            }
        }
        return count
    }

    /// Calls `body` with each varint value in order; `varintCount` must have validated the fields.
    public static func forEachVarint(_ fields: [WireField], _ name: String, _ body: (UInt64) -> Void) throws {
        for field in fields {
            if field.wireType == .varint { body(field.scalar); continue }
            var reader = WireReader(field.bytes)
            while !reader.isAtEnd { body(try reader.readVarint("packed field '\(name)'")) }
        }
    }

    /// Number of fixed-width values (`width` bytes each) in the fields.
    public static func fixedCount(_ fields: [WireField], width: Int, _ name: String) throws -> Int {
        let single: WireType = width == 4 ? .fixed32 : .fixed64
        var count = 0
        for field in fields {
            if field.wireType == single { count += 1; continue }
            guard field.wireType == .lengthDelimited else {
                throw ProtobufError(.malformed, "field '\(name)' has wire type \(field.wireType.rawValue), expected \(width * 8)-bit values")
            }
            guard field.bytes.count % width == 0 else {
                throw ProtobufError(.malformed, "packed field '\(name)' has \(field.bytes.count) bytes, not a multiple of \(width)")
            }
            count += field.bytes.count / width
        }
        return count
    }

    /// Copies fixed-width little-endian values into `destination` (which holds exactly their bytes).
    public static func copyFixed(_ fields: [WireField], width: Int, into destination: UnsafeMutableRawBufferPointer) {
        var offset = 0
        for field in fields {
            if field.wireType == .lengthDelimited {
                if field.bytes.count > 0 {
                    (destination.baseAddress! + offset).copyMemory(from: field.bytes.baseAddress!, byteCount: field.bytes.count)
                }
                offset += field.bytes.count
            } else {
                withUnsafeBytes(of: field.scalar.littleEndian) { value in
                    (destination.baseAddress! + offset).copyMemory(from: value.baseAddress!, byteCount: width)
                }
                offset += width
            }
        }
    }

    /// All int64 values (repeated int64 fields such as `dims` and `ints`).
    public static func int64s(_ fields: [WireField], _ name: String) throws -> [Int64] {
        var values: [Int64] = []
        values.reserveCapacity(try varintCount(fields, name))
        try forEachVarint(fields, name) { values.append(Int64(bitPattern: $0)) }
        return values
    }

    /// All float values (repeated float fields such as `floats`).
    public static func floats(_ fields: [WireField], _ name: String) throws -> [Float] {
        let count = try fixedCount(fields, width: 4, name)
        return [Float](unsafeUninitializedCapacity: count) { buffer, initialized in
            copyFixed(fields, width: 4, into: UnsafeMutableRawBufferPointer(buffer))
            initialized = count
        }
    }

    /// All varint values as raw 64-bit patterns (callers truncate for int32/uint32/bool fields).
    public static func varints(_ fields: [WireField], _ name: String) throws -> [UInt64] {
        var values: [UInt64] = []
        values.reserveCapacity(try varintCount(fields, name))
        try forEachVarint(fields, name) { values.append($0) }
        return values
    }

    /// All double values (repeated double fields).
    public static func doubles(_ fields: [WireField], _ name: String) throws -> [Double] {
        let count = try fixedCount(fields, width: 8, name)
        return [Double](unsafeUninitializedCapacity: count) { buffer, initialized in
            copyFixed(fields, width: 8, into: UnsafeMutableRawBufferPointer(buffer))
            initialized = count
        }
    }
}
