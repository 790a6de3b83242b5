/// A scanned JSON number: its span plus a decimal decomposition `±mantissa × 10^exponent`.
struct JSONNumberToken {
    var start: Int
    var end: Int
    var negative: Bool
    /// Significant digits (leading zeros dropped), exact unless `truncated`.
    var mantissa: UInt64
    /// Decimal exponent applied to `mantissa`.
    var exponent: Int
    /// True when digits beyond UInt64 precision were dropped.
    var truncated: Bool
    /// True when written with neither fraction nor exponent.
    var isInteger: Bool

    /// The exact value as Int64 when it is an integer in range.
    var int64Value: Int64? {
        guard isInteger, !truncated, exponent == 0 else { return nil }
        if negative {
            if mantissa <= UInt64(Int64.max) { return -Int64(mantissa) }
            return mantissa == UInt64(Int64.max) + 1 ? Int64.min : nil
        }
        return mantissa <= UInt64(Int64.max) ? Int64(mantissa) : nil
    }

    /// The exact value as UInt64 when it is a non-negative integer in range (`-0` counts).
    var uint64Value: UInt64? {
        guard isInteger, !truncated, exponent == 0 else { return nil }
        if negative { return mantissa == 0 ? 0 : nil }
        return mantissa
    }

    /// Correctly rounded Double, or nil when the magnitude overflows.
    func doubleValue(_ bytes: UnsafeBufferPointer<UInt8>) -> Double? {
        if mantissa == 0 { return negative ? -0.0 : 0.0 }
        // Clinger's fast path: both operands exact, one correctly rounded operation.
        if !truncated && mantissa <= 1 << 53 && exponent >= -22 && exponent <= 22 {
            let m = Double(mantissa)
            let d = exponent >= 0 ? m * powersOfTen[exponent] : m / powersOfTen[-exponent]
            return negative ? -d : d
        }
        guard let d = Double(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)),
              d.isFinite else { return nil }
        return d
    }

    /// Correctly rounded Float, or nil when the magnitude overflows Float.
    func floatValue(_ bytes: UnsafeBufferPointer<UInt8>) -> Float? {
        if mantissa == 0 { return negative ? -0.0 : 0.0 }
        if !truncated && exponent >= -22 && exponent <= 22 {
            // At most three roundings (mantissa to Double, 10^-k, the product): |error| <= 3 ulp of Double.
            // Rounding that Double to Float is right unless it lies within a few ulps of a Float
            // rounding boundary (the halfway point between two Floats), which we leave to the slow path.
            // Multiplying by a rounded 10^-k instead of dividing saves the divider's latency.
            let m = Double(mantissa)
            let d = exponent >= 0 ? m * powersOfTen[exponent] : m * negativePowersOfTen[-exponent]
            if d >= Double(Float.leastNormalMagnitude) && d < 3.4e38 {
                let low = d.bitPattern & 0x1FFF_FFFF
                let distance = low > 0x1000_0000 ? low - 0x1000_0000 : 0x1000_0000 - low
                if distance > 8 {
                    let f = Float(d)
                    return negative ? -f : f
                }
            }
        }
        guard let f = Float(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)),
              f.isFinite else { return nil }
        return f
    }
}

/// 10^0 ... 10^22: every one exactly representable as a Double.
let powersOfTen: [Double] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
]

/// 10^0 ... 10^-22, each the nearest Double (not exact; `floatValue` budgets for the rounding).
let negativePowersOfTen: [Double] = [
    1e0, 1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10, 1e-11,
    1e-12, 1e-13, 1e-14, 1e-15, 1e-16, 1e-17, 1e-18, 1e-19, 1e-20, 1e-21, 1e-22,
]

extension JSONReader {
    /// Scans one number per RFC 8259 (`-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`).
    @inline(__always)
    mutating func scanNumber() throws -> JSONNumberToken {
        skipWhitespace()
        let start = index
        var i = index
        let n = bytes.count
        var negative = false
        if i < n && bytes[i] == UInt8(ascii: "-") { negative = true; i += 1 }
        guard i < n else { throw JSONError(.unexpectedEnd, at: i, "unexpected end of JSON inside a number") }
        var mantissa: UInt64 = 0
        var exponent = 0
        var truncated = false
        var isInteger = true
        // Largest value that can take one more digit without overflowing UInt64.
        let limit: UInt64 = 1_844_674_407_370_955_161
        var c = bytes[i]
        if c == UInt8(ascii: "0") {
            i += 1
            if i < n && bytes[i] >= UInt8(ascii: "0") && bytes[i] <= UInt8(ascii: "9") {
                throw JSONError(.invalidNumber, at: i, "invalid number: leading zero")
            }
        } else if c >= UInt8(ascii: "1") && c <= UInt8(ascii: "9") {
            while mantissa < 100_000_000_000, i + 8 <= n, let eight = eightDigits(at: i) {
                mantissa = mantissa &* 100_000_000 &+ eight
                i += 8
            }
            while i < n {
                c = bytes[i]
                let d = c &- UInt8(ascii: "0")
                if d > 9 { break }
                if mantissa < limit || (mantissa == limit && d <= 5) {
                    mantissa = mantissa &* 10 &+ UInt64(d)
                } else {
                    truncated = truncated || d != 0
                    exponent += 1
                }
                i += 1
            }
        } else {
            throw JSONError(.invalidNumber, at: i, "invalid number: expected a digit, got \(describe(c))")
        }
        if i < n && bytes[i] == UInt8(ascii: ".") {
            isInteger = false
            i += 1
            let fractionStart = i
            // Eight digits at a time while the mantissa has room (< 10^11 * 10^8 + 10^8 < 2^64).
            while mantissa < 100_000_000_000, i + 8 <= n, let eight = eightDigits(at: i) {
                mantissa = mantissa &* 100_000_000 &+ eight
                exponent -= 8
                i += 8
            }
            while i < n {
                let d = bytes[i] &- UInt8(ascii: "0")
                if d > 9 { break }
                if mantissa < limit || (mantissa == limit && d <= 5) {
                    mantissa = mantissa &* 10 &+ UInt64(d)
                    exponent -= 1
                } else {
                    truncated = truncated || d != 0
                }
                i += 1
            }
            guard i > fractionStart else {
                if i >= n { throw JSONError(.unexpectedEnd, at: i, "unexpected end of JSON inside a number") }
                throw JSONError(.invalidNumber, at: i, "invalid number: expected a digit after '.', got \(describe(bytes[i]))")
            }
        }
        if i < n && (bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E")) {
            isInteger = false
            i += 1
            var expNegative = false
            if i < n && (bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-")) {
                expNegative = bytes[i] == UInt8(ascii: "-")
                i += 1
            }
            let expStart = i
            var e = 0
            while i < n {
                let d = bytes[i] &- UInt8(ascii: "0")
                if d > 9 { break }
                if e < 100_000 { e = e * 10 + Int(d) }  // beyond this every double is 0 or inf anyway
                i += 1
            }
            guard i > expStart else {
                if i >= n { throw JSONError(.unexpectedEnd, at: i, "unexpected end of JSON inside a number") }
                throw JSONError(.invalidNumber, at: i, "invalid number: expected a digit in the exponent, got \(describe(bytes[i]))")
            }
            exponent += expNegative ? -e : e
        }
        index = i
        return JSONNumberToken(start: start, end: i, negative: negative, mantissa: mantissa,
                               exponent: exponent, truncated: truncated, isInteger: isInteger)
    }

    /// The value of the eight ASCII digits at `offset`, or nil if any byte is not a digit (SWAR, one load).
    @inline(__always)
    func eightDigits(at offset: Int) -> UInt64? {
        let word = UnsafeRawPointer(bytes.baseAddress! + offset).loadUnaligned(as: UInt64.self)
        let v = UInt64(littleEndian: word) &- 0x3030_3030_3030_3030
        // Every byte must be 0...9: no borrow (high bit clear) and adding 6 must not reach 16.
        guard (v | (v &+ 0x0606_0606_0606_0606)) & 0xF0F0_F0F0_F0F0_F0F0 == 0 else { return nil }
        // Byte 0 holds the first (most significant) digit: merge neighbours into 2-, 4-, then 8-digit lanes.
        let pairs = (v &* 10 &+ (v >> 8)) & 0x00FF_00FF_00FF_00FF
        let quads = (pairs &* 100 &+ (pairs >> 16)) & 0x0000_FFFF_0000_FFFF
        return (quads &* 10_000 &+ (quads >> 32)) & 0xFFFF_FFFF
    }

    /// The text of a scanned number, for error messages.
    func text(of token: JSONNumberToken) -> String {
        String(decoding: UnsafeBufferPointer(rebasing: bytes[token.start..<min(token.end, token.start + 40)]), as: UTF8.self)
    }
}
