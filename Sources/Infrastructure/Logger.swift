import Glibc

/// Severity of a log line, the one level enum of the code base; lines below the configured level are dropped.
public enum LogLevel: Int, Sendable, Comparable, CaseIterable, CustomStringConvertible {
    /// Detail for debugging.
    case debug
    /// Normal operation, including access lines and lifecycle events (loads, swaps).
    case info
    /// Something unexpected that the server survived.
    case warning
    /// A failure (of a request, or one that leaves a model or version unavailable).
    case error
    /// Nothing is logged (only meaningful as a logger's level).
    case off

    /// Parses `debug`, `info`, `warn`/`warning`, `error` or `off` (case-insensitive).
    public init?(name: String) {
        switch name.lowercased() {
        case "debug": self = .debug
        case "info": self = .info
        case "warn", "warning": self = .warning
        case "error": self = .error
        case "off", "none": self = .off
        default: return nil
        }
    }

    /// The lowercase name written in log lines (`warn` for `.warning`, as the `--log-level` flag spells it).
    public var name: String {
        switch self {
        case .debug: "debug"
        case .info: "info"
        case .warning: "warn"
        case .error: "error"
        case .off: "off"
        }
    }

    /// Same as `name`.
    public var description: String { name }

    /// Orders by severity.
    public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// Line format of every log line (access and application).
public enum LogFormat: String, Sendable, CaseIterable {
    /// One JSON object per line.
    case json
    /// `key=value` pairs per line.
    case logfmt
}

/// Where finished log lines go: the one sink every log line of the process passes through.
public enum LogSink: Sendable {
    /// Whole lines written with write(2) (stderr by default), so nothing sits in a stdio buffer.
    case fileDescriptor(Int32)
    /// Each line's level, message and fields handed to a closure (tests record them).
    case recorder(@Sendable (LogLevel, String, [(String, String)]) -> Void)
}

/// The one logger: structured lines (logfmt or JSON) at or above `level`, to its sink.
public struct Logger: Sendable {
    /// Lines below this level are dropped.
    public var level: LogLevel
    /// Output format.
    public var format: LogFormat
    /// Where lines go.
    public var sink: LogSink

    /// A logger at `level` in `format`, writing to `fileDescriptor` (stderr unless told otherwise).
    public init(level: LogLevel = .info, format: LogFormat = .logfmt, fileDescriptor: Int32 = 2) {
        self.level = level
        self.format = format
        sink = .fileDescriptor(fileDescriptor)
    }

    /// A logger at `level` handing every line to `record` instead of writing it.
    public init(level: LogLevel = .debug, record: @escaping @Sendable (LogLevel, String, [(String, String)]) -> Void) {
        self.level = level
        format = .logfmt
        sink = .recorder(record)
    }

    /// A logger that drops everything.
    public static let disabled = Logger(level: .off)

    /// True when a line at `level` would be written.
    public func enabled(_ level: LogLevel) -> Bool { level >= self.level && level != .off }

    /// Writes `message` with extra `fields` (already strings; numbers are written unquoted in JSON when numeric).
    public func log(_ level: LogLevel, _ message: String, _ fields: [(String, String)] = []) {
        guard enabled(level) else { return }
        switch sink {
        case .recorder(let record):
            record(level, message, fields)
        case .fileDescriptor(let fd):
            var line = LogLine(format: format)
            line.begin(time: WallClock.iso8601Now(), level: level.name, message: message)
            for (key, value) in fields { line.field(dynamicKey: key, value) }
            line.end()
            writeAll(fd, line.out.buffer)
            line.out.free()
        }
    }

    /// Writes lines already formatted by `LogLine` in this logger's format (the event loops' batched access lines).
    public func write(lines: UnsafeRawBufferPointer) {
        guard case .fileDescriptor(let fd) = sink else { return }
        writeAll(fd, lines)
    }

    /// Logs `message` at `level` (lets a `Logger` stand where a `(LogLevel, String)` callback was expected).
    public func callAsFunction(_ level: LogLevel, _ message: String) { log(level, message) }

    /// Logs at debug level.
    public func debug(_ message: String, _ fields: [(String, String)] = []) { log(.debug, message, fields) }
    /// Logs at info level.
    public func info(_ message: String, _ fields: [(String, String)] = []) { log(.info, message, fields) }
    /// Logs at warning level.
    public func warn(_ message: String, _ fields: [(String, String)] = []) { log(.warning, message, fields) }
    /// Logs at error level.
    public func error(_ message: String, _ fields: [(String, String)] = []) { log(.error, message, fields) }
}

/// Builds one log line in either format into a `ByteWriter`, escaping values as that format needs.
public struct LogLine {
    /// The format being written.
    public let format: LogFormat
    /// The line so far; the caller owns (and frees) the memory.
    public var out: ByteWriter
    private var first = true

    /// A line written into fresh memory (free `out` afterwards).
    public init(format: LogFormat) { self.init(format: format, writer: ByteWriter(capacity: 256)) }

    /// A line appended to an existing writer.
    public init(format: LogFormat, writer: ByteWriter) {
        self.format = format
        out = writer
    }

    /// The bytes written so far (a copy; for tests and the non-hot logger).
    public var bytes: [UInt8] { out.array }

    /// Starts the line with time, level and message.
    public mutating func begin(time: [UInt8], level: String, message: String) {
        if format == .json { out.append(UInt8(ascii: "{")) }
        first = true
        field("time", bytes: time)
        field("level", level)
        field("msg", message)
    }

    /// Adds a string field, quoted and escaped.
    public mutating func field(_ key: StaticString, _ value: String) {
        var value = value
        value.withUTF8 { v in stringField(key, v) }
    }

    /// Adds a string field with a runtime key.
    public mutating func field(dynamicKey key: String, _ value: String) {
        var key = key, value = value
        key.withUTF8 { k in value.withUTF8 { v in stringField(k, v) } }
    }

    /// Adds a string field given as bytes.
    public mutating func field(_ key: StaticString, bytes value: [UInt8]) {
        value.withUnsafeBufferPointer { v in stringField(key, v) }
    }

    /// Adds an unquoted numeric field.
    public mutating func number(_ key: StaticString, _ value: Int) {
        separator()
        appendKey(UnsafeBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount))
        out.appendDecimal(value)
    }

    /// Adds a duration in milliseconds with three decimals, from nanoseconds.
    public mutating func milliseconds(_ key: StaticString, nanoseconds: UInt64) {
        separator()
        appendKey(UnsafeBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount))
        let micros = Int(nanoseconds / 1000)
        out.appendDecimal(micros / 1000)
        out.append(UInt8(ascii: "."))
        let frac = micros % 1000
        out.append(UInt8(ascii: "0") + UInt8(frac / 100))
        out.append(UInt8(ascii: "0") + UInt8(frac / 10 % 10), UInt8(ascii: "0") + UInt8(frac % 10))
    }

    /// Ends the line with a newline.
    public mutating func end() {
        if format == .json { out.append(UInt8(ascii: "}")) }
        out.append(UInt8(ascii: "\n"))
    }

    @inline(__always)
    private mutating func separator() {
        if first { first = false; return }
        out.append(format == .json ? UInt8(ascii: ",") : UInt8(ascii: " "))
    }

    @inline(__always)
    private mutating func appendKey(_ key: UnsafeBufferPointer<UInt8>) {
        if format == .json {
            out.append(UInt8(ascii: "\""))
            out.append(key)
            out.append(UInt8(ascii: "\""), UInt8(ascii: ":"))
        } else {
            out.append(key)
            out.append(UInt8(ascii: "="))
        }
    }

    private mutating func stringField(_ key: StaticString, _ value: UnsafeBufferPointer<UInt8>) {
        stringField(UnsafeBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount), value)
    }

    /// Appends `key` and the value; the common case (nothing to escape) is one bulk copy.
    private mutating func stringField(_ key: UnsafeBufferPointer<UInt8>, _ value: UnsafeBufferPointer<UInt8>) {
        separator()
        appendKey(key)
        if format == .json {
            out.append(UInt8(ascii: "\""))
            if value.contains(where: { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C || $0 == 0x7F }) {
                for byte in value { appendJSONEscaped(byte) }
            } else {
                out.append(value)
            }
            out.append(UInt8(ascii: "\""))
        } else {
            let needsQuotes = value.isEmpty || value.contains { $0 <= 0x20 || $0 == 0x22 || $0 == 0x3D || $0 == 0x5C || $0 == 0x7F }
            guard needsQuotes else { out.append(value); return }
            out.append(UInt8(ascii: "\""))
            for byte in value { appendJSONEscaped(byte) }
            out.append(UInt8(ascii: "\""))
        }
    }

    /// JSON string escaping; also used inside quoted logfmt values so control bytes never reach the terminal raw.
    private mutating func appendJSONEscaped(_ byte: UInt8) {
        switch byte {
        case UInt8(ascii: "\""): out.append(UInt8(ascii: "\\"), UInt8(ascii: "\""))
        case UInt8(ascii: "\\"): out.append(UInt8(ascii: "\\"), UInt8(ascii: "\\"))
        case UInt8(ascii: "\n"): out.append(UInt8(ascii: "\\"), UInt8(ascii: "n"))
        case UInt8(ascii: "\r"): out.append(UInt8(ascii: "\\"), UInt8(ascii: "r"))
        case UInt8(ascii: "\t"): out.append(UInt8(ascii: "\\"), UInt8(ascii: "t"))
        case 0..<0x20, 0x7F:
            let hex: StaticString = "0123456789abcdef"
            out.append(UInt8(ascii: "\\"), UInt8(ascii: "u"))
            out.append(UInt8(ascii: "0"), UInt8(ascii: "0"))
            out.append(hex.utf8Start[Int(byte >> 4)], hex.utf8Start[Int(byte & 15)])
        default: out.append(byte)
        }
    }
}

/// Writes every byte to `fd`, retrying on EINTR and short writes; gives up silently on other errors.
func writeAll(_ fd: Int32, _ raw: UnsafeRawBufferPointer) {
    guard let start = raw.baseAddress else { return }
    var offset = 0
    while offset < raw.count {
        let written = write(fd, start + offset, raw.count - offset)
        if written < 0 {
            if errno == EINTR { continue }
            return
        }
        offset += written
    }
}
