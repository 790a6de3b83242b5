import HTTP
import Serving

/// Typed errors as gRPC statuses: the same decisions as the HTTP mapping (each error's status), in gRPC's codes,
/// with the same message.
enum GRPCErrorMapping {
    /// The status for `error`; anything unmapped is INTERNAL.
    static func status(for error: Error) -> GRPCStatus {
        if let status = error as? GRPCStatus { return status }
        if let serving = error as? ServingError {
            switch serving {
            case .queueFull, .notReady, .shuttingDown: return GRPCStatus(.unavailable, serving.description)
            case .timeout: return GRPCStatus(.deadlineExceeded, serving.description)
            case .versionExists: return GRPCStatus(.alreadyExists, serving.description)
            case .noVersionOnDisk: return GRPCStatus(.failedPrecondition, serving.description)
            default: break
            }
        }
        if let convertible = error as? HTTPErrorConvertible {
            return GRPCStatus(code(forHTTPStatus: convertible.httpStatus), convertible.httpMessage)
        }
        return GRPCStatus(.internal, "internal error: \(error)")
    }

    /// gRPC's code for an HTTP status (the reverse of the table in grpc/doc/http-grpc-status-mapping.md, extended).
    static func code(forHTTPStatus status: Int) -> GRPCStatusCode {
        switch status {
        case 400, 422: .invalidArgument
        case 401: .unauthenticated
        case 403: .permissionDenied
        case 404: .notFound
        case 409: .alreadyExists
        case 413, 507: .resourceExhausted
        case 415, 501: .unimplemented
        case 429, 503: .unavailable
        case 504: .deadlineExceeded
        default: .internal
        }
    }
}
