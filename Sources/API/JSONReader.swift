/// A recursive-descent JSON pull reader over borrowed bytes.
///
/// Valid only inside the `withUnsafeBufferPointer` call that produced its buffer. Callers either build
/// `JSONValue`s or pull tokens themselves (the V2 codec streams tensor data straight into tensors).
struct JSONReader {
    let bytes: UnsafeBufferPointer<UInt8>
    /// Offset of the next unread byte.
    var index: Int
    let maxDepth: Int
    var depth = 0

    init(_ bytes: UnsafeBufferPointer<UInt8>, startingAt index: Int = 0, maxDepth: Int = 64) {
        self.bytes = bytes
        self.index = index
        self.maxDepth = maxDepth
    }

    var isAtEnd: Bool { index >= bytes.count }

    // MARK: Whitespace and punctuation

    @inline(__always)
    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x0A, 0x0D, 0x09: index += 1
            default: return
            }
        }
    }

    /// The next non-whitespace byte without consuming it.
    @inline(__always)
    mutating func peek() throws -> UInt8 {
        skipWhitespace()
        guard index < bytes.count else { throw JSONError(.unexpectedEnd, at: index, "unexpected end of JSON") }
        return bytes[index]
    }

    /// Consumes `byte` (after whitespace) or throws naming what was expected.
    @inline(__always)
    mutating func expect(_ byte: UInt8, _ what: @autoclosure () -> String) throws {
        let b = try peek()
        guard b == byte else { throw unexpected(b, expected: what()) }
        index += 1
    }

    /// Fails unless only whitespace remains.
    mutating func expectEnd() throws {
        skipWhitespace()
        if index < bytes.count {
            throw JSONError(.trailingData, at: index, "unexpected \(describe(bytes[index])) after the JSON value")
        }
    }

    func unexpected(_ byte: UInt8, expected: String) -> JSONError {
        JSONError(.unexpectedCharacter, at: index, "expected \(expected), got \(describe(byte))")
    }

    func describe(_ byte: UInt8) -> String {
        if byte >= 0x21 && byte < 0x7F { return "'\(Character(Unicode.Scalar(byte)))'" }
        return "byte 0x\(String(byte, radix: 16))"
    }

    mutating func enterContainer() throws {
        depth += 1
        if depth > maxDepth { throw JSONError(.tooDeep, at: index, "nesting deeper than \(maxDepth) levels") }
    }

    // MARK: Containers (pull style)

    /// Consumes `{`; then call `nextKey()` until it returns nil.
    mutating func beginObject(_ what: @autoclosure () -> String = "an object") throws {
        try expect(UInt8(ascii: "{"), what())
        try enterContainer()
        pendingFirst = true
    }

    /// Set right after `[`/`{` so the first member needs no comma.
    var pendingFirst = false

    /// When `b` (just peeked) is `close`, consumes it and leaves the container.
    private mutating func closes(_ b: UInt8, _ close: UInt8) -> Bool {
        guard b == close else { return false }
        index += 1
        depth -= 1
        pendingFirst = false
        return true
    }

    /// The next member key of the current object (consuming the `:`), or nil at `}`.
    mutating func nextKey() throws -> String? {
        var b = try peek()
        if closes(b, UInt8(ascii: "}")) { return nil }
        if !pendingFirst {
            guard b == UInt8(ascii: ",") else { throw unexpected(b, expected: "',' or '}'") }
            index += 1
            b = try peek()
        }
        pendingFirst = false
        guard b == UInt8(ascii: "\"") else { throw unexpected(b, expected: "a string key") }
        let key = try readString()
        try expect(UInt8(ascii: ":"), "':' after key")
        return key
    }

    /// Consumes `[`; then call `nextElement()` before each element until it returns false.
    mutating func beginArray(_ what: @autoclosure () -> String = "an array") throws {
        try expect(UInt8(ascii: "["), what())
        try enterContainer()
        pendingFirst = true
    }

    /// True when another element follows (comma consumed); false after consuming `]`.
    mutating func nextElement() throws -> Bool {
        let b = try peek()
        if closes(b, UInt8(ascii: "]")) { return false }
        if pendingFirst {
            pendingFirst = false
            return true
        }
        guard b == UInt8(ascii: ",") else { throw unexpected(b, expected: "',' or ']'") }
        index += 1
        _ = try peek()
        return true
    }

    // MARK: Values

    /// Reads any value into a tree.
    mutating func readValue() throws -> JSONValue {
        let b = try peek()
        switch b {
        case UInt8(ascii: "{"):
            try beginObject()
            var object = JSONObject()
            while true {
                let keyOffset = index
                guard let key = try nextKey() else { break }
                if object[key] != nil {
                    throw JSONError(.duplicateKey, at: keyOffset, "duplicate key \"\(key)\"")
                }
                object.appendUnchecked(key, try readValue())
            }
            return .object(object)
        case UInt8(ascii: "["):
            try beginArray()
            var array: [JSONValue] = []
            while try nextElement() { array.append(try readValue()) }
            return .array(array)
        case UInt8(ascii: "\""):
            return .string(try readString())
        case UInt8(ascii: "t"), UInt8(ascii: "f"):
            return .bool(try readBool())
        case UInt8(ascii: "n"):
            try readLiteral("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            let start = index
            let token = try scanNumber()
            if token.isInteger, let v = token.int64Value { return .integer(v) }
            guard let d = token.doubleValue(bytes) else {
                throw JSONError(.invalidNumber, at: start, "number out of range")
            }
            return .double(d)
        default:
            throw unexpected(b, expected: "a JSON value")
        }
    }

    /// Skips one value of any kind, validating it (used for unknown keys).
    mutating func skipValue() throws {
        let b = try peek()
        switch b {
        case UInt8(ascii: "{"):
            try beginObject()
            while try nextKey() != nil { try skipValue() }
        case UInt8(ascii: "["):
            try beginArray()
            while try nextElement() { try skipValue() }
        case UInt8(ascii: "\""):
            try skipString()
        case UInt8(ascii: "t"), UInt8(ascii: "f"):
            _ = try readBool()
        case UInt8(ascii: "n"):
            try readLiteral("null")
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            _ = try scanNumber()
        default:
            throw unexpected(b, expected: "a JSON value")
        }
    }

    mutating func readLiteral(_ word: StaticString) throws {
        let start = index
        let n = word.utf8CodeUnitCount
        guard index + n <= bytes.count else {
            throw JSONError(.unexpectedEnd, at: bytes.count, "unexpected end of JSON inside \(word)")
        }
        let w = word.utf8Start
        for i in 0..<n where bytes[index + i] != w[i] {
            throw JSONError(.unexpectedCharacter, at: start + i, "invalid literal, expected \(word)")
        }
        index += n
    }

    /// Reads `true` or `false`.
    mutating func readBool() throws -> Bool {
        let b = try peek()
        if b == UInt8(ascii: "t") { try readLiteral("true"); return true }
        if b == UInt8(ascii: "f") { try readLiteral("false"); return false }
        throw unexpected(b, expected: "true or false")
    }

    /// True (and consumed) when the next value is `null`.
    mutating func consumeNull() throws -> Bool {
        guard try peek() == UInt8(ascii: "n") else { return false }
        try readLiteral("null")
        return true
    }
}
