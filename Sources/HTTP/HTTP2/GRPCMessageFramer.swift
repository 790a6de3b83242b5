/// Why a gRPC request body could not be split into messages.
public enum GRPCFramingError: Error, Equatable, Sendable {
    /// A message declares more bytes than the server accepts (RESOURCE_EXHAUSTED).
    case messageTooLarge(declared: Int, limit: Int)
    /// The compressed flag is set and no compression is implemented (UNIMPLEMENTED).
    case compressed
    /// The flag byte is neither 0 nor 1.
    case invalidFlag(UInt8)
    /// The body ended inside a message (INTERNAL, as gRPC servers answer).
    case truncated(missing: Int)

    /// The status a server answers with.
    public var status: GRPCStatus {
        switch self {
        case .messageTooLarge(let declared, let limit):
            GRPCStatus(.resourceExhausted, "message of \(declared) bytes exceeds the limit of \(limit) bytes (--grpc-max-message-bytes)")
        case .compressed:
            GRPCStatus(.unimplemented, "compressed messages are not supported: send them uncompressed (grpc-accept-encoding: identity)")
        case .invalidFlag(let flag):
            GRPCStatus(.internal, "invalid message flag \(flag): expected 0 (uncompressed)")
        case .truncated(let missing):
            GRPCStatus(.internal, "request body ends \(missing) bytes short of its last message")
        }
    }
}

/// Splits a gRPC body, arriving in DATA frames of any size, into length-prefixed messages
/// (1 flag byte, 4-byte big-endian length, payload). The size is checked from the prefix, before buffering.
public struct GRPCMessageFramer: Sendable {
    /// The largest message accepted.
    public let maxMessageBytes: Int
    private var header: [UInt8] = []
    private var payload: [UInt8] = []
    private var expected = -1
    /// Messages completed so far, in order.
    public private(set) var messages: [[UInt8]] = []

    /// A framer refusing messages over `maxMessageBytes`.
    public init(maxMessageBytes: Int) { self.maxMessageBytes = maxMessageBytes }

    /// Consumes the next chunk of body bytes.
    public mutating func append(_ chunk: UnsafeRawBufferPointer) throws(GRPCFramingError) {
        var index = 0
        while index < chunk.count {
            if expected < 0 {
                let take = min(5 - header.count, chunk.count - index)
                header.append(contentsOf: UnsafeRawBufferPointer(rebasing: chunk[index..<(index + take)]))
                index += take
                guard header.count == 5 else { return }
                switch header[0] {
                case 0: break
                case 1: throw .compressed
                default: throw .invalidFlag(header[0])
                }
                let length = Int(header[1]) << 24 | Int(header[2]) << 16 | Int(header[3]) << 8 | Int(header[4])
                guard length <= maxMessageBytes else { throw .messageTooLarge(declared: length, limit: maxMessageBytes) }
                expected = length
                payload = []
                payload.reserveCapacity(length)
            }
            let take = min(expected - payload.count, chunk.count - index)
            // A rebased buffer appends with one memcpy, where a slice would go element by element.
            payload.append(contentsOf: UnsafeRawBufferPointer(rebasing: chunk[index..<(index + take)]))
            index += take
            if payload.count == expected {
                messages.append(payload)
                payload = []
                header.removeAll(keepingCapacity: true)
                expected = -1
            }
        }
    }

    /// Fails when the body ended inside a message.
    public func finish() throws(GRPCFramingError) {
        if expected >= 0 { throw .truncated(missing: expected - payload.count) }
        if !header.isEmpty { throw .truncated(missing: 5 - header.count) }
    }

    /// `message` with its 5-byte prefix (uncompressed).
    public static func frame(_ message: [UInt8]) -> [UInt8] {
        let n = UInt32(message.count)
        var out: [UInt8] = [0, UInt8(n >> 24), UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)]
        out.reserveCapacity(5 + message.count)
        out.append(contentsOf: message)
        return out
    }
}

/// The `grpc-timeout` header: 1-8 ASCII digits and a unit (H, M, S, m, u, n).
public enum GRPCTimeout {
    /// The duration, or nil when the value is malformed.
    public static func parse(_ value: String) -> Duration? {
        let bytes = Array(value.utf8)
        guard bytes.count >= 2, bytes.count <= 9, let unit = bytes.last else { return nil }
        var amount: Int64 = 0
        for digit in bytes.dropLast() {
            guard digit >= 0x30 && digit <= 0x39 else { return nil }
            amount = amount * 10 + Int64(digit - 0x30)
        }
        switch unit {
        case UInt8(ascii: "H"): return .seconds(amount * 3600)
        case UInt8(ascii: "M"): return .seconds(amount * 60)
        case UInt8(ascii: "S"): return .seconds(amount)
        case UInt8(ascii: "m"): return .milliseconds(amount)
        case UInt8(ascii: "u"): return .microseconds(amount)
        case UInt8(ascii: "n"): return .nanoseconds(amount)
        default: return nil
        }
    }
}
