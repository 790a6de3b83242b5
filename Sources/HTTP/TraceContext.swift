import Synchronization

/// W3C Trace Context (https://www.w3.org/TR/trace-context/) for one request: the caller's trace continued, or a new one.
///
/// The server is one span of the trace: it keeps the trace id, takes a new span id of its own, and remembers the
/// caller's span as its parent. The `traceparent` it echoes names the server's span, as a vendor forwarding the
/// request would (spec 3.2.2.3: the parent-id is replaced by the vendor's own span id).
public struct TraceContext: Sendable, Equatable {
    // Held as integers, so a request's trace costs no allocation; hex is written only where it is sent or logged.
    /// The trace id's high and low 64 bits (never both zero).
    public var traceHigh: UInt64
    /// See `traceHigh`.
    public var traceLow: UInt64
    /// The server's span id (never zero).
    public var span: UInt64
    /// The caller's span id, 0 when the trace started here.
    public var parentSpan: UInt64
    /// Trace flags (bit 0 = sampled).
    public var flagBits: UInt8

    /// 32 lowercase hex digits, not all zero.
    public var traceID: String { TraceIDs.hex(traceHigh, traceLow) }
    /// The server's span: 16 lowercase hex digits, not all zero.
    public var spanID: String { TraceIDs.hex(span) }
    /// The caller's span id when the trace came in with the request, nil when it started here.
    public var parentID: String? { parentSpan == 0 ? nil : TraceIDs.hex(parentSpan) }
    /// Trace flags, two lowercase hex digits (`01` = sampled).
    public var flags: String { String(TraceIDs.hex(UInt64(flagBits)).suffix(2)) }

    /// The header value naming this server's span: `00-<trace-id>-<span-id>-<flags>`.
    public var traceparent: String {
        String(unsafeUninitializedCapacity: TraceContext.headerLength) { write(into: $0) }
    }

    /// Length of a version-00 `traceparent` value.
    static let headerLength = 55

    /// Writes the `traceparent` value into `buffer` (at least `headerLength` bytes); returns the length.
    func write(into buffer: UnsafeMutableBufferPointer<UInt8>) -> Int {
        let dash = UInt8(ascii: "-"), zero = UInt8(ascii: "0")
        buffer[0] = zero; buffer[1] = zero; buffer[2] = dash
        TraceIDs.writeHex(traceHigh, digits: 16, into: buffer, at: 3)
        TraceIDs.writeHex(traceLow, digits: 16, into: buffer, at: 19)
        buffer[35] = dash
        TraceIDs.writeHex(span, digits: 16, into: buffer, at: 36)
        buffer[52] = dash
        TraceIDs.writeHex(UInt64(flagBits), digits: 2, into: buffer, at: 53)
        return TraceContext.headerLength
    }

    /// Continues the trace of a valid `traceparent` value, or starts a new one (absent or invalid value: the spec
    /// says to ignore it and restart the trace).
    public init(continuing header: String?) {
        if let header, let parsed = TraceContext.parseBits(header) {
            (traceHigh, traceLow, parentSpan, flagBits) = parsed
        } else {
            traceHigh = TraceIDs.next()
            traceLow = TraceIDs.next()
            parentSpan = 0
            // This server records every request in its access log, so a trace it starts is sampled.
            flagBits = 1
        }
        span = TraceIDs.next()
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

    /// The trace id, parent id and flags of a valid `traceparent` value as hex, nil when it breaks the format.
    public static func parse(_ value: String) -> (traceID: String, parentID: String, flags: String)? {
        guard let (high, low, parent, flags) = parseBits(value) else { return nil }
        return (TraceIDs.hex(high, low), TraceIDs.hex(parent), String(TraceIDs.hex(UInt64(flags)).suffix(2)))
    }

    /// `parse` as integers: trace id halves, parent span, flags.
    ///
    /// Version 00 is exactly 55 characters; a later version may append `-` and more, which is ignored (spec 3.2.4);
    /// version ff, uppercase hex and all-zero ids are invalid.
    static func parseBits(_ value: String) -> (UInt64, UInt64, UInt64, UInt8)? {
        var value = value
        return value.withUTF8 { bytes -> (UInt64, UInt64, UInt64, UInt8)? in
            guard bytes.count >= 55 else { return nil }
            let dash = UInt8(ascii: "-")
            guard let version = hexValue(bytes, 0, 2), version != 0xff else { return nil }
            if version == 0 ? bytes.count != 55 : (bytes.count > 55 && bytes[55] != dash) { return nil }
            guard bytes[2] == dash, bytes[35] == dash, bytes[52] == dash,
                  let high = hexValue(bytes, 3, 16), let low = hexValue(bytes, 19, 16),
                  let parent = hexValue(bytes, 36, 16), let flags = hexValue(bytes, 53, 2),
                  high | low != 0, parent != 0 else { return nil }
            return (high, low, parent, UInt8(flags))
        }
    }

    /// The value of `count` lowercase hex digits at `start`, nil if any is not one.
    private static func hexValue(_ bytes: UnsafeBufferPointer<UInt8>, _ start: Int, _ count: Int) -> UInt64? {
        var value: UInt64 = 0
        for i in start..<(start + count) {
            let b = bytes[i]
            let digit: UInt8
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = b - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = b - UInt8(ascii: "a") + 10
            default: return nil
            }
            value = value << 4 | UInt64(digit)
        }
        return value
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
        String(unsafeUninitializedCapacity: 16 * words.count) { buffer in
            for (i, word) in words.enumerated() { writeHex(word, digits: 16, into: buffer, at: 16 * i) }
            return 16 * words.count
        }
    }

    /// Writes the low `digits` hex digits of `word` at `offset`.
    static func writeHex(_ word: UInt64, digits: Int, into buffer: UnsafeMutableBufferPointer<UInt8>, at offset: Int) {
        var rest = word
        for i in stride(from: offset + digits - 1, through: offset, by: -1) {
            let nibble = UInt8(rest & 15)
            buffer[i] = nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
            rest >>= 4
        }
    }
}
