// The narrow float formats ONNX stores one per byte: four 8-bit formats, E8M0 and the 4-bit E2M1.

/// The four ONNX 8-bit float formats (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ): decoding to Float and encoding from Float
/// with round-to-nearest-even and the Cast spec's saturation. Described by their bit layout rather than by four
/// hand-written bit-twiddling routines, so the one algorithm below serves every format.
public struct Float8Format: Sendable, Equatable {
    /// Mantissa bits (3 for E4M3, 2 for E5M2).
    public let mantissaBits: Int
    /// Exponent bias (7 / 8 for E4M3 FN / FNUZ, 15 / 16 for E5M2 / E5M2FNUZ).
    public let bias: Int
    /// True for the "UZ" formats: no negative zero, 0x80 is the only NaN.
    public let unsignedZero: Bool
    /// True when the all-ones exponent holds infinities and NaNs (E5M2 only).
    public let hasInfinity: Bool

    /// The layout of `dtype`, nil when it is not an 8-bit float.
    public init?(_ dtype: DType) {
        switch dtype {
        case .float8e4m3fn: (mantissaBits, bias, unsignedZero, hasInfinity) = (3, 7, false, false)
        case .float8e4m3fnuz: (mantissaBits, bias, unsignedZero, hasInfinity) = (3, 8, true, false)
        case .float8e5m2: (mantissaBits, bias, unsignedZero, hasInfinity) = (2, 15, false, true)
        case .float8e5m2fnuz: (mantissaBits, bias, unsignedZero, hasInfinity) = (2, 16, true, false)
        default: return nil
        }
    }

    /// The largest finite magnitude's bit pattern (0x7E for E4M3FN, whose 0x7F is NaN; 0x7B for E5M2).
    public var maxFiniteBits: UInt8 {
        if unsignedZero { return 0x7F }
        return hasInfinity ? 0x7B : 0x7E
    }

    /// The NaN this format produces (positive when it has a sign for NaN).
    var nanBits: UInt8 { unsignedZero ? 0x80 : 0x7F }

    /// `bits` as a Float (exact: every 8-bit float value is a float32 value).
    public func decode(_ bits: UInt8) -> Float {
        if unsignedZero {
            if bits == 0x80 { return .nan }
        } else if hasInfinity {
            if bits & 0x7C == 0x7C { return bits & 0x03 == 0 ? (bits & 0x80 != 0 ? -.infinity : .infinity) : .nan }
        } else if bits & 0x7F == 0x7F {
            return .nan
        }
        let negative = bits & 0x80 != 0
        let exponentField = Int(bits & 0x7F) >> mantissaBits
        let mantissa = Float(Int(bits) & ((1 << mantissaBits) - 1))
        let magnitude = exponentField == 0
            ? mantissa * Float(sign: .plus, exponent: 1 - bias - mantissaBits, significand: 1)
            : (1 + mantissa / Float(1 << mantissaBits)) * Float(sign: .plus, exponent: exponentField - bias, significand: 1)
        return negative ? -magnitude : magnitude
    }

    /// `value` rounded to nearest even; out-of-range values (infinities included) become the largest finite value
    /// when `saturate`, else infinity (E5M2) or NaN, as ONNX Cast and QuantizeLinear specify.
    public func encode(_ value: Float, saturate: Bool) -> UInt8 {
        if value.isNaN { return nanBits }
        let sign: UInt8 = value.sign == .minus ? 0x80 : 0
        // The UZ formats have no negative zero (0x80 is their NaN): a zero result is +0.
        let zero: UInt8 = unsignedZero ? 0 : sign
        let overflow: UInt8 = saturate ? sign | maxFiniteBits : (hasInfinity ? sign | 0x7C : nanBits)
        if value.isInfinite { return overflow }
        let magnitude = Double(value.magnitude)
        if magnitude == 0 { return zero }
        let minNormalExponent = 1 - bias
        // Quantum of the binade holding the value (subnormals share the smallest normal binade's quantum).
        let exponent = max(Int(magnitude.exponent), minNormalExponent)
        let quantum = Double(sign: .plus, exponent: exponent - mantissaBits, significand: 1)
        let rounded = (magnitude / quantum).rounded(.toNearestOrEven) * quantum
        if rounded == 0 { return zero }
        if rounded > Double(decode(maxFiniteBits)) { return overflow }
        let bits: Int
        if rounded < Double(sign: .plus, exponent: minNormalExponent, significand: 1) {
            bits = Int(rounded / Double(sign: .plus, exponent: minNormalExponent - mantissaBits, significand: 1))
        } else {
            let e = Int(rounded.exponent)
            let fraction = rounded / Double(sign: .plus, exponent: e, significand: 1) - 1
            bits = ((e + bias) << mantissaBits) | Int(fraction * Double(1 << mantissaBits))
        }
        return sign | UInt8(bits)
    }
}

/// The 4-bit float E2M1: sign bit 0x8, two exponent bits (bias 1), one mantissa bit; no infinity or NaN.
public enum Float4E2M1 {
    /// Magnitudes of codes 0...7.
    static let magnitudes: [Float] = [0, 0.5, 1, 1.5, 2, 3, 4, 6]

    /// The value of the low four bits of `code`.
    public static func decode(_ code: UInt8) -> Float {
        let magnitude = magnitudes[Int(code & 0x7)]
        return code & 0x8 != 0 ? -magnitude : magnitude
    }

    /// `value` rounded to the nearest code (ties to the even code), magnitudes beyond 6 saturating to 6, as ONNX's
    /// reference (ml_dtypes) converts; NaN becomes 0x8 (-NaN 0x0), as it does too.
    public static func encode(_ value: Float) -> UInt8 {
        if value.isNaN { return value.sign == .minus ? 0 : 0x8 }
        let sign: UInt8 = value.sign == .minus ? 0x8 : 0
        let magnitude = value.magnitude
        var code = 7
        for k in 0..<7 {
            let midpoint = (magnitudes[k] + magnitudes[k + 1]) / 2
            if magnitude < midpoint || (magnitude == midpoint && k % 2 == 0) { code = k; break }
        }
        return sign | UInt8(code)
    }
}

/// The 8-bit power of two E8M0: 2^(bits - 127), 0xFF = NaN.
public enum Float8E8M0 {
    /// How Cast rounds a value that is not a power of two (its `round_mode` attribute).
    public enum Rounding: String, Sendable {
        /// To the next power of two up (the default).
        case up
        /// To the power of two below (the float's own exponent).
        case down
        /// To the nearer one.
        case nearest
    }

    /// The value of `bits`.
    public static func decode(_ bits: UInt8) -> Float {
        bits == 0xFF ? .nan : Float(sign: .plus, exponent: Int(bits) - 127, significand: 1)
    }

    /// The exponent of `value`'s float32 bits (its sign ignored), rounded by `rounding`; infinities and NaN become
    /// 0xFF; a rounding past the largest exponent stays at 0xFE when `saturate`, else becomes 0xFF (ONNX's reference).
    public static func encode(_ value: Float, saturate: Bool, rounding: Rounding) -> UInt8 {
        let bits = value.bitPattern
        let exponent = (bits >> 23) & 0xFF
        if exponent == 0xFF { return 0xFF }
        let up: Bool
        switch rounding {
        case .down: up = false
        case .up: up = bits & 0x7F_FFFF != 0
        case .nearest:
            let guardBit = bits & 0x40_0000 != 0, roundBit = bits & 0x20_0000 != 0, sticky = bits & 0x1F_FFFF != 0
            up = guardBit && (roundBit || sticky || exponent > 0)
        }
        if up && exponent == 0xFE && saturate { return 0xFE }
        return UInt8(exponent + (up ? 1 : 0))
    }
}

/// The decoder of a one-byte float type (the four float8 formats, float8e8m0, float4e2m1); nil for other types.
public func narrowFloatDecoder(_ dtype: DType) -> ((UInt8) -> Float)? {
    switch dtype {
    case .float4e2m1: return Float4E2M1.decode
    case .float8e8m0: return Float8E8M0.decode
    default: return Float8Format(dtype).map { $0.decode }
    }
}
