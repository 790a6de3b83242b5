/// A header value of the form `token; name=value; name="quoted value"` (Content-Type, Content-Disposition).
public struct HeaderValueWithParameters: Sendable, Equatable {
    /// The part before the first `;`, trimmed (case kept).
    public var value: String
    /// Parameters in order; names lower-cased, quoted values unescaped.
    public var parameters: [(name: String, value: String)]

    /// Parses a header value; throws on an unterminated quoted string or a parameter without `=`.
    public init(parsing text: String) throws {
        let bytes = Array(text.utf8)
        var i = 0
        func skipSpace() { while i < bytes.count && (bytes[i] == 0x20 || bytes[i] == 0x09) { i += 1 } }
        skipSpace()
        let start = i
        while i < bytes.count && bytes[i] != UInt8(ascii: ";") { i += 1 }
        value = String(decoding: bytes[start..<i], as: UTF8.self).trimmingASCIIWhitespace()
        parameters = []
        while i < bytes.count {
            i += 1  // the ';'
            skipSpace()
            if i >= bytes.count { break }
            if bytes[i] == UInt8(ascii: ";") { continue }
            let nameStart = i
            while i < bytes.count && bytes[i] != UInt8(ascii: "=") && bytes[i] != UInt8(ascii: ";") { i += 1 }
            let name = String(decoding: bytes[nameStart..<i], as: UTF8.self).trimmingASCIIWhitespace().lowercased()
            guard i < bytes.count, bytes[i] == UInt8(ascii: "=") else {
                throw HeaderParameterError(message: "parameter '\(name)' has no value in '\(text)'")
            }
            i += 1
            skipSpace()
            var parsed: [UInt8] = []
            if i < bytes.count && bytes[i] == UInt8(ascii: "\"") {
                i += 1
                var closed = false
                while i < bytes.count {
                    let b = bytes[i]
                    if b == UInt8(ascii: "\\") && i + 1 < bytes.count {
                        parsed.append(bytes[i + 1])
                        i += 2
                    } else if b == UInt8(ascii: "\"") {
                        i += 1
                        closed = true
                        break
                    } else {
                        parsed.append(b)
                        i += 1
                    }
                }
                guard closed else { throw HeaderParameterError(message: "unterminated quoted value for '\(name)' in '\(text)'") }
                skipSpace()
                guard i >= bytes.count || bytes[i] == UInt8(ascii: ";") else {
                    throw HeaderParameterError(message: "unexpected text after the quoted value of '\(name)'")
                }
            } else {
                let valueStart = i
                while i < bytes.count && bytes[i] != UInt8(ascii: ";") { i += 1 }
                parsed = Array(bytes[valueStart..<i])
                while let last = parsed.last, last == 0x20 || last == 0x09 { parsed.removeLast() }
            }
            parameters.append((name: name, value: String(decoding: parsed, as: UTF8.self)))
        }
    }

    /// The first parameter called `name` (case-insensitive).
    public subscript(parameter name: String) -> String? {
        let lower = name.lowercased()
        return parameters.first { $0.name == lower }?.value
    }

    /// Equal value and parameters.
    public static func == (a: HeaderValueWithParameters, b: HeaderValueWithParameters) -> Bool {
        a.value == b.value && a.parameters.map { "\($0.name)=\($0.value)" } == b.parameters.map { "\($0.name)=\($0.value)" }
    }
}

/// A header value whose parameters could not be parsed.
public struct HeaderParameterError: Error, Equatable, Sendable {
    /// What was wrong.
    public var message: String
}
