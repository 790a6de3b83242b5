import Infrastructure
/// Writes responses as HTTP/1.1 bytes; adds the framing and identity headers the server owns.
enum ResponseSerializer {
    /// `HTTP/1.1 <code> <reason>\r\n` for every code 100...599, built once.
    static let statusLines: [[UInt8]] = (0..<600).map { code in Array("HTTP/1.1 \(code) \(reasonPhrase(code))\r\n".utf8) }

    /// The interim response sent before reading a body the client holds back with `Expect: 100-continue`.
    static let continueResponse: [UInt8] = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)

    /// Per-request facts the serializer needs besides the response itself.
    struct Context {
        /// `Date:` value for this second.
        var date: [UInt8]
        /// Complete `Server: name\r\n` line.
        var serverLine: [UInt8]
        /// Id echoed as `X-Request-ID` unless the handler set one.
        var requestID: String
        /// The trace whose `traceparent` (naming the server's span) is sent, unless the handler set one.
        var trace: TraceContext? = nil
        /// Whether the connection stays open after this response.
        var keepAlive: Bool
        /// HTTP/1.0 clients need `Connection: keep-alive` spelled out.
        var http10: Bool
        /// HEAD responses carry headers only.
        var isHead: Bool
    }

    /// Appends the status line and headers to `out`, and the body unless `detachBody`; returns whether the
    /// handler asked to close the connection and whether the body still has to be written separately.
    static func append(_ response: HTTPResponse, context: Context, to out: inout ByteWriter, detachLargeBody: Int) -> (handlerClosed: Bool, bodyDetached: Bool) {
        let status = (100..<600).contains(response.status) ? response.status : 500
        out.append(statusLines[status])
        var handlerClosed = false
        var sawServer = false, sawDate = false, sawID = false, sawTrace = false
        for field in response.headers.fields {
            var name = field.name, value = field.value
            name.withUTF8 { n in
                value.withUTF8 { v in
                    guard isValidHeader(name: n, value: v) else { return }
                    switch n.count {
                    case 4 where lowercaseEquals(n, "date"): sawDate = true
                    case 6 where lowercaseEquals(n, "server"): sawServer = true
                    case 11 where lowercaseEquals(n, "traceparent"): sawTrace = true
                    case 10 where lowercaseEquals(n, "connection"):
                        if field.value.lowercased().contains("close") { handlerClosed = true }
                        return
                    case 12 where lowercaseEquals(n, "x-request-id"): sawID = true
                    case 14 where lowercaseEquals(n, "content-length"): return
                    case 17 where lowercaseEquals(n, "transfer-encoding"): return
                    default: break
                    }
                    out.append(n)
                    out.append(UInt8(ascii: ":"), UInt8(ascii: " "))
                    out.append(v)
                    out.append(13, 10)
                }
            }
        }
        let bodyAllowed = status >= 200 && status != 204 && status != 304
        if status >= 200 && status != 204 {
            out.append(contentLengthPrefix)
            out.appendDecimal(response.body.count)
            out.append(13, 10)
        }
        if !sawDate {
            out.append(datePrefix)
            out.append(context.date)
            out.append(13, 10)
        }
        if !sawServer { out.append(context.serverLine) }
        if !sawID {
            out.append(requestIDPrefix)
            out.append(string: context.requestID)
            out.append(13, 10)
        }
        if !sawTrace, let trace = context.trace {
            out.append(traceparentPrefix)
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: TraceContext.headerLength) { buffer in
                out.append(UnsafeBufferPointer(rebasing: buffer[..<trace.write(into: buffer)]))
            }
            out.append(13, 10)
        }
        if !context.keepAlive || handlerClosed {
            out.append(connectionClose)
        } else if context.http10 {
            out.append(connectionKeepAlive)
        }
        out.append(13, 10)
        guard bodyAllowed, !context.isHead, !response.body.isEmpty else { return (handlerClosed, false) }
        if response.body.count > detachLargeBody { return (handlerClosed, true) }
        out.append(response.body)
        return (handlerClosed, false)
    }

    /// Rejects names and values that would split the response (CR, LF, NUL) or are not tokens.
    static func isValidHeader(name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) -> Bool {
        guard !name.isEmpty else { return false }
        if name.contains(where: { $0 <= 0x20 || $0 == UInt8(ascii: ":") || $0 >= 0x7F }) { return false }
        return !value.contains(where: { $0 == 13 || $0 == 10 || $0 == 0 })
    }

    /// ASCII case-insensitive comparison against a lowercase literal.
    @inline(__always)
    static func lowercaseEquals(_ bytes: UnsafeBufferPointer<UInt8>, _ lower: StaticString) -> Bool {
        guard bytes.count == lower.utf8CodeUnitCount else { return false }
        let literal = lower.utf8Start
        for i in 0..<bytes.count where (bytes[i] | 0x20) != literal[i] && bytes[i] != literal[i] { return false }
        return true
    }

    /// A JSON `{"error": "..."}` response with the message escaped.
    static func errorResponse(status: Int, message: String) -> HTTPResponse {
        HTTPResponse(status: status, headers: ["Content-Type": "application/json"], body: jsonErrorBody(message))
    }

    /// `{"error": "<message>"}` with JSON escaping.
    static func jsonErrorBody(_ message: String) -> [UInt8] {
        var body: [UInt8] = Array("{\"error\": \"".utf8)
        for b in message.utf8 {
            switch b {
            case UInt8(ascii: "\""): body.append(contentsOf: [92, 34])
            case UInt8(ascii: "\\"): body.append(contentsOf: [92, 92])
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                body.append(contentsOf: [92, UInt8(ascii: "u"), 48, 48, hex[Int(b >> 4)], hex[Int(b & 15)]])
            default: body.append(b)
            }
        }
        body.append(contentsOf: Array("\"}".utf8))
        return body
    }

    private static let contentLengthPrefix = Array("Content-Length: ".utf8)
    private static let datePrefix = Array("Date: ".utf8)
    private static let requestIDPrefix = Array("X-Request-ID: ".utf8)
    private static let traceparentPrefix = Array("traceparent: ".utf8)
    private static let connectionClose = Array("Connection: close\r\n".utf8)
    private static let connectionKeepAlive = Array("Connection: keep-alive\r\n".utf8)

    /// Reason phrases from RFC 9110 for the codes a model server uses; others get a generic phrase by class.
    static func reasonPhrase(_ code: Int) -> String {
        switch code {
        case 100: "Continue"
        case 101: "Switching Protocols"
        case 200: "OK"
        case 201: "Created"
        case 202: "Accepted"
        case 204: "No Content"
        case 206: "Partial Content"
        case 301: "Moved Permanently"
        case 302: "Found"
        case 304: "Not Modified"
        case 307: "Temporary Redirect"
        case 308: "Permanent Redirect"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 406: "Not Acceptable"
        case 408: "Request Timeout"
        case 409: "Conflict"
        case 410: "Gone"
        case 411: "Length Required"
        case 412: "Precondition Failed"
        case 413: "Content Too Large"
        case 414: "URI Too Long"
        case 415: "Unsupported Media Type"
        case 416: "Range Not Satisfiable"
        case 417: "Expectation Failed"
        case 422: "Unprocessable Content"
        case 425: "Too Early"
        case 426: "Upgrade Required"
        case 429: "Too Many Requests"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        case 505: "HTTP Version Not Supported"
        case 100..<200: "Informational"
        case 200..<300: "Success"
        case 300..<400: "Redirection"
        case 400..<500: "Client Error"
        default: "Server Error"
        }
    }
}
