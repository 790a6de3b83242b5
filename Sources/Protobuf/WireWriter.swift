/// Appends protobuf fields to a growing byte array, in the order the caller writes them.
///
/// proto3 semantics: scalar fields equal to their default are omitted, as protobuf's own encoders do,
/// unless the caller writes them through the `always` variants (e.g. oneof members, which must be present).
public struct WireWriter: Sendable {
    /// The encoded bytes so far.
    public private(set) var bytes: [UInt8]

    /// An empty writer, reserving `capacity` bytes.
    public init(capacity: Int = 0) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    /// Appends a base-128 varint.
    public mutating func appendVarint(_ value: UInt64) {
        var rest = value
        while rest >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: rest) | 0x80)
            rest >>= 7
        }
        bytes.append(UInt8(rest))
    }

    /// Appends a field key.
    public mutating func appendKey(_ number: Int, _ type: WireType) {
        appendVarint(UInt64(number) << 3 | UInt64(type.rawValue))
    }

    /// A varint field, omitted when zero.
    public mutating func uint64(_ number: Int, _ value: UInt64) {
        guard value != 0 else { return }
        uint64Always(number, value)
    }

    /// A varint field, written even when zero.
    public mutating func uint64Always(_ number: Int, _ value: UInt64) {
        appendKey(number, .varint)
        appendVarint(value)
    }

    /// An int64 field (two's complement, ten bytes when negative), omitted when zero.
    public mutating func int64(_ number: Int, _ value: Int64) { uint64(number, UInt64(bitPattern: value)) }

    /// An int32 field: negative values are sign-extended to 64 bits, as protobuf requires.
    public mutating func int32(_ number: Int, _ value: Int32) { int64(number, Int64(value)) }

    /// A bool field, omitted when false.
    public mutating func bool(_ number: Int, _ value: Bool) { uint64(number, value ? 1 : 0) }

    /// A bool field, written even when false.
    public mutating func boolAlways(_ number: Int, _ value: Bool) { uint64Always(number, value ? 1 : 0) }

    /// A double field (fixed64), written even when zero.
    public mutating func doubleAlways(_ number: Int, _ value: Double) {
        appendKey(number, .fixed64)
        appendLittleEndian(value.bitPattern)
    }

    /// A float field (fixed32), omitted when zero.
    public mutating func float(_ number: Int, _ value: Float) {
        guard value.bitPattern != 0 else { return }
        appendKey(number, .fixed32)
        appendLittleEndian(value.bitPattern)
    }

    /// A string field, omitted when empty.
    public mutating func string(_ number: Int, _ value: String) {
        guard !value.isEmpty else { return }
        stringAlways(number, value)
    }

    /// A string field, written even when empty (repeated strings and oneof members).
    public mutating func stringAlways(_ number: Int, _ value: String) {
        var copy = value
        copy.withUTF8 { bytesAlways(number, UnsafeRawBufferPointer($0)) }
    }

    /// A bytes field, written even when empty.
    public mutating func bytesAlways(_ number: Int, _ value: UnsafeRawBufferPointer) {
        appendKey(number, .lengthDelimited)
        appendVarint(UInt64(value.count))
        bytes.append(contentsOf: value)
    }

    /// A bytes field, written even when empty.
    public mutating func bytesAlways(_ number: Int, _ value: [UInt8]) {
        value.withUnsafeBytes { bytesAlways(number, $0) }
    }

    /// A nested message, written even when it encodes to nothing (its presence can matter).
    public mutating func message(_ number: Int, _ build: (inout WireWriter) -> Void) {
        var inner = WireWriter()
        build(&inner)
        bytesAlways(number, inner.bytes)
    }

    /// A packed repeated varint field (int64, uint64, int32 sign-extended, bool), omitted when empty.
    public mutating func packedVarints<S: Collection>(_ number: Int, _ values: S) where S.Element == UInt64 {
        guard !values.isEmpty else { return }
        var inner = WireWriter(capacity: values.count)
        for value in values { inner.appendVarint(value) }
        bytesAlways(number, inner.bytes)
    }

    /// A packed repeated int64 field, omitted when empty.
    public mutating func packedInt64s(_ number: Int, _ values: [Int64]) {
        packedVarints(number, values.lazy.map { UInt64(bitPattern: $0) })
    }

    /// A packed repeated fixed-width field from raw little-endian bytes (floats, doubles), omitted when empty.
    public mutating func packedFixed(_ number: Int, _ raw: UnsafeRawBufferPointer) {
        guard raw.count > 0 else { return }
        bytesAlways(number, raw)
    }

    private mutating func appendLittleEndian<T: FixedWidthInteger>(_ value: T) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }
}
