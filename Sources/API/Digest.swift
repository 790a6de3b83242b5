/// Base64 (RFC 4648, standard alphabet, padded) for digest headers.
public enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// Encodes bytes with padding.
    public static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i + 3 <= bytes.count {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            out += [alphabet[Int(n >> 18)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)], alphabet[Int(n & 63)]]
            i += 3
        }
        let rest = bytes.count - i
        if rest > 0 {
            let n = UInt32(bytes[i]) << 16 | (rest == 2 ? UInt32(bytes[i + 1]) << 8 : 0)
            out += [alphabet[Int(n >> 18)], alphabet[Int(n >> 12 & 63)]]
            out += rest == 2 ? [alphabet[Int(n >> 6 & 63)], UInt8(ascii: "=")] : [UInt8(ascii: "="), UInt8(ascii: "=")]
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes padded base64; nil on any invalid character, bad length or non-canonical padding bits.
    public static func decode(_ text: String) -> [UInt8]? {
        let chars = Array(text.utf8)
        guard chars.count % 4 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(chars.count / 4 * 3)
        for start in stride(from: 0, to: chars.count, by: 4) {
            var n: UInt32 = 0
            var padding = 0
            for j in 0..<4 {
                let c = chars[start + j]
                let v: UInt32
                switch c {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"): v = UInt32(c - UInt8(ascii: "A"))
                case UInt8(ascii: "a")...UInt8(ascii: "z"): v = UInt32(c - UInt8(ascii: "a")) + 26
                case UInt8(ascii: "0")...UInt8(ascii: "9"): v = UInt32(c - UInt8(ascii: "0")) + 52
                case UInt8(ascii: "+"): v = 62
                case UInt8(ascii: "/"): v = 63
                case UInt8(ascii: "=") where start + 4 == chars.count && j >= 2:
                    padding += 1
                    v = 0
                default: return nil
                }
                if padding > 0 && c != UInt8(ascii: "=") { return nil }
                n = n << 6 | v
            }
            if padding == 2 && n & 0xFFFF != 0 { return nil }
            if padding == 1 && n & 0xFF != 0 { return nil }
            out.append(UInt8(n >> 16))
            if padding < 2 { out.append(UInt8(n >> 8 & 0xFF)) }
            if padding < 1 { out.append(UInt8(n & 0xFF)) }
        }
        return out
    }
}

/// The `Digest` request header (RFC 3230) as used by model uploads: `sha-256=<base64>`.
public enum DigestHeader {
    /// The expected SHA-256 from a `Digest` value; other algorithms in a list are skipped.
    /// Throws 400 when the header names sha-256 with a malformed value or names no supported algorithm.
    public static func expectedSHA256(_ value: String) throws -> [UInt8] {
        for item in value.split(separator: ",") {
            let text = String(item).trimmingASCIIWhitespace()
            guard let eq = text.firstIndex(of: "=") else { continue }
            guard text[..<eq].lowercased() == "sha-256" else { continue }
            let encoded = String(text[text.index(after: eq)...])
            guard let bytes = Base64.decode(encoded), bytes.count == 32 else {
                throw APIError.badRequest("Digest sha-256 value must be the base64 of 32 bytes, got '\(encoded.prefix(60))'")
            }
            return bytes
        }
        throw APIError.badRequest("Digest header has no sha-256 value (expected 'sha-256=<base64>')")
    }

    /// Lower-case hex of bytes (the form Serving verifies uploads against).
    public static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        return String(decoding: bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] }, as: UTF8.self)
    }
}
