/// Why a request could not be accepted; each case maps to one status code and closes the connection.
public enum HTTPParseError: Error, Equatable, Sendable {
    /// The bytes are not a valid HTTP/1.x request (400).
    case malformed(String)
    /// Request line plus headers exceed the limit (431).
    case headerTooLarge(limit: Int)
    /// The body exceeds the limit (413); `declared` is the Content-Length when known up front.
    case bodyTooLarge(limit: Int, declared: Int?)
    /// Conflicting framing (Content-Length with Transfer-Encoding, or differing Content-Lengths): a smuggling guard (400).
    case conflictingFraming(String)
    /// A transfer coding other than `chunked` (501).
    case unsupportedTransferEncoding(String)
    /// An `Expect` value other than `100-continue` (417).
    case unsupportedExpectation(String)
    /// A method the server cannot serve on this connection, like CONNECT (501).
    case unsupportedMethod(String)
    /// An HTTP major version other than 1 (505).
    case unsupportedVersion(major: Int, minor: Int)

    /// The status code sent for this error.
    public var status: Int {
        switch self {
        case .malformed, .conflictingFraming: 400
        case .headerTooLarge: 431
        case .bodyTooLarge: 413
        case .unsupportedTransferEncoding, .unsupportedMethod: 501
        case .unsupportedExpectation: 417
        case .unsupportedVersion: 505
        }
    }

    /// A sentence for the JSON error body saying what was expected and what arrived.
    public var message: String {
        switch self {
        case .malformed(let detail): "malformed request: \(detail)"
        case .headerTooLarge(let limit): "request header section exceeds the limit of \(limit) bytes"
        case .bodyTooLarge(let limit, let declared?): "request body of \(declared) bytes exceeds the limit of \(limit) bytes"
        case .bodyTooLarge(let limit, nil): "request body exceeds the limit of \(limit) bytes"
        case .conflictingFraming(let detail): "ambiguous request framing: \(detail)"
        case .unsupportedTransferEncoding(let coding): "unsupported Transfer-Encoding '\(coding)': only chunked is accepted"
        case .unsupportedExpectation(let value): "unsupported Expect '\(value)': only 100-continue is accepted"
        case .unsupportedMethod(let method): "method \(method) is not supported"
        case .unsupportedVersion(let major, let minor): "HTTP/\(major).\(minor) is not supported: this server speaks HTTP/1.0 and HTTP/1.1"
        }
    }
}
