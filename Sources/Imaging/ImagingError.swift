/// Why an image could not be decoded or preprocessed; the API layer maps each case to an HTTP status.
public enum ImagingError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The bytes are not a format Osprey decodes (PNG or JPEG); the payload names what was found.
    case unsupportedFormat(String)
    /// The image is truncated or malformed; the payload is the decoder's reason.
    case corrupt(String)
    /// The header declares more pixels than allowed; refused before any pixel buffer is allocated.
    case tooLarge(pixels: Int, limit: Int)
    /// Decoding would need more bytes than allowed (`detail` names size and sample layout); refused before allocating.
    case tooManyBytes(bytes: Int, limit: Int, detail: String)
    /// A preprocessing configuration is invalid; the payload names the key, expected vs got.
    case invalidConfig(String)

    /// A one-line, human-readable explanation.
    public var description: String {
        switch self {
        case .unsupportedFormat(let what): return "unsupported image format: \(what) (expected PNG or JPEG)"
        case .corrupt(let why): return "corrupt image: \(why)"
        case .tooLarge(let pixels, let limit): return "image too large: \(pixels) pixels, limit is \(limit)"
        case .tooManyBytes(let bytes, let limit, let detail):
            return "image too large: decoding it needs \(bytes) bytes (\(detail)), limit is \(limit) bytes (--max-image-bytes)"
        case .invalidConfig(let why): return "invalid image config: \(why)"
        }
    }
}
