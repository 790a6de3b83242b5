import Glibc

/// Wall-clock time and its formatting for `Date:` headers and log timestamps (durations use `SystemClock`).
public enum WallClock {
    /// Seconds since the epoch.
    public static func now() -> Int {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return ts.tv_sec
    }

    /// The current time as `2026-11-29T12:00:00.123Z`.
    public static func iso8601Now() -> [UInt8] {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        var out = iso8601(seconds: ts.tv_sec)
        out.removeLast()
        out.append(UInt8(ascii: "."))
        let millis = ts.tv_nsec / 1_000_000
        out.append(UInt8(ascii: "0") + UInt8(millis / 100))
        out.append(UInt8(ascii: "0") + UInt8(millis / 10 % 10))
        out.append(UInt8(ascii: "0") + UInt8(millis % 10))
        out.append(UInt8(ascii: "Z"))
        return out
    }

    /// `seconds` as `2026-11-29T12:00:00Z`.
    public static func iso8601(seconds: Int) -> [UInt8] {
        let t = brokenDown(seconds)
        var out: [UInt8] = []
        out.reserveCapacity(24)
        pad(&out, Int(t.tm_year) + 1900, 4); out.append(UInt8(ascii: "-"))
        pad(&out, Int(t.tm_mon) + 1, 2); out.append(UInt8(ascii: "-"))
        pad(&out, Int(t.tm_mday), 2); out.append(UInt8(ascii: "T"))
        pad(&out, Int(t.tm_hour), 2); out.append(UInt8(ascii: ":"))
        pad(&out, Int(t.tm_min), 2); out.append(UInt8(ascii: ":"))
        pad(&out, Int(t.tm_sec), 2); out.append(UInt8(ascii: "Z"))
        return out
    }

    /// `seconds` as an IMF-fixdate (RFC 9110 5.6.7): `Sun, 06 Nov 1994 08:49:37 GMT`.
    public static func imfFixdate(seconds: Int) -> [UInt8] {
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        let t = brokenDown(seconds)
        var out: [UInt8] = []
        out.reserveCapacity(29)
        out.append(contentsOf: days[Int(t.tm_wday)].utf8); out.append(contentsOf: ", ".utf8)
        pad(&out, Int(t.tm_mday), 2); out.append(UInt8(ascii: " "))
        out.append(contentsOf: months[Int(t.tm_mon)].utf8); out.append(UInt8(ascii: " "))
        pad(&out, Int(t.tm_year) + 1900, 4); out.append(UInt8(ascii: " "))
        pad(&out, Int(t.tm_hour), 2); out.append(UInt8(ascii: ":"))
        pad(&out, Int(t.tm_min), 2); out.append(UInt8(ascii: ":"))
        pad(&out, Int(t.tm_sec), 2); out.append(contentsOf: " GMT".utf8)
        return out
    }

    private static func brokenDown(_ seconds: Int) -> tm {
        var t = tm()
        var s = time_t(seconds)
        gmtime_r(&s, &t)
        return t
    }

    private static func pad(_ out: inout [UInt8], _ value: Int, _ width: Int) {
        var digits: [UInt8] = []
        var rest = value
        for _ in 0..<width {
            digits.append(UInt8(ascii: "0") + UInt8(rest % 10))
            rest /= 10
        }
        out.append(contentsOf: digits.reversed())
    }
}

/// Per-loop cache of the formatted `Date:` value and log timestamp, refreshed at most once a second.
public struct DateCache {
    /// The wall-clock second the strings were formatted for.
    public private(set) var second = -1
    /// The IMF-fixdate for the cached second.
    public private(set) var httpDate: [UInt8] = []
    /// The ISO 8601 timestamp for the cached second.
    public private(set) var iso8601: [UInt8] = []

    /// An empty cache (call `refresh()` before reading).
    public init() {}

    /// Refreshes the cached strings when the wall clock has moved to a new second.
    public mutating func refresh() {
        let now = WallClock.now()
        guard now != second else { return }
        second = now
        httpDate = WallClock.imfFixdate(seconds: now)
        iso8601 = WallClock.iso8601(seconds: now)
    }
}
