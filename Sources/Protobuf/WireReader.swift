import Infrastructure

/// Protobuf wire types (groups, 3 and 4, are obsolete and rejected).
public enum WireType: UInt8 {
    case varint = 0
    case fixed64 = 1
    case lengthDelimited = 2
    case fixed32 = 5
}

/// One field read from a message: its number, wire type and either a scalar or a payload window.
public struct WireField {
    /// Field number (>= 1).
    public let number: Int
    /// How the value was encoded.
    public let wireType: WireType
    /// The varint or fixed value (zero for length-delimited fields).
    public let scalar: UInt64
    /// The payload of a length-delimited field (empty otherwise); points into the reader's buffer.
    public let bytes: UnsafeRawBufferPointer

    /// A field as read off the wire.
    @inlinable public init(number: Int, wireType: WireType, scalar: UInt64, bytes: UnsafeRawBufferPointer) {
        self.number = number
        self.wireType = wireType
        self.scalar = scalar
        self.bytes = bytes
    }

    /// Fails unless the field has the wire type its schema declares.
    public func expect(_ type: WireType, _ name: String) throws {
        guard wireType == type else {
            throw ProtobufError(.malformed, "field '\(name)' (#\(number)) has wire type \(wireType.rawValue), expected \(type.rawValue)")
        }
    }

    /// A varint field as int64 (two's complement, as protobuf encodes negative int32/int64).
    public func int64(_ name: String) throws -> Int64 {
        try expect(.varint, name)
        return Int64(bitPattern: scalar)
    }

    /// A length-delimited field as a string (invalid UTF-8 is repaired, never rejected).
    public func string(_ name: String) throws -> String {
        try expect(.lengthDelimited, name)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A length-delimited field as raw bytes.
    public func byteArray(_ name: String) throws -> [UInt8] {
        try expect(.lengthDelimited, name)
        return Array(bytes)
    }

    /// A nested message: a reader over the payload.
    public func message(_ name: String) throws -> WireReader {
        try expect(.lengthDelimited, name)
        return WireReader(bytes)
    }

    /// A varint field as uint64.
    public func uint64(_ name: String) throws -> UInt64 {
        try expect(.varint, name)
        return scalar
    }

    /// A varint field as int32 (protobuf sign-extends negative int32 to ten bytes; the low 32 bits are the value).
    public func int32(_ name: String) throws -> Int32 {
        try expect(.varint, name)
        return Int32(truncatingIfNeeded: scalar)
    }

    /// A varint field as uint32 (the low 32 bits, as protobuf parsers truncate).
    public func uint32(_ name: String) throws -> UInt32 {
        try expect(.varint, name)
        return UInt32(truncatingIfNeeded: scalar)
    }

    /// A varint field as a bool (any non-zero value is true).
    public func bool(_ name: String) throws -> Bool {
        try expect(.varint, name)
        return scalar != 0
    }

    /// A 64-bit float (fixed64 wire type).
    public func double(_ name: String) throws -> Double {
        try expect(.fixed64, name)
        return Double(bitPattern: scalar)
    }

    /// A 32-bit float (fixed32 wire type).
    public func float(_ name: String) throws -> Float {
        try expect(.fixed32, name)
        return Float(bitPattern: UInt32(truncatingIfNeeded: scalar))
    }
}

/// Reads protobuf fields one at a time from a byte window, checking every length against what remains.
///
/// It never allocates: payloads are windows into the caller's buffer, which must outlive the reader.
public struct WireReader {
    @usableFromInline let base: UnsafeRawBufferPointer
    @usableFromInline var position: Int

    /// A reader over `bytes`.
    @inlinable public init(_ bytes: UnsafeRawBufferPointer) {
        base = bytes
        position = 0
    }

    /// True when every byte has been consumed.
    @inlinable public var isAtEnd: Bool { position >= base.count }

    /// The next field, or nil at the end of the buffer.
    @inlinable public mutating func next() throws -> WireField? {
        guard position < base.count else { return nil }
        let key = try readVarint("field key")
        let number = key >> 3
        guard number >= 1, number <= 0x1FFF_FFFF else {
            throw ProtobufError(.malformed, "invalid field number \(number) at byte \(position)")
        }
        guard let wireType = WireType(rawValue: UInt8(key & 7)) else {
            throw ProtobufError(.malformed, "field #\(number) has unsupported wire type \(key & 7)")
        }
        switch wireType {
        case .varint:
            return WireField(number: Int(number), wireType: wireType, scalar: try readVarint("field #\(number)"), bytes: Self.empty)
        case .fixed64:
            return WireField(number: Int(number), wireType: wireType, scalar: try readFixed(8, number), bytes: Self.empty)
        case .fixed32:
            return WireField(number: Int(number), wireType: wireType, scalar: try readFixed(4, number), bytes: Self.empty)
        case .lengthDelimited:
            let length = try readVarint("length of field #\(number)")
            let remaining = base.count - position
            // Compare as UInt64 before converting: a corrupt length must never overflow or reach past the end.
            guard length <= UInt64(remaining) else {
                throw ProtobufError(.truncated, "field #\(number) declares \(length) bytes but only \(remaining) remain")
            }
            let start = position
            position += Int(length)
            return WireField(number: Int(number), wireType: wireType, scalar: 0,
                             bytes: UnsafeRawBufferPointer(rebasing: base[start..<position]))
        }
    }

    /// A base-128 varint of at most 10 bytes.
    @inlinable public mutating func readVarint(_ what: @autoclosure () -> String) throws -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            guard position < base.count else { throw ProtobufError(.truncated, "input ends inside \(what())") }
            let byte = base[position]
            position += 1
            result |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 { return result }
            shift += 7
            guard shift < 70 else { throw ProtobufError(.malformed, "varint longer than 10 bytes in \(what())") }
        }
    }

    @inlinable mutating func readFixed(_ size: Int, _ number: UInt64) throws -> UInt64 {
        guard base.count - position >= size else {
            throw ProtobufError(.truncated, "input ends inside fixed\(size * 8) field #\(number)")
        }
        var value: UInt64 = 0
        for index in 0..<size { value |= UInt64(base[position + index]) << (8 * UInt64(index)) }
        position += size
        return value
    }

    @usableFromInline static var empty: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: nil, count: 0) }
}
