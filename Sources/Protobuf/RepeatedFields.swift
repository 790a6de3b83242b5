import Infrastructure

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
        try collectVarints(fields, name) { Int64(bitPattern: $0) }
    }

    /// All float values (repeated float fields such as `floats`).
    public static func floats(_ fields: [WireField], _ name: String) throws -> [Float] {
        try collectFixed(fields, name)
    }

    /// All varint values as raw 64-bit patterns (callers truncate for int32/uint32/bool fields).
    public static func varints(_ fields: [WireField], _ name: String) throws -> [UInt64] {
        try collectVarints(fields, name) { $0 }
    }

    /// All double values (repeated double fields).
    public static func doubles(_ fields: [WireField], _ name: String) throws -> [Double] {
        try collectFixed(fields, name)
    }

    /// Every varint of the fields, packed or not, converted by `convert`.
    @inline(__always)
    private static func collectVarints<T>(_ fields: [WireField], _ name: String, _ convert: (UInt64) -> T) throws -> [T] {
        var values: [T] = []
        values.reserveCapacity(try varintCount(fields, name))
        try forEachVarint(fields, name) { values.append(convert($0)) }
        return values
    }

    /// Every fixed-width little-endian value of the fields (T is Float or Double: 4 or 8 bytes each).
    @inline(__always)
    private static func collectFixed<T: BinaryFloatingPoint>(_ fields: [WireField], _ name: String) throws -> [T] {
        let width = MemoryLayout<T>.size
        let count = try fixedCount(fields, width: width, name)
        return [T](unsafeUninitializedCapacity: count) { buffer, initialized in
            copyFixed(fields, width: width, into: UnsafeMutableRawBufferPointer(buffer))
            initialized = count
        }
    }
}
