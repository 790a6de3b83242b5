import Infrastructure
import CHTTPParser

/// A request read off the wire, before the connection adds its id and peer address.
struct ParsedRequest {
    /// The request (requestID is the client's sane `X-Request-ID` or empty).
    var request: HTTPRequest
    /// False when this must be the last request on the connection.
    var keepAlive: Bool
    /// Monotonic time the first byte of the request was parsed.
    var startedAt: UInt64
}

/// What feeding bytes produced, in wire order.
enum ParserEvent {
    /// A complete request.
    case request(ParsedRequest)
    /// Headers of a request that waits for `100 Continue` and whose body will be accepted.
    case expectContinue
    /// The stream is unusable from here on; answer with the error and close.
    case error(HTTPParseError)
    /// The admission check refused a request from its headers (before its body was read); answer this and close.
    case refused(HTTPResponse)
}

/// Receives parser events as they happen (the connection), instead of through `events`.
protocol ParserEventSink: AnyObject {
    /// One event, in wire order.
    func parserEmitted(_ event: ParserEvent)
}

/// Incremental HTTP/1.x request parser over http-parser with our own limits; confined to one thread.
///
/// Everything is copied out of the parser's buffers into owned values, so events outlive the bytes fed.
final class RequestParser {
    private let parser: UnsafeMutablePointer<http_parser>
    private let maxHeaderBytes: Int
    private let maxBodyBytes: Int

    /// Events produced by the last `feed` calls; the caller drains them.
    // Loop-thread confined and never re-entered, so runtime exclusivity checks only cost time here.
    @exclusivity(unchecked) var events: [ParserEvent] = []
    /// When set, events go straight here (no array round trip); the sink must outlive the parser.
    unowned(unsafe) var sink: (any ParserEventSink)?
    /// True between the first byte of a request and its end.
    @exclusivity(unchecked) private(set) var inMessage = false
    /// Monotonic time the current request began.
    @exclusivity(unchecked) private(set) var messageStartedAt: UInt64 = 0
    /// True once the parser hit an error or an upgrade: no more bytes are parsed.
    @exclusivity(unchecked) private(set) var stopped = false
    /// Asked after each complete request; true makes `feed` return early (backpressure), leaving the rest unconsumed.
    @exclusivity(unchecked) var shouldSuspend: (() -> Bool)?
    /// Asked at the end of the headers of a request that has a body; a response refuses it before the body is read.
    @exclusivity(unchecked) var admit: ((HTTPRequest) -> HTTPResponse?)?

    // Method token scanning: http-parser knows a fixed method list and fails others as malformed; we read the token
    // ourselves so an unknown but valid method (QUERY) reaches the router and gets 405, not 400.
    @exclusivity(unchecked) private var atMessageStart = true
    @exclusivity(unchecked) private var methodToken: [UInt8] = []
    @exclusivity(unchecked) private var tokenStartedAt: UInt64 = 0
    /// The method as sent when http-parser was fed a stand-in for it.
    @exclusivity(unchecked) private var unknownMethod: String?
    // Chunk framing: http-parser (non-strict build) accepts any two bytes after chunk data; we require CRLF.
    @exclusivity(unchecked) private var chunked = false
    @exclusivity(unchecked) private var chunkRemaining: UInt64 = 0
    /// CRLF bytes after a chunk's data still to be checked (2, 1 or 0), across feeds.
    @exclusivity(unchecked) private var chunkCRLFPending = 0
    @exclusivity(unchecked) private var executeEnd: UnsafeRawPointer?
    @exclusivity(unchecked) private var pendingRefusal: HTTPResponse?

    // Per-message accumulation, reused between messages.
    @exclusivity(unchecked) private var url: [UInt8] = []
    @exclusivity(unchecked) private var field: [UInt8] = []
    @exclusivity(unchecked) private var value: [UInt8] = []
    @exclusivity(unchecked) private var lastWasValue = false
    @exclusivity(unchecked) private var headers: [(name: String, value: String)] = []
    @exclusivity(unchecked) private var body: [UInt8] = []
    /// The Content-Length of the message being parsed (0 without one).
    @exclusivity(unchecked) private var declaredBody = 0
    /// True once a Content-Length body's buffer has its full declared length; `bodyFilled` bytes of it are received.
    @exclusivity(unchecked) private var bodySized = false
    @exclusivity(unchecked) private var bodyFilled = 0
    @exclusivity(unchecked) private var headerBytes = 0
    @exclusivity(unchecked) private var contentLengths: [String] = []
    @exclusivity(unchecked) private var transferEncodings: [String] = []
    @exclusivity(unchecked) private var expectation: String?
    @exclusivity(unchecked) private var requestID = ""
    @exclusivity(unchecked) private var pendingError: HTTPParseError?
    /// Set when Content-Length, Transfer-Encoding or Expect was seen, so the common request skips their checks.
    @exclusivity(unchecked) private var sawFramingHeaders = false

    /// A parser enforcing `maxHeaderBytes` (request line + headers) and `maxBodyBytes`.
    init(maxHeaderBytes: Int, maxBodyBytes: Int) {
        self.maxHeaderBytes = maxHeaderBytes
        self.maxBodyBytes = maxBodyBytes
        RequestParser.raiseLibraryHeaderLimit(above: maxHeaderBytes)
        parser = .allocate(capacity: 1)
        http_parser_init(parser, HTTP_REQUEST)
        parser.pointee.data = Unmanaged.passUnretained(self).toOpaque()
    }

    deinit { parser.deallocate() }

    /// Parses `bytes`, appending to `events` (or telling the sink); after an error or upgrade further bytes are ignored.
    ///
    /// Returns how many bytes were consumed: all of them, unless `shouldSuspend` asked to stop after a complete request;
    /// the caller then feeds the rest again later (they start the next request).
    @discardableResult
    func feed(_ bytes: UnsafeRawBufferPointer) -> Int {
        guard !stopped, let base = bytes.baseAddress, bytes.count > 0 else { return bytes.count }
        var offset = 0
        let count = bytes.count
        while offset < count && !stopped {
            if chunkCRLFPending > 0 {
                if !checkChunkCRLF(base + offset, available: count - offset) { return count }
            }
            if atMessageStart {
                offset = scanMethod(base, from: offset, count: count)
                continue
            }
            offset += execute(base + offset, count - offset)
            if stopped { return count }
            if atMessageStart, let shouldSuspend, shouldSuspend() { return offset }
        }
        return count
    }

    /// One http_parser_execute call; handles pause (a request completed), errors and upgrades. Returns bytes consumed.
    private func execute(_ start: UnsafeRawPointer, _ length: Int) -> Int {
        executeEnd = start + length
        let consumed = http_parser_execute(parser, RequestParser.settings, start.assumingMemoryBound(to: CChar.self), length)
        let errno = http_errno(rawValue: parser.pointee.http_errno)
        if errno == HPE_PAUSED {
            http_parser_pause(parser, 0)
        } else if errno != HPE_OK {
            stopped = true
            if let refusal = pendingRefusal {
                emit(.refused(refusal))
            } else {
                emit(.error(pendingError ?? mapLibraryError(errno)))
            }
            return length
        }
        if parser.pointee.upgrade == 1 {
            // Protocol switches (Upgrade, CONNECT) are not supported: answer what was parsed, then stop reading.
            stopped = true
            if inMessage { emit(.error(.unsupportedMethod("CONNECT"))) }
            return length
        }
        if errno == HPE_OK && consumed != length {
            stopped = true
            emit(.error(.malformed("parser stopped after \(consumed) of \(length) bytes")))
            return length
        }
        return consumed
    }

    /// Reads the method token at the start of a request. A token http-parser knows is handed to it as sent; another
    /// valid token is remembered and replaced by `GET` (framing does not depend on the method), so the router can
    /// answer 405. Anything that is not a token goes to http-parser, which reports it. Returns the new offset.
    private func scanMethod(_ base: UnsafeRawPointer, from start: Int, count: Int) -> Int {
        var i = start
        let bytes = base.assumingMemoryBound(to: UInt8.self)
        while i < count {
            let b = bytes[i]
            if methodToken.isEmpty && (b == 13 || b == 10) {
                // Empty lines before a request line are tolerated (RFC 9112 2.2), as http-parser does.
                i += 1
                continue
            }
            if b == 0x20, !methodToken.isEmpty {
                atMessageStart = false
                let length = methodToken.count
                if RequestParser.knownMethods.contains(methodToken) {
                    unknownMethod = nil
                    // The whole token is in this buffer: let http-parser read it from there.
                    if i - start >= length {
                        methodToken.removeAll(keepingCapacity: true)
                        return i - length
                    }
                } else {
                    unknownMethod = String(decoding: methodToken, as: UTF8.self)
                    methodToken = Array("GET".utf8)
                }
                let token = methodToken
                methodToken.removeAll(keepingCapacity: true)
                _ = token.withUnsafeBytes { execute($0.baseAddress!, $0.count) }
                return stopped ? count : i
            }
            if isTokenByte(b) && methodToken.count < RequestParser.maxMethodLength {
                if methodToken.isEmpty { tokenStartedAt = SystemClock.nanoseconds(); inMessage = true }
                methodToken.append(b)
                i += 1
                continue
            }
            atMessageStart = false
            if methodToken.count >= RequestParser.maxMethodLength && isTokenByte(b) {
                stopped = true
                emit(.error(.malformed("method token longer than \(RequestParser.maxMethodLength) bytes")))
                return count
            }
            // Not a token: let http-parser see exactly what was sent and report it.
            let token = methodToken
            methodToken.removeAll(keepingCapacity: true)
            unknownMethod = nil
            if !token.isEmpty {
                _ = token.withUnsafeBytes { execute($0.baseAddress!, $0.count) }
                if stopped { return count }
            }
            return i
        }
        return i
    }
    @inline(__always)
    private func emit(_ event: ParserEvent) {
        if let sink { sink.parserEmitted(event) } else { events.append(event) }
    }

    /// Convenience for tests: feeds an array.
    @discardableResult
    func feed(_ bytes: [UInt8]) -> Int { bytes.withUnsafeBytes { feed($0) } }

    // MARK: - Callbacks (run inside http_parser_execute)

    private func beginMessage() {
        inMessage = true
        messageStartedAt = tokenStartedAt != 0 ? tokenStartedAt : SystemClock.nanoseconds()
        tokenStartedAt = 0
        chunked = false
        chunkRemaining = 0
        chunkCRLFPending = 0
        pendingRefusal = nil
        // Reset only what the previous message touched: each access to a class property has a cost here.
        if !url.isEmpty { url.removeAll(keepingCapacity: true) }
        if !field.isEmpty { field.removeAll(keepingCapacity: true) }
        if !value.isEmpty { value.removeAll(keepingCapacity: true) }
        lastWasValue = false
        headerBytes = 0
        if sawFramingHeaders {
            contentLengths.removeAll(keepingCapacity: true)
            transferEncodings.removeAll(keepingCapacity: true)
            expectation = nil
            sawFramingHeaders = false
        }
        if !requestID.isEmpty { requestID = "" }
        pendingError = nil
    }

    /// Counts header-section bytes and fails the parse once over the limit.
    private func countHeaderBytes(_ count: Int) -> Int32 {
        headerBytes += count
        if headerBytes > maxHeaderBytes {
            pendingError = .headerTooLarge(limit: maxHeaderBytes)
            return 1
        }
        return 0
    }

    private func onURL(_ data: UnsafeRawBufferPointer) -> Int32 {
        if countHeaderBytes(data.count) != 0 { return 1 }
        url.append(contentsOf: data)
        return 0
    }

    private func onHeaderField(_ data: UnsafeRawBufferPointer) -> Int32 {
        if lastWasValue { commitHeader() }
        // ": " and CRLF around each field count toward the header section too.
        if field.isEmpty, countHeaderBytes(4) != 0 { return 1 }
        if countHeaderBytes(data.count) != 0 { return 1 }
        field.append(contentsOf: data)
        return 0
    }

    private func onHeaderValue(_ data: UnsafeRawBufferPointer) -> Int32 {
        if countHeaderBytes(data.count) != 0 { return 1 }
        value.append(contentsOf: data)
        lastWasValue = true
        return 0
    }

    private func commitHeader() {
        while let last = value.last, last == 0x20 || last == 0x09 { value.removeLast() }
        let name = String(decoding: field, as: UTF8.self)
        let text = String(decoding: value, as: UTF8.self)
        switch field.count {
        case 6 where asciiLowercaseEquals(field, "expect"): expectation = text; sawFramingHeaders = true
        case 12 where asciiLowercaseEquals(field, "x-request-id"): if RequestID.isSane(value) { requestID = text }
        case 14 where asciiLowercaseEquals(field, "content-length"): contentLengths.append(text); sawFramingHeaders = true
        case 17 where asciiLowercaseEquals(field, "transfer-encoding"): transferEncodings.append(text); sawFramingHeaders = true
        default: break
        }
        if headers.isEmpty { headers.reserveCapacity(8) }
        headers.append((name: name, value: text))
        field.removeAll(keepingCapacity: true)
        value.removeAll(keepingCapacity: true)
        lastWasValue = false
    }

    private func onHeadersComplete() -> Int32 {
        if lastWasValue || !field.isEmpty { commitHeader() }
        if parser.pointee.http_major != 1 {
            pendingError = .unsupportedVersion(major: Int(parser.pointee.http_major), minor: Int(parser.pointee.http_minor))
            return -1
        }
        if parser.pointee.method == HTTP_CONNECT.rawValue && unknownMethod == nil {
            pendingError = .unsupportedMethod("CONNECT")
            return -1
        }
        guard sawFramingHeaders else { return 0 }
        if let error = framingError() {
            pendingError = error
            return -1
        }
        chunked = !transferEncodings.isEmpty
        let hasBody = chunked || (!contentLengths.isEmpty && parser.pointee.content_length > 0)
        // Who may send a body is decided before its size is judged or a byte of it is buffered (401 before 413).
        if hasBody, let admit, let refusal = admit(head()) {
            pendingRefusal = refusal
            return -1
        }
        if !contentLengths.isEmpty, parser.pointee.content_length > UInt64(maxBodyBytes) {
            pendingError = .bodyTooLarge(limit: maxBodyBytes, declared: Int(clamping: parser.pointee.content_length))
            return -1
        }
        if let expectation {
            guard expectation.lowercased() == "100-continue" else {
                pendingError = .unsupportedExpectation(expectation)
                return -1
            }
            // HTTP/1.0 clients do not understand 1xx; only 1.1 gets the interim response.
            if parser.pointee.http_major == 1, parser.pointee.http_minor >= 1 { emit(.expectContinue) }
        }
        declaredBody = contentLengths.isEmpty ? 0 : Int(parser.pointee.content_length)
        return 0
    }

    /// The unfilled rest of the Content-Length body being received, for the next socket read to land in directly: its
    /// bytes are then fed as usual and not copied again. Nil outside such a body (or before its first bytes came:
    /// the full-size buffer is allocated only once the client has proven it is sending).
    func directBodyWindow() -> UnsafeMutableRawBufferPointer? {
        guard inMessage, bodySized, !stopped, bodyFilled < body.count else { return nil }
        let filled = bodyFilled
        // The array is uniquely owned here and untouched until that read is fed, so its storage does not move.
        return body.withUnsafeMutableBytes { UnsafeMutableRawBufferPointer(rebasing: $0[filled...]) }
    }

    /// The request so far without its body, for the admission check.
    private func head() -> HTTPRequest {
        let (path, query) = splitTarget()
        return HTTPRequest(method: currentMethod, path: path ?? "", query: query,
                           version: (Int(parser.pointee.http_major), Int(parser.pointee.http_minor)),
                           headers: HTTPHeaders(fields: headers), body: [], requestID: requestID)
    }

    /// The method as the client sent it.
    private var currentMethod: String { unknownMethod ?? RequestParser.methodName(parser.pointee.method) }

    /// Smuggling guards that http-parser either does not make or does not explain.
    private func framingError() -> HTTPParseError? {
        if !transferEncodings.isEmpty && !contentLengths.isEmpty {
            return .conflictingFraming("Content-Length and Transfer-Encoding are both present")
        }
        if contentLengths.count > 1, Set(contentLengths.map { $0.trimmingSpaces }).count > 1 {
            return .conflictingFraming("differing Content-Length values \(contentLengths)")
        }
        if !transferEncodings.isEmpty {
            let codings = transferEncodings.flatMap { $0.split(separator: ",") }.map { String($0).trimmingSpaces.lowercased() }
            guard codings.last == "chunked" else {
                return .malformed("Transfer-Encoding '\(transferEncodings.joined(separator: ", "))' does not end with chunked")
            }
            if let other = codings.first(where: { $0 != "chunked" }) { return .unsupportedTransferEncoding(other) }
            if codings.count > 1 { return .malformed("chunked applied more than once") }
        }
        return nil
    }

    private func onChunkHeader() -> Int32 {
        // Refuse a chunk that would overflow the limit before reading it.
        let next = parser.pointee.content_length
        if next > UInt64(maxBodyBytes - body.count) {
            pendingError = .bodyTooLarge(limit: maxBodyBytes, declared: nil)
            return 1
        }
        chunkRemaining = next
        return 0
    }

    /// Checks the CRLF that must follow a chunk's data, as far as `available` bytes at `at` reach; true on a mismatch.
    private func chunkCRLFMismatch(_ at: UnsafeRawPointer, available: Int) -> Bool {
        let bytes = at.assumingMemoryBound(to: UInt8.self)
        var i = 0
        while chunkCRLFPending > 0 && i < available {
            guard bytes[i] == (chunkCRLFPending == 2 ? 13 : 10) else { return true }
            chunkCRLFPending -= 1
            i += 1
        }
        return false
    }

    /// The CRLF check continued at the start of a later feed; false (error emitted, parsing stopped) on a mismatch.
    private func checkChunkCRLF(_ at: UnsafeRawPointer, available: Int) -> Bool {
        guard chunkCRLFMismatch(at, available: available) else { return true }
        stopped = true
        emit(.error(.malformed("chunk data is not followed by CRLF")))
        return false
    }

    private func onBody(_ data: UnsafeRawBufferPointer) -> Int32 {
        if !chunked, !contentLengths.isEmpty {
            if !bodySized {
                // The client has proven it is sending: one buffer of the declared length (already checked against the
                // limit), filled in place; http-parser never passes more than Content-Length.
                let declared = declaredBody
                body = [UInt8](unsafeUninitializedCapacity: declared) { _, count in count = declared }
                bodySized = true
            }
            guard let source = data.baseAddress, data.count <= body.count - bodyFilled else { return data.count == 0 ? 0 : 1 }
            let filled = bodyFilled
            body.withUnsafeMutableBytes { buffer in
                let destination = buffer.baseAddress! + filled
                // A read that landed in `directBodyWindow()` is already in place.
                if UnsafeRawPointer(destination) != source { destination.copyMemory(from: source, byteCount: data.count) }
            }
            bodyFilled += data.count
            return 0
        }
        if data.count > maxBodyBytes - body.count {
            pendingError = .bodyTooLarge(limit: maxBodyBytes, declared: nil)
            return 1
        }
        body.append(contentsOf: data)
        if chunked {
            chunkRemaining -= UInt64(data.count)
            if chunkRemaining == 0, let end = data.baseAddress.map({ $0 + data.count }), let executeEnd {
                chunkCRLFPending = 2
                if chunkCRLFMismatch(end, available: executeEnd - end) {
                    pendingError = .malformed("chunk data is not followed by CRLF")
                    return 1
                }
            }
        }
        return 0
    }

    private func onMessageComplete() -> Int32 {
        let (path, query) = splitTarget()
        guard let path else {
            pendingError = .malformed("request target '\(String(decoding: url.prefix(200), as: UTF8.self))' is not a valid URI")
            return 1
        }
        let version = (major: Int(parser.pointee.http_major), minor: Int(parser.pointee.http_minor))
        let request = HTTPRequest(method: currentMethod, path: path, query: query,
                                  version: version, headers: HTTPHeaders(fields: headers), body: body, requestID: requestID)
        let keepAlive = http_should_keep_alive(parser) != 0
        emit(.request(ParsedRequest(request: request, keepAlive: keepAlive, startedAt: messageStartedAt)))
        headers = []
        body = []
        bodySized = false
        bodyFilled = 0
        declaredBody = 0
        inMessage = false
        unknownMethod = nil
        // Hand control back at every request boundary: the next method token is ours to read, and the caller may
        // want to stop here (backpressure).
        atMessageStart = true
        http_parser_pause(parser, 1)
        return 0
    }

    /// Splits the request target into decoded path and raw query; nil when it is not a usable URI.
    private func splitTarget() -> (String?, String) {
        guard let first = url.first else { return (nil, "") }
        if first == UInt8(ascii: "/") {
            var end = url.count
            if let hash = url.firstIndex(of: UInt8(ascii: "#")) { end = hash }
            if let mark = url[..<end].firstIndex(of: UInt8(ascii: "?")) {
                return (decodePath(url[..<mark]), String(decoding: url[(mark + 1)..<end], as: UTF8.self))
            }
            return (decodePath(url[..<end]), "")
        }
        if url == [UInt8(ascii: "*")] { return ("*", "") }
        // Absolute form (`http://host/path?q`), as proxies send it.
        var parts = http_parser_url()
        http_parser_url_init(&parts)
        let failed = url.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { http_parser_parse_url($0.baseAddress, $0.count, 0, &parts) }
        }
        guard failed == 0 else { return (nil, "") }
        func component(_ field: http_parser_url_fields) -> ArraySlice<UInt8>? {
            guard parts.field_set & (1 << UInt16(field.rawValue)) != 0 else { return nil }
            // field_data (an array of anonymous {off, len} structs) does not import; it follows field_set and port.
            let data = withUnsafeBytes(of: parts) { raw in
                (raw.load(fromByteOffset: 4 + Int(field.rawValue) * 4, as: UInt16.self),
                 raw.load(fromByteOffset: 6 + Int(field.rawValue) * 4, as: UInt16.self))
            }
            return url[Int(data.0)..<(Int(data.0) + Int(data.1))]
        }
        let path = component(UF_PATH).map { decodePath($0) } ?? "/"
        let query = component(UF_QUERY).map { String(decoding: $0, as: UTF8.self) } ?? ""
        return (path, query)
    }

    private func mapLibraryError(_ errno: http_errno) -> HTTPParseError {
        switch errno {
        case HPE_HEADER_OVERFLOW: return .headerTooLarge(limit: maxHeaderBytes)
        case HPE_UNEXPECTED_CONTENT_LENGTH:
            // The library may stop inside the Transfer-Encoding line, before it was committed.
            if !transferEncodings.isEmpty || asciiLowercaseEquals(field, "transfer-encoding") { return .conflictingFraming("Content-Length and Transfer-Encoding are both present") }
            return .conflictingFraming("more than one Content-Length")
        case HPE_INVALID_TRANSFER_ENCODING:
            return .malformed("Transfer-Encoding '\(transferEncodings.joined(separator: ", "))' does not end with chunked")
        default:
            return .malformed(String(cString: http_errno_description(errno)))
        }
    }

    // MARK: - C glue

    /// Recovers the parser object from `http_parser.data`.
    @inline(__always)
    private static func context(_ p: UnsafeMutablePointer<http_parser>?) -> RequestParser {
        Unmanaged<RequestParser>.fromOpaque(p!.pointee.data).takeUnretainedValue()
    }

    @inline(__always)
    private static func buffer(_ at: UnsafePointer<CChar>?, _ length: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: at, count: length)
    }

    /// Callbacks capture nothing; each finds its parser through `data`.
    private nonisolated(unsafe) static let settings: UnsafeMutablePointer<http_parser_settings> = {
        let s = UnsafeMutablePointer<http_parser_settings>.allocate(capacity: 1)
        http_parser_settings_init(s)
        s.pointee.on_message_begin = { p in context(p).beginMessage(); return 0 }
        s.pointee.on_url = { p, at, n in context(p).onURL(buffer(at, n)) }
        s.pointee.on_header_field = { p, at, n in context(p).onHeaderField(buffer(at, n)) }
        s.pointee.on_header_value = { p, at, n in context(p).onHeaderValue(buffer(at, n)) }
        s.pointee.on_headers_complete = { p in context(p).onHeadersComplete() }
        s.pointee.on_body = { p, at, n in context(p).onBody(buffer(at, n)) }
        s.pointee.on_message_complete = { p in context(p).onMessageComplete() }
        s.pointee.on_chunk_header = { p in context(p).onChunkHeader() }
        return s
    }()

    /// Longest method token accepted (the longest registered method, UPDATEREDIRECTREF, has 17 bytes).
    static let maxMethodLength = 32

    /// The methods http-parser parses itself, as bytes.
    private static let knownMethods: Set<[UInt8]> = Set(methodNames.filter { $0 != "<unknown>" }.map { Array($0.utf8) })

    /// Method names as Swift strings, built once so requests do not re-decode C strings.
    private static let methodNames: [String] = (0..<64).map { String(cString: http_method_str(http_method(rawValue: UInt32($0)))) }

    private static func methodName(_ raw: UInt32) -> String { raw < 64 ? methodNames[Int(raw)] : "UNKNOWN" }

    /// http-parser's own header limit is process-wide (80 KiB default); it is only ever raised so ours governs.
    private static func raiseLibraryHeaderLimit(above limit: Int) {
        let wanted = UInt32(clamping: max(80 * 1024, limit + 4096))
        libraryLimit.withLock { current in
            if wanted > current {
                current = wanted
                http_parser_set_max_header_size(wanted)
            }
        }
    }
}

private let libraryLimit = Locked<UInt32>(80 * 1024)

/// RFC 9110 `tchar`: the bytes a method token may contain.
@inline(__always)
func isTokenByte(_ b: UInt8) -> Bool {
    switch b {
    case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): return true
    case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "*"),
         UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"),
         UInt8(ascii: "~"): return true
    default: return false
    }
}

/// Compares bytes with a lowercase ASCII literal, ignoring the bytes' case.
func asciiLowercaseEquals(_ bytes: [UInt8], _ lower: StaticString) -> Bool {
    guard bytes.count == lower.utf8CodeUnitCount else { return false }
    let literal = lower.utf8Start
    for i in 0..<bytes.count where (bytes[i] | 0x20) != literal[i] && bytes[i] != literal[i] { return false }
    return true
}

/// Percent-decodes a path (`+` stays literal, unlike in queries); the common undecoded case copies once.
func decodePath(_ bytes: ArraySlice<UInt8>) -> String {
    guard bytes.contains(UInt8(ascii: "%")) else { return String(decoding: bytes, as: UTF8.self) }
    var out: [UInt8] = []
    out.reserveCapacity(bytes.count)
    var i = bytes.startIndex
    while i < bytes.endIndex {
        let byte = bytes[i]
        if byte == UInt8(ascii: "%"), i + 2 < bytes.endIndex,
           let hi = hexDigit(bytes[i + 1]), let lo = hexDigit(bytes[i + 2]) {
            out.append(hi << 4 | lo)
            i += 3
        } else {
            out.append(byte)
            i += 1
        }
    }
    return String(decoding: out, as: UTF8.self)
}

private func hexDigit(_ c: UInt8) -> UInt8? {
    switch c {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
    default: nil
    }
}

extension String {
    /// The string without leading and trailing spaces and tabs.
    var trimmingSpaces: String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" { s = s.dropLast() }
        return String(s)
    }
}
