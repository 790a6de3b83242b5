/// Builds compact JSON text into a byte array, inserting commas itself.
///
/// Non-finite floats are not JSON: they are written as `null` (numpy reads `null` back as NaN for float
/// dtypes); clients that need exact NaN/Inf should ask for binary outputs.
public struct JSONWriter: Sendable {
    /// The text written so far.
    public private(set) var bytes: [UInt8]
    /// True when the next value or key must be preceded by a comma.
    private var needsComma = false

    /// An empty writer with room for `capacity` bytes.
    public init(capacity: Int = 256) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    @inline(__always)
    private mutating func separate() {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
        needsComma = true
    }

    /// Writes an opening bracket as the next value; its first member needs no comma.
    @inline(__always)
    private mutating func open(_ bracket: UInt8) {
        separate()
        bytes.append(bracket)
        needsComma = false
    }

    /// Writes a closing bracket; what follows the container needs a comma.
    @inline(__always)
    private mutating func close(_ bracket: UInt8) {
        bytes.append(bracket)
        needsComma = true
    }

    /// Writes `{`.
    public mutating func beginObject() { open(UInt8(ascii: "{")) }

    /// Writes `}`.
    public mutating func endObject() { close(UInt8(ascii: "}")) }

    /// Writes `[`.
    public mutating func beginArray() { open(UInt8(ascii: "[")) }

    /// Writes `]`.
    public mutating func endArray() { close(UInt8(ascii: "]")) }

    /// Writes `"key":`; the next call writes its value.
    public mutating func key(_ key: String) {
        string(key)
        bytes.append(UInt8(ascii: ":"))
        needsComma = false
    }

    /// Writes a string with JSON escapes.
    public mutating func string(_ text: String) {
        separate()
        var text = text
        text.withUTF8 { appendEscaped($0) }
    }

    /// Writes raw bytes as a JSON string; invalid UTF-8 sequences become U+FFFD.
    public mutating func string(bytes raw: [UInt8]) {
        if String(validating: raw, as: UTF8.self) != nil {
            separate()
            raw.withUnsafeBufferPointer { appendEscaped($0) }
        } else {
            string(String(decoding: raw, as: UTF8.self))
        }
    }

    private mutating func appendEscaped(_ utf8: UnsafeBufferPointer<UInt8>) {
        bytes.append(UInt8(ascii: "\""))
        var runStart = 0
        for i in 0..<utf8.count {
            let b = utf8[i]
            guard b < 0x20 || b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") else { continue }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<i]))
            runStart = i + 1
            bytes.append(UInt8(ascii: "\\"))
            switch b {
            case UInt8(ascii: "\""): bytes.append(UInt8(ascii: "\""))
            case UInt8(ascii: "\\"): bytes.append(UInt8(ascii: "\\"))
            case 0x0A: bytes.append(UInt8(ascii: "n"))
            case 0x0D: bytes.append(UInt8(ascii: "r"))
            case 0x09: bytes.append(UInt8(ascii: "t"))
            case 0x08: bytes.append(UInt8(ascii: "b"))
            case 0x0C: bytes.append(UInt8(ascii: "f"))
            default:
                let hex: [UInt8] = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hex[Int(b >> 4)], hex[Int(b & 15)]])
            }
        }
        bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...]))
        bytes.append(UInt8(ascii: "\""))
    }

    /// Writes an integer.
    public mutating func int<T: BinaryInteger>(_ value: T) {
        separate()
        appendInteger(value)
    }

    @inline(__always)
    private mutating func appendInteger<T: BinaryInteger>(_ value: T) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        var magnitude = UInt64(value.magnitude)
        if magnitude < 10 {
            bytes.append(UInt8(ascii: "0") + UInt8(magnitude))
            return
        }
        // Digits land backwards in a small stack buffer, then append once.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var i = 20
            while magnitude > 0 {
                i -= 1
                digits[i] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: digits[i..<20]))
        }
    }

    /// Writes the shortest text that reads back as the same Double (`null` when not finite).
    public mutating func double(_ value: Double) { floatingPoint(value, integralBelow: 1e15) }

    /// Writes the shortest text that reads back as the same Float (`null` when not finite).
    public mutating func float(_ value: Float) { floatingPoint(value, integralBelow: 1e7) }

    /// `value`'s shortest round-trip text, or `null` when not finite; integral values below `limit` (where the type
    /// is still exact) as plain integers, without Swift's `.0`.
    @inline(__always)
    private mutating func floatingPoint<F: BinaryFloatingPoint & CustomStringConvertible>(_ value: F, integralBelow limit: F) {
        separate()
        guard value.isFinite else { bytes.append(contentsOf: nullText); return }
        if value == value.rounded(.towardZero) && abs(value) < limit && !(value == 0 && value.sign == .minus) {
            appendInteger(Int64(value))
            return
        }
        var text = value.description
        text.withUTF8 { bytes.append(contentsOf: $0) }
    }

    /// Writes `true` or `false`.
    public mutating func bool(_ value: Bool) {
        separate()
        bytes.append(contentsOf: value ? Array("true".utf8) : Array("false".utf8))
    }

    /// Writes `null`.
    public mutating func null() {
        separate()
        bytes.append(contentsOf: nullText)
    }

    /// Writes a whole value tree.
    public mutating func value(_ value: JSONValue) {
        switch value {
        case .null: null()
        case .bool(let b): bool(b)
        case .integer(let i): int(i)
        case .double(let d): double(d)
        case .string(let s): string(s)
        case .array(let items):
            beginArray()
            for item in items { self.value(item) }
            endArray()
        case .object(let object):
            beginObject()
            for member in object {
                key(member.key)
                self.value(member.value)
            }
            endObject()
        }
    }
}

private let nullText: [UInt8] = Array("null".utf8)
