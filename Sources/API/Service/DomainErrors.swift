import HTTP
import Imaging
import Serving

/// Serving's refusals as HTTP: unknown names 404, bad tensors 400, overload 503 with Retry-After, queue timeout 504;
/// repository writes: an existing version or no version on disk 409, a read-only repository 403, no space or no
/// memory budget left 507.
extension ServingError: HTTPErrorConvertible {
    /// Status for each case.
    public var httpStatus: Int {
        switch self {
        case .modelNotFound, .versionNotFound: return 404
        case .invalidInput, .invalidConfig, .loadFailed, .digestMismatch, .invalidName: return 400
        case .notReady, .queueFull, .shuttingDown: return 503
        case .timeout: return 504
        case .versionExists, .noVersionOnDisk: return 409
        case .repositoryReadOnly: return 403
        case .insufficientStorage, .memoryBudgetExceeded: return 507
        case .executionFailed, .io: return 500
        }
    }

    /// The domain message, which already says what was expected and what arrived.
    public var httpMessage: String { description }

    /// Retry-After on overload, so clients back off instead of hammering a full queue.
    public var httpHeaders: HTTPHeaders {
        switch self {
        case .queueFull, .notReady, .shuttingDown: return ["Retry-After": "1"]
        default: return HTTPHeaders()
        }
    }
}

/// Image problems: unknown formats 415, bombs 413, broken files 400; a bad server-side image config is 500.
extension ImagingError: HTTPErrorConvertible {
    /// Status for each case.
    public var httpStatus: Int {
        switch self {
        case .unsupportedFormat: return 415
        case .tooLarge, .tooManyBytes: return 413
        case .corrupt: return 400
        case .invalidConfig: return 500
        }
    }

    /// The decoder's explanation.
    public var httpMessage: String { description }
}

/// An image refused inside a request: the status of its reason, the message naming the image.
extension ImageInputError: HTTPErrorConvertible {
    /// The reason's status.
    public var httpStatus: Int { reason.httpStatus }
    /// `image N: why`.
    public var httpMessage: String { description }
}
