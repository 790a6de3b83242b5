extension JSONReader {
    /// Reads a string value (the reader must be at its opening quote), resolving escapes and checking UTF-8.
    mutating func readString() throws -> String {
        let bytes = try readStringBytes()
        return try makeString(bytes)
    }

    /// Reads a string as raw UTF-8 bytes (for BYTES tensor elements).
    mutating func readStringBytes() throws -> [UInt8] {
        let open = index
        try expect(UInt8(ascii: "\""), "a string")
        // Fast path: no escapes, copy the span once.
        var i = index
        while i < bytes.count {
            let b = bytes[i]
            if b == UInt8(ascii: "\"") {
                let out = Array(UnsafeBufferPointer(rebasing: bytes[index..<i]))
                index = i + 1
                return out
            }
            if b == UInt8(ascii: "\\") || b < 0x20 { break }
            i += 1
        }
        guard i < bytes.count else { throw JSONError(.unexpectedEnd, at: bytes.count, "unterminated string starting at byte \(open)") }
        var out = Array(UnsafeBufferPointer(rebasing: bytes[index..<i]))
        index = i
        while index < bytes.count {
            let b = bytes[index]
            switch b {
            case UInt8(ascii: "\""):
                index += 1
                return out
            case UInt8(ascii: "\\"):
                try readEscape(into: &out)
            case 0..<0x20:
                throw JSONError(.invalidString, at: index, "unescaped control character 0x\(String(b, radix: 16)) in string")
            default:
                out.append(b)
                index += 1
            }
        }
        throw JSONError(.unexpectedEnd, at: bytes.count, "unterminated string starting at byte \(open)")
    }

    /// Skips a string without building it, still validating escapes and control characters.
    mutating func skipString() throws {
        let open = index
        try expect(UInt8(ascii: "\""), "a string")
        var scratch: [UInt8] = []
        while index < bytes.count {
            let b = bytes[index]
            if b == UInt8(ascii: "\"") { index += 1; return }
            if b == UInt8(ascii: "\\") {
                scratch.removeAll(keepingCapacity: true)
                try readEscape(into: &scratch)
            } else if b < 0x20 {
                throw JSONError(.invalidString, at: index, "unescaped control character 0x\(String(b, radix: 16)) in string")
            } else {
                index += 1
            }
        }
        throw JSONError(.unexpectedEnd, at: bytes.count, "unterminated string starting at byte \(open)")
    }

    /// Decodes one escape sequence at `index` (a backslash) and appends its UTF-8.
    private mutating func readEscape(into out: inout [UInt8]) throws {
        let start = index
        guard index + 1 < bytes.count else { throw JSONError(.unexpectedEnd, at: bytes.count, "unterminated escape") }
        let c = bytes[index + 1]
        index += 2
        switch c {
        case UInt8(ascii: "\""): out.append(0x22)
        case UInt8(ascii: "\\"): out.append(0x5C)
        case UInt8(ascii: "/"): out.append(0x2F)
        case UInt8(ascii: "b"): out.append(0x08)
        case UInt8(ascii: "f"): out.append(0x0C)
        case UInt8(ascii: "n"): out.append(0x0A)
        case UInt8(ascii: "r"): out.append(0x0D)
        case UInt8(ascii: "t"): out.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = try readHex4(escapeStart: start)
            if scalar >= 0xD800 && scalar < 0xDC00 {
                // A high surrogate must be followed by an escaped low surrogate.
                guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                    throw JSONError(.invalidString, at: start, "unpaired high surrogate \\u\(String(scalar, radix: 16, uppercase: true))")
                }
                index += 2
                let low = try readHex4(escapeStart: index - 2)
                guard low >= 0xDC00 && low < 0xE000 else {
                    throw JSONError(.invalidString, at: index - 6, "high surrogate followed by \\u\(String(low, radix: 16, uppercase: true)), expected a low surrogate")
                }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if scalar >= 0xDC00 && scalar < 0xE000 {
                throw JSONError(.invalidString, at: start, "unpaired low surrogate \\u\(String(scalar, radix: 16, uppercase: true))")
            }
            appendUTF8(scalar, to: &out)
        default:
            throw JSONError(.invalidString, at: start, "invalid escape \(describe(c))")
        }
    }

    private mutating func readHex4(escapeStart: Int) throws -> UInt32 {
        guard index + 4 <= bytes.count else { throw JSONError(.unexpectedEnd, at: bytes.count, "truncated \\u escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[index]
            let d: UInt8
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): d = c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): d = c - UInt8(ascii: "A") + 10
            default: throw JSONError(.invalidString, at: index, "invalid hex digit \(describe(c)) in \\u escape")
            }
            v = v << 4 | UInt32(d)
            index += 1
        }
        return v
    }

    func makeString(_ utf8: [UInt8]) throws -> String {
        guard let s = String(validating: utf8, as: UTF8.self) else {
            throw JSONError(.invalidString, at: index, "string is not valid UTF-8")
        }
        return s
    }
}

/// Appends the UTF-8 encoding of a scalar value (callers exclude surrogates).
func appendUTF8(_ scalar: UInt32, to out: inout [UInt8]) {
    switch scalar {
    case 0..<0x80:
        out.append(UInt8(scalar))
    case 0x80..<0x800:
        out.append(UInt8(0xC0 | (scalar >> 6)))
        out.append(UInt8(0x80 | (scalar & 0x3F)))
    case 0x800..<0x10000:
        out.append(UInt8(0xE0 | (scalar >> 12)))
        out.append(UInt8(0x80 | ((scalar >> 6) & 0x3F)))
        out.append(UInt8(0x80 | (scalar & 0x3F)))
    default:
        out.append(UInt8(0xF0 | (scalar >> 18)))
        out.append(UInt8(0x80 | ((scalar >> 12) & 0x3F)))
        out.append(UInt8(0x80 | ((scalar >> 6) & 0x3F)))
        out.append(UInt8(0x80 | (scalar & 0x3F)))
    }
}
