/// gRPC status codes (grpc/doc/statuscodes.md), sent as `grpc-status` in the trailers.
public enum GRPCStatusCode: Int, Sendable, CaseIterable {
    /// Success.
    case ok = 0
    /// The client cancelled.
    case cancelled = 1
    /// An error with no better code.
    case unknown = 2
    /// The request is malformed or names something impossible.
    case invalidArgument = 3
    /// The deadline (`grpc-timeout`) passed first.
    case deadlineExceeded = 4
    /// A named model or version does not exist.
    case notFound = 5
    /// What the request would create exists already.
    case alreadyExists = 6
    /// Authenticated but not allowed.
    case permissionDenied = 7
    /// A size or quota limit was reached.
    case resourceExhausted = 8
    /// The server is not in the state the operation needs.
    case failedPrecondition = 9
    /// A concurrency conflict aborted the operation.
    case aborted = 10
    /// A value lies outside its valid range.
    case outOfRange = 11
    /// The method or feature is not implemented.
    case unimplemented = 12
    /// A server-side invariant broke.
    case `internal` = 13
    /// Try again later (overload, draining, loading).
    case unavailable = 14
    /// Data was lost or corrupted.
    case dataLoss = 15
    /// Credentials are missing or wrong.
    case unauthenticated = 16
}

/// A gRPC outcome: a code and a human-readable message (percent-encoded on the wire).
public struct GRPCStatus: Error, Sendable, Equatable, CustomStringConvertible {
    /// The code.
    public var code: GRPCStatusCode
    /// What went wrong, empty for OK.
    public var message: String

    /// A status of `code` saying `message`.
    public init(_ code: GRPCStatusCode, _ message: String = "") {
        self.code = code
        self.message = message
    }

    /// Success.
    public static let ok = GRPCStatus(.ok)

    /// `CODE: message`.
    public var description: String { "\(code): \(message)" }

    /// The `grpc-message` value: printable ASCII except `%` as is, every other byte as `%XX` (UTF-8), per the gRPC
    /// HTTP/2 spec, so any message survives header encoding.
    public static func percentEncode(_ message: String) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(message.utf8.count)
        let hex = Array("0123456789ABCDEF".utf8)
        for byte in message.utf8 {
            if byte >= 0x20 && byte <= 0x7E && byte != 0x25 {
                out.append(byte)
            } else {
                out.append(0x25)
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0xF)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
