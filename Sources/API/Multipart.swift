import HTTP

/// One part of a `multipart/form-data` body; `body` shares the request's bytes.
public struct MultipartPart: Sendable {
    /// The part's header fields.
    public var headers: HTTPHeaders
    /// The form field name from `Content-Disposition`.
    public var name: String
    /// The file name, when the part is a file upload.
    public var filename: String?
    /// The part's `Content-Type` media type (lower-cased, parameters dropped); nil when absent (text/plain).
    public var contentType: String?
    /// The part's content.
    public var body: ArraySlice<UInt8>
}

/// Limits that keep a hostile body from costing more than its size.
public struct MultipartLimits: Sendable {
    /// Most parts accepted.
    public var maxParts: Int
    /// Most header bytes per part.
    public var maxHeaderBytes: Int

    /// Limits with defaults suited to image uploads.
    public init(maxParts: Int = 64, maxHeaderBytes: Int = 8 * 1024) {
        self.maxParts = maxParts
        self.maxHeaderBytes = maxHeaderBytes
    }
}

/// A malformed `multipart/form-data` body; messages name the part.
public typealias MultipartError = CodecError<MultipartFailure>

/// The closed set of multipart failures.
public enum MultipartFailure: CodecErrorKind {
    /// Content-Type is not multipart/form-data or has no usable boundary.
    case badContentType
    /// No opening boundary in the body.
    case missingBoundary
    /// The body ends before the closing `--boundary--`.
    case missingClosingBoundary
    /// Malformed part headers or boundary line.
    case malformedPart
    /// The body has no parts.
    case noParts
    /// Too many parts or oversized part headers.
    case limitExceeded

    /// 413 for limits, 415 for a wrong Content-Type, 400 otherwise.
    public var httpStatus: Int {
        switch self {
        case .limitExceeded: return 413
        case .badContentType: return 415
        default: return 400
        }
    }
}

/// RFC 7578 / RFC 2046 `multipart/form-data` parsing over a complete body.
public enum Multipart {
    /// `value` parsed as a header value with parameters; a failure is a `kind` error prefixed by `context`.
    private static func parameters(of value: String, _ kind: MultipartFailure, _ context: String) throws -> HeaderValueWithParameters {
        do { return try HeaderValueWithParameters(parsing: value) } catch let error as HeaderParameterError {
            throw MultipartError(kind, "\(context): \(error.message)")
        }
    }

    /// The boundary of a `multipart/form-data` Content-Type value (quoted or not).
    public static func boundary(contentType: String) throws -> String {
        let parsed = try parameters(of: contentType, .badContentType, "Content-Type")
        guard parsed.value.lowercased() == "multipart/form-data" else {
            throw MultipartError(.badContentType, "expected Content-Type multipart/form-data, got '\(parsed.value)'")
        }
        guard let boundary = parsed[parameter: "boundary"] else {
            throw MultipartError(.badContentType, "multipart/form-data Content-Type has no boundary parameter")
        }
        guard isValidBoundary(boundary) else {
            throw MultipartError(.badContentType, "invalid multipart boundary '\(boundary.prefix(80))': expected 1-70 characters per RFC 2046")
        }
        return boundary
    }

    /// RFC 2046 `bchars`, 1 to 70 of them, not ending in a space.
    static func isValidBoundary(_ boundary: String) -> Bool {
        let u = Array(boundary.utf8)
        guard (1...70).contains(u.count), u.last != 0x20 else { return false }
        let extra = Array("'()+_,-./:=? ".utf8)
        return u.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || extra.contains(c)
        }
    }

    /// Parses a body given its Content-Type header value.
    public static func parse(body: [UInt8], contentType: String, limits: MultipartLimits = MultipartLimits()) throws -> [MultipartPart] {
        try parse(body: body, boundary: boundary(contentType: contentType), limits: limits)
    }

    /// Parses a body with a known boundary. Preamble and epilogue are ignored; the closing delimiter is required.
    public static func parse(body: [UInt8], boundary: String, limits: MultipartLimits = MultipartLimits()) throws -> [MultipartPart] {
        let dashBoundary = Array("--\(boundary)".utf8)
        let delimiter = [0x0D, 0x0A] + dashBoundary
        // Opening delimiter: at the very start, or after a preamble and CRLF.
        var cursor: Int
        if body.starts(with: dashBoundary) {
            cursor = dashBoundary.count
        } else if let found = find(delimiter, in: body, from: 0) {
            cursor = found + delimiter.count
        } else {
            throw MultipartError(.missingBoundary, "multipart body has no '--\(boundary)' boundary line")
        }
        var parts: [MultipartPart] = []
        while true {
            let ordinal = parts.count + 1
            // After a delimiter: `--` closes the body, otherwise padding then CRLF opens a part.
            if cursor + 1 < body.count && body[cursor] == UInt8(ascii: "-") && body[cursor + 1] == UInt8(ascii: "-") {
                break
            }
            while cursor < body.count && (body[cursor] == 0x20 || body[cursor] == 0x09) { cursor += 1 }
            guard cursor + 1 < body.count else {
                throw MultipartError(.missingClosingBoundary, "multipart body ends after a boundary without the closing '--\(boundary)--'")
            }
            guard body[cursor] == 0x0D && body[cursor + 1] == 0x0A else {
                throw MultipartError(.malformedPart, "part \(ordinal): boundary line is followed by unexpected bytes instead of CRLF")
            }
            cursor += 2
            guard parts.count < limits.maxParts else {
                throw MultipartError(.limitExceeded, "multipart body has more than \(limits.maxParts) parts")
            }
            guard let end = find(delimiter, in: body, from: cursor) else {
                let name = (try? parsePart(body, cursor..<body.count, ordinal: ordinal, limits: limits)).map { " ('\($0.name)')" } ?? ""
                throw MultipartError(.missingClosingBoundary, "part \(ordinal)\(name) is not terminated: missing closing boundary '--\(boundary)--'")
            }
            parts.append(try parsePart(body, cursor..<end, ordinal: ordinal, limits: limits))
            cursor = end + delimiter.count
        }
        guard !parts.isEmpty else { throw MultipartError(.noParts, "multipart body has no parts") }
        return parts
    }

    private static func parsePart(_ body: [UInt8], _ range: Range<Int>, ordinal: Int, limits: MultipartLimits) throws -> MultipartPart {
        var headers = HTTPHeaders()
        var i = range.lowerBound
        // Header lines until an empty line; a part may have none (then it starts with CRLF).
        while true {
            guard let lineEnd = find([0x0D, 0x0A], in: body, from: i, before: range.upperBound) else {
                throw MultipartError(.malformedPart, "part \(ordinal): headers are not terminated by an empty line")
            }
            guard lineEnd - range.lowerBound <= limits.maxHeaderBytes else {
                throw MultipartError(.limitExceeded, "part \(ordinal): headers exceed \(limits.maxHeaderBytes) bytes")
            }
            if lineEnd == i { i += 2; break }
            let line = body[i..<lineEnd]
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > i else {
                throw MultipartError(.malformedPart, "part \(ordinal): header line without a name and ':'")
            }
            let name = String(decoding: body[i..<colon], as: UTF8.self)
            guard name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                throw MultipartError(.malformedPart, "part \(ordinal): invalid header name '\(name.prefix(40))'")
            }
            headers.add(name, String(decoding: body[(colon + 1)..<lineEnd], as: UTF8.self).trimmingASCIIWhitespace())
            i = lineEnd + 2
        }
        guard let disposition = headers["Content-Disposition"] else {
            throw MultipartError(.malformedPart, "part \(ordinal): missing Content-Disposition header")
        }
        let parsed = try parameters(of: disposition, .malformedPart, "part \(ordinal): Content-Disposition")
        guard parsed.value.lowercased() == "form-data" else {
            throw MultipartError(.malformedPart, "part \(ordinal): Content-Disposition must be form-data, got '\(parsed.value)'")
        }
        guard let name = parsed[parameter: "name"] else {
            throw MultipartError(.malformedPart, "part \(ordinal): Content-Disposition has no name")
        }
        var filename = parsed[parameter: "filename"]
        if let extended = parsed[parameter: "filename*"], let decoded = decodeExtendedValue(extended) { filename = decoded }
        var contentType: String?
        if let type = headers["Content-Type"] {
            let media = (try? HeaderValueWithParameters(parsing: type))?.value ?? type
            contentType = media.lowercased()
        }
        return MultipartPart(headers: headers, name: name, filename: filename, contentType: contentType, body: body[i..<range.upperBound])
    }

    /// RFC 8187 `charset'lang'percent-encoded` (UTF-8 only).
    private static func decodeExtendedValue(_ text: String) -> String? {
        let pieces = text.split(separator: "'", maxSplits: 2, omittingEmptySubsequences: false)
        guard pieces.count == 3, pieces[0].lowercased() == "utf-8" else { return nil }
        return percentDecode(String(pieces[2]).replacingPlus())
    }

    /// First index of `needle` in `haystack[from..<before]`.
    static func find(_ needle: [UInt8], in haystack: [UInt8], from: Int, before: Int? = nil) -> Int? {
        let end = before ?? haystack.count
        guard !needle.isEmpty, end - from >= needle.count else { return nil }
        return haystack.withUnsafeBufferPointer { h in
            needle.withUnsafeBufferPointer { n in
                let first = n[0]
                var i = from
                let last = end - n.count
                while i <= last {
                    // memchr-speed scan for the first byte, then compare the rest.
                    guard let hit = memchrIndex(h, first, i, last + 1) else { return nil }
                    if memcmpEqual(h.baseAddress! + hit, n.baseAddress!, n.count) { return hit }
                    i = hit + 1
                }
                return nil
            }
        }
    }
}

private extension String {
    /// `+` is literal in RFC 8187 values; protect it from `percentDecode`'s form decoding.
    func replacingPlus() -> String { split(separator: "+", omittingEmptySubsequences: false).joined(separator: "%2B") }
}

import Glibc

@inline(__always)
private func memchrIndex(_ h: UnsafeBufferPointer<UInt8>, _ byte: UInt8, _ from: Int, _ to: Int) -> Int? {
    guard from < to, let p = memchr(h.baseAddress! + from, Int32(byte), to - from) else { return nil }
    return UnsafeRawPointer(p) - UnsafeRawPointer(h.baseAddress!)
}

@inline(__always)
private func memcmpEqual(_ a: UnsafePointer<UInt8>, _ b: UnsafePointer<UInt8>, _ n: Int) -> Bool {
    memcmp(a, b, n) == 0
}
