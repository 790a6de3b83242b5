import Synchronization

/// W3C Trace Context (https://www.w3.org/TR/trace-context/) for one request: the caller's trace continued, or a new one.
///
/// The server is one span of the trace: it keeps the trace id, takes a new span id of its own, and remembers the
/// caller's span as its parent. The `traceparent` it echoes names the server's span, as a vendor forwarding the
/// request would (spec 3.2.2.3: the parent-id is replaced by the vendor's own span id).
public struct TraceContext: Sendable, Equatable {
    /// 32 lowercase hex digits, not all zero.
    public var traceID: String
    /// The server's span: 16 lowercase hex digits, not all zero.
    public var spanID: String
    /// The caller's span id when the trace came in with the request, nil when it started here.
    public var parentID: String?
    /// Trace flags, two lowercase hex digits (`01` = sampled).
    public var flags: String

    /// The header value naming this server's span: `00-<trace-id>-<span-id>-<flags>`.
    public var traceparent: String { "00-\(traceID)-\(spanID)-\(flags)" }

    /// Continues the trace of a valid `traceparent` value, or starts a new one (absent or invalid value: the spec
    /// says to ignore it and restart the trace).
    public init(continuing header: String?) {
        if let header, let parsed = TraceContext.parse(header) {
            traceID = parsed.traceID
            parentID = parsed.parentID
            flags = parsed.flags
        } else {
            traceID = TraceIDs.hex(TraceIDs.next(), TraceIDs.next())
            parentID = nil
            // This server records every request in its access log, so a trace it starts is sampled.
            flags = "01"
        }
        spanID = TraceIDs.hex(TraceIDs.next())
    }

    /// The trace of a request's headers: exactly one `traceparent` field is continued; none or several start anew.
    public init(continuingFrom headers: HTTPHeaders) {
        var value: String?
        var count = 0
        for field in headers.fields where field.name.utf8.count == 11 && field.name.caseInsensitiveEquals("traceparent") {
            value = field.value
            count += 1
        }
        self.init(continuing: count == 1 ? value : nil)
    }

    /// The trace id, parent id and flags of a valid `traceparent` value, nil when it breaks the format.
    ///
    /// Version 00 is exactly 55 characters; a later version may append `-` and more, which is ignored (spec 3.2.4);
    /// version ff, uppercase hex and all-zero ids are invalid.
    public static func parse(_ value: String) -> (traceID: String, parentID: String, flags: String)? {
        let bytes = Array(value.utf8)
        guard bytes.count >= 55 else { return nil }
        guard isLowerHex(bytes[0..<2]), !(bytes[0] == UInt8(ascii: "f") && bytes[1] == UInt8(ascii: "f")) else { return nil }
        let version00 = bytes[0] == UInt8(ascii: "0") && bytes[1] == UInt8(ascii: "0")
        if version00 ? bytes.count != 55 : (bytes.count > 55 && bytes[55] != UInt8(ascii: "-")) { return nil }
        let dash = UInt8(ascii: "-")
        guard bytes[2] == dash, bytes[35] == dash, bytes[52] == dash else { return nil }
        let trace = bytes[3..<35], parent = bytes[36..<52], flags = bytes[53..<55]
        guard isLowerHex(trace), isLowerHex(parent), isLowerHex(flags),
              trace.contains(where: { $0 != UInt8(ascii: "0") }), parent.contains(where: { $0 != UInt8(ascii: "0") }) else { return nil }
        return (String(decoding: trace, as: UTF8.self), String(decoding: parent, as: UTF8.self), String(decoding: flags, as: UTF8.self))
    }

    private static func isLowerHex(_ bytes: ArraySlice<UInt8>) -> Bool {
        bytes.allSatisfy { ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9")) || ($0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "f")) }
    }
}

/// Random-looking, never-zero 64-bit ids without a system call per request: SplitMix64 over a counter with a random
/// start (unique within the process, uniformly spread, as the spec asks of trace and span ids).
enum TraceIDs {
    private static let counter = Atomic<UInt64>({
        var generator = SystemRandomNumberGenerator()
        return generator.next()
    }())

    /// The next id.
    static func next() -> UInt64 {
        var z = counter.wrappingAdd(0x9E37_79B9_7F4A_7C15, ordering: .relaxed).newValue
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        z ^= z >> 31
        return z == 0 ? 1 : z
    }

    /// The words as lowercase hex, 16 digits each.
    static func hex(_ words: UInt64...) -> String {
        let digits = Array("0123456789abcdef".utf8)
        return String(unsafeUninitializedCapacity: 16 * words.count) { buffer in
            var i = 0
            for word in words {
                for shift in stride(from: 60, through: 0, by: -4) {
                    buffer[i] = digits[Int((word >> UInt64(shift)) & 15)]
                    i += 1
                }
            }
            return i
        }
    }
}
