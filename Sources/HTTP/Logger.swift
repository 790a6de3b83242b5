#if canImport(Glibc)
import Glibc
#endif

/// Severity of a log line; lines below the configured level are dropped.
public enum LogLevel: Int, Sendable, Comparable, CaseIterable {
    /// Detail for debugging.
    case debug
    /// Normal operation, including access lines.
    case info
    /// Something unexpected that the server survived.
    case warn
    /// A failure.
    case error
    /// Nothing is logged.
    case off

    /// Parses `debug`, `info`, `warn`/`warning`, `error` or `off` (case-insensitive).
    public init?(name: String) {
        switch name.lowercased() {
        case "debug": self = .debug
        case "info": self = .info
        case "warn", "warning": self = .warn
        case "error": self = .error
        case "off", "none": self = .off
        default: return nil
        }
    }

    /// The lowercase name written in log lines.
    public var name: String {
        switch self {
        case .debug: "debug"
        case .info: "info"
        case .warn: "warn"
        case .error: "error"
        case .off: "off"
        }
    }

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

/// A tiny structured logger writing whole lines to stderr with write(2), so nothing sits in a stdio buffer.
public struct Logger: Sendable {
    /// Lines below this level are dropped.
    public var level: LogLevel
    /// Output format.
    public var format: LogFormat
    /// File descriptor lines go to (stderr by default).
    public var fileDescriptor: Int32

    /// A logger at `level` in `format`, writing to stderr unless told otherwise.
    public init(level: LogLevel = .info, format: LogFormat = .logfmt, fileDescriptor: Int32 = 2) {
        self.level = level
        self.format = format
        self.fileDescriptor = fileDescriptor
    }

    /// True when a line at `level` would be written.
    public func enabled(_ level: LogLevel) -> Bool { level >= self.level && level != .off }

    /// Writes `message` with extra `fields` (already strings; numbers are written unquoted in JSON when numeric).
    public func log(_ level: LogLevel, _ message: String, _ fields: [(String, String)] = []) {
        guard enabled(level) else { return }
        var line = LogLine(format: format)
        line.begin(time: WallClock.iso8601Now(), level: level.name, message: message)
        for (key, value) in fields { line.field(key, value) }
        line.end()
        writeAll(fileDescriptor, line.bytes)
    }

    /// Logs at debug level.
    public func debug(_ message: String, _ fields: [(String, String)] = []) { log(.debug, message, fields) }
    /// Logs at info level.
    public func info(_ message: String, _ fields: [(String, String)] = []) { log(.info, message, fields) }
    /// Logs at warn level.
    public func warn(_ message: String, _ fields: [(String, String)] = []) { log(.warn, message, fields) }
    /// Logs at error level.
    public func error(_ message: String, _ fields: [(String, String)] = []) { log(.error, message, fields) }
}

/// Builds one log line as bytes in either format, escaping values as that format needs.
struct LogLine {
    let format: LogFormat
    var bytes: [UInt8] = []
    private var first = true

    init(format: LogFormat, reserving capacity: Int = 192) {
        self.format = format
        bytes.reserveCapacity(capacity)
    }

    /// Appends to an existing buffer (taken over, so it is not copied).
    init(format: LogFormat, buffer: [UInt8]) {
        self.format = format
        bytes = buffer
    }

    /// Starts the line with time, level and message.
    mutating func begin(time: [UInt8], level: String, message: String) {
        if format == .json { bytes.append(UInt8(ascii: "{")) }
        first = true
        rawField("time", time)
        field("level", level)
        field("msg", message)
    }

    /// Adds a string field, quoted and escaped.
    mutating func field(_ key: String, _ value: String) {
        var key = key, value = value
        key.withUTF8 { k in value.withUTF8 { v in stringField(k, v) } }
    }

    /// Adds a string field given as bytes.
    mutating func field(_ key: String, bytes value: [UInt8]) {
        var key = key
        key.withUTF8 { k in value.withUnsafeBufferPointer { v in stringField(k, v) } }
    }

    /// Adds an unquoted numeric field.
    mutating func number(_ key: String, _ value: Int) {
        separator()
        var key = key
        key.withUTF8 { appendKey($0) }
        appendDecimal(&bytes, value)
    }

    /// Adds a duration in milliseconds with three decimals, from nanoseconds.
    mutating func milliseconds(_ key: String, nanoseconds: UInt64) {
        separator()
        var key = key
        key.withUTF8 { appendKey($0) }
        let micros = Int(nanoseconds / 1000)
        appendDecimal(&bytes, micros / 1000)
        bytes.append(UInt8(ascii: "."))
        let frac = micros % 1000
        if frac < 100 { bytes.append(UInt8(ascii: "0")) }
        if frac < 10 { bytes.append(UInt8(ascii: "0")) }
        appendDecimal(&bytes, frac)
    }

    /// Ends the line with a newline.
    mutating func end() {
        if format == .json { bytes.append(UInt8(ascii: "}")) }
        bytes.append(UInt8(ascii: "\n"))
    }

    private mutating func rawField(_ key: String, _ value: [UInt8]) { field(key, bytes: value) }

    private mutating func separator() {
        if first { first = false; return }
        bytes.append(format == .json ? UInt8(ascii: ",") : UInt8(ascii: " "))
    }

    private mutating func appendKey(_ key: UnsafeBufferPointer<UInt8>) {
        if format == .json {
            bytes.append(UInt8(ascii: "\""))
            bytes.append(contentsOf: key)
            bytes.append(UInt8(ascii: "\""))
            bytes.append(UInt8(ascii: ":"))
        } else {
            bytes.append(contentsOf: key)
            bytes.append(UInt8(ascii: "="))
        }
    }

    /// Appends `key` and the value; the common case (nothing to escape) is one bulk copy.
    private mutating func stringField(_ key: UnsafeBufferPointer<UInt8>, _ value: UnsafeBufferPointer<UInt8>) {
        separator()
        appendKey(key)
        if format == .json {
            bytes.append(UInt8(ascii: "\""))
            if value.contains(where: { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C || $0 == 0x7F }) {
                for byte in value { appendJSONEscaped(byte) }
            } else {
                bytes.append(contentsOf: value)
            }
            bytes.append(UInt8(ascii: "\""))
        } else {
            let needsQuotes = value.isEmpty || value.contains { $0 <= 0x20 || $0 == 0x22 || $0 == 0x3D || $0 == 0x5C || $0 == 0x7F }
            guard needsQuotes else { bytes.append(contentsOf: value); return }
            bytes.append(UInt8(ascii: "\""))
            for byte in value { appendJSONEscaped(byte) }
            bytes.append(UInt8(ascii: "\""))
        }
    }

    /// JSON string escaping; also used inside quoted logfmt values so control bytes never reach the terminal raw.
    private mutating func appendJSONEscaped(_ byte: UInt8) {
        switch byte {
        case UInt8(ascii: "\""): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
        case UInt8(ascii: "\\"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
        case UInt8(ascii: "\n"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
        case UInt8(ascii: "\r"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
        case UInt8(ascii: "\t"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
        case 0..<0x20, 0x7F:
            let hex: [UInt8] = Array("0123456789abcdef".utf8)
            bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hex[Int(byte >> 4)], hex[Int(byte & 15)]])
        default: bytes.append(byte)
        }
    }
}

/// Appends the decimal digits of `value` without allocating a String.
@inline(__always)
func appendDecimal(_ bytes: inout [UInt8], _ value: Int) {
    if value < 0 {
        bytes.append(UInt8(ascii: "-"))
        appendDecimal(&bytes, value == Int.min ? Int.max : -value)
        return
    }
    if value < 10 { bytes.append(UInt8(ascii: "0") + UInt8(value)); return }
    var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                 UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
        (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    var count = 0
    var rest = value
    withUnsafeMutableBytes(of: &digits) { buffer in
        while rest > 0 {
            buffer[19 - count] = UInt8(ascii: "0") + UInt8(rest % 10)
            rest /= 10
            count += 1
        }
        bytes.append(contentsOf: buffer[(20 - count)...])
    }
}

/// Writes every byte to `fd`, retrying on EINTR and short writes; gives up silently on other errors.
func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
    bytes.withUnsafeBytes { raw in
        var offset = 0
        while offset < raw.count {
            let written = write(fd, raw.baseAddress! + offset, raw.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                return
            }
            offset += written
        }
    }
}
