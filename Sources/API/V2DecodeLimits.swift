import Tensor

/// Per-request bounds on what decoding an infer body may build, so a small body cannot demand unbounded work.
public struct V2DecodeLimits: Sendable, Equatable {
    /// Most BYTES elements across all inputs of one request (`--max-bytes-elements`).
    public var maxBytesElements: Int
    /// Most bytes of decoded tensor data across all inputs of one request (`--max-decoded-bytes`);
    /// BYTES elements count their string bytes.
    public var maxDecodedBytes: Int

    /// Default BYTES element limit: 65536.
    public static let defaultMaxBytesElements = 65536
    /// Default decoded-bytes limit: 256 MiB.
    public static let defaultMaxDecodedBytes = 256 << 20

    /// No limits (reading responses, tests).
    public static let unlimited = V2DecodeLimits(maxBytesElements: .max, maxDecodedBytes: .max)

    /// Limits with the given values (defaults: 65536 elements, 256 MiB).
    public init(maxBytesElements: Int = V2DecodeLimits.defaultMaxBytesElements,
                maxDecodedBytes: Int = V2DecodeLimits.defaultMaxDecodedBytes) {
        self.maxBytesElements = maxBytesElements
        self.maxDecodedBytes = maxDecodedBytes
    }
}

/// What one request has claimed so far; each input claims its share before its data is read or allocated.
struct V2DecodeBudget {
    let limits: V2DecodeLimits
    private(set) var bytesElements = 0
    private(set) var decodedBytes = 0

    init(_ limits: V2DecodeLimits) { self.limits = limits }

    /// Claims `count` elements of `datatype` declared by `label` with `shape`; throws `.limitExceeded` (413) when over.
    mutating func claim(_ datatype: V2Datatype, count: Int, shape: [Int], label: String) throws {
        if datatype == .bytes {
            bytesElements = try Self.total(bytesElements, adding: count, limit: limits.maxBytesElements,
                                           what: "\(label): shape \(shape) declares \(count) BYTES elements",
                                           unit: "BYTES elements", limitText: "per request (--max-bytes-elements)")
            return
        }
        let (bytes, overflow) = count.multipliedReportingOverflow(by: datatype.byteSize)
        try addDecoded(overflow ? Int.max : bytes, label: "\(label): shape \(shape) of \(datatype.rawValue) needs \(overflow ? "more than \(Int.max)" : String(bytes)) bytes")
    }

    /// Claims the string bytes of a decoded BYTES tensor.
    mutating func claimStrings(_ tensor: Tensor, label: String) throws {
        let bytes = tensor.strings.reduce(0) { $0 + $1.count }
        try addDecoded(bytes, label: "\(label): BYTES data holds \(bytes) bytes")
    }

    private mutating func addDecoded(_ bytes: Int, label: @autoclosure () -> String) throws {
        decodedBytes = try Self.total(decodedBytes, adding: bytes, limit: limits.maxDecodedBytes, what: label(),
                                      unit: "decoded bytes", limitText: "bytes per request (--max-decoded-bytes)")
    }

    /// `current + amount`, or `.limitExceeded` saying what claimed it, the total it would reach and the limit.
    private static func total(_ current: Int, adding amount: Int, limit: Int, what: @autoclosure () -> String, unit: String,
                              limitText: String) throws -> Int {
        let total = current.addingReportingOverflow(amount)
        guard !total.overflow, total.partialValue <= limit else {
            throw V2CodecError(.limitExceeded, "\(what()), which brings the request to "
                               + "\(total.overflow ? "more than \(Int.max)" : String(total.partialValue)) \(unit); the limit is "
                               + "\(limit) \(limitText)")
        }
        return total.partialValue
    }
}
