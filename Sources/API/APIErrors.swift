import HTTP
import Infrastructure

/// An error that knows the HTTP status and client message it maps to.
///
/// Domain modules stay HTTP-free: the API module conforms their error types in extensions.
public protocol HTTPErrorConvertible: Error {
    /// Status code (4xx/5xx).
    var httpStatus: Int { get }
    /// Message for the `{"error": ...}` body: what was expected and what arrived.
    var httpMessage: String { get }
    /// Extra headers (e.g. `Retry-After`, `Allow`).
    var httpHeaders: HTTPHeaders { get }
}

extension HTTPErrorConvertible {
    /// No extra headers by default.
    public var httpHeaders: HTTPHeaders { HTTPHeaders() }

    /// The JSON error response for this error.
    public var response: HTTPResponse { .jsonError(httpStatus, httpMessage, headers: httpHeaders) }
}

/// A ready-made API error for handlers: status, message, headers.
public struct APIError: HTTPErrorConvertible, Equatable, CustomStringConvertible {
    /// Status code.
    public var httpStatus: Int
    /// Client-facing message.
    public var httpMessage: String
    /// Extra headers.
    public var httpHeaders: HTTPHeaders

    /// An error with any status.
    public init(status: Int, _ message: String, headers: HTTPHeaders = HTTPHeaders()) {
        httpStatus = status
        httpMessage = message
        httpHeaders = headers
    }

    /// `status: message`.
    public var description: String { "\(httpStatus): \(httpMessage)" }

    /// Equal status, message and header fields.
    public static func == (a: APIError, b: APIError) -> Bool {
        a.httpStatus == b.httpStatus && a.httpMessage == b.httpMessage
            && a.httpHeaders.fields.map { "\($0.name):\($0.value)" } == b.httpHeaders.fields.map { "\($0.name):\($0.value)" }
    }

    /// 400.
    public static func badRequest(_ message: String) -> APIError { APIError(status: 400, message) }
    /// 401.
    public static func unauthorized(_ message: String) -> APIError { APIError(status: 401, message, headers: ["WWW-Authenticate": "Bearer"]) }
    /// 403.
    public static func forbidden(_ message: String) -> APIError { APIError(status: 403, message) }
    /// 415.
    public static func unsupportedMediaType(_ message: String) -> APIError { APIError(status: 415, message) }
    /// 503, with `Retry-After` seconds when given.
    public static func unavailable(_ message: String, retryAfter seconds: Int? = nil) -> APIError {
        APIError(status: 503, message, headers: seconds.map { ["Retry-After": String($0)] } ?? HTTPHeaders())
    }
    /// 504.
    public static func timeout(_ message: String) -> APIError { APIError(status: 504, message) }
}

extension JSONError: HTTPErrorConvertible {
    /// Malformed JSON is the client's fault.
    public var httpStatus: Int { 400 }
    /// `invalid JSON: ... at byte N`.
    public var httpMessage: String { "invalid JSON: \(description)" }
}

/// A closed set of one codec's failure kinds, each knowing the HTTP status it maps to.
public protocol CodecErrorKind: Equatable, Sendable {
    /// The status a failure of this kind maps to.
    var httpStatus: Int { get }
}

/// Why a codec refused a body: a kind from the codec's closed set and a message saying what was expected and what arrived.
public typealias CodecError<Kind: CodecErrorKind> = CodedError<Kind>

extension CodedError: HTTPErrorConvertible where Kind: CodecErrorKind {
    /// The kind of failure (the codecs' name for `code`).
    public var kind: Kind { code }
    /// The kind's status.
    public var httpStatus: Int { code.httpStatus }
    /// The message.
    public var httpMessage: String { message }
}
