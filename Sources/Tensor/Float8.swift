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

/// Packing of int4 / uint4 elements, two per byte with the first element in the low nibble (ONNX's wire form).
public enum FourBitPacking {
    /// Unpacks `count` 4-bit elements from `packed` into one byte each (int4 sign-extended).
    public static func unpack(_ packed: UnsafeRawBufferPointer, count: Int, signed: Bool, into out: UnsafeMutableRawBufferPointer) {
        for i in 0..<count {
            let byte = packed[i >> 1]
            let nibble = i & 1 == 0 ? byte & 0x0F : byte >> 4
            out[i] = signed && nibble >= 8 ? nibble | 0xF0 : nibble
        }
    }

    /// Bytes needed for `count` packed 4-bit elements.
    public static func packedByteCount(_ count: Int) -> Int { (count + 1) / 2 }
}
