import Tensor

/// Scalars the arithmetic kernels are generic over (numeric, ordered, convertible through Double).
protocol NumericScalar: TensorScalar, Comparable {
    /// The value as Double (exact for every supported type except the widest integers).
    var asDouble: Double { get }
    /// Converts from Double (integers truncate toward zero, as ONNX Cast does).
    init(fromDouble: Double)
    static func + (a: Self, b: Self) -> Self
    static func - (a: Self, b: Self) -> Self
    static func * (a: Self, b: Self) -> Self
}

extension Float: NumericScalar {
    var asDouble: Double { Double(self) }
    init(fromDouble v: Double) { self = Float(v) }
}
extension Double: NumericScalar {
    var asDouble: Double { self }
    init(fromDouble v: Double) { self = v }
}
/// Saturating conversion helper shared by the integer conformances (NaN becomes 0, out of range clamps).
@inline(__always) func clampedInteger<T: FixedWidthInteger>(_ v: Double, _ type: T.Type) -> T {
    if v.isNaN { return 0 }
    if v >= Double(T.max) { return T.max }
    if v <= Double(T.min) { return T.min }
    return T(v.rounded(.towardZero))
}
/// The integer conformances: exact widening to Double, saturating truncation back.
extension NumericScalar where Self: FixedWidthInteger {
    var asDouble: Double { Double(self) }
    init(fromDouble v: Double) { self = clampedInteger(v, Self.self) }
}
extension Int64: NumericScalar {}
extension Int32: NumericScalar {}
extension Int16: NumericScalar {}
extension Int8: NumericScalar {}
extension UInt8: NumericScalar {}
extension UInt16: NumericScalar {}
extension UInt32: NumericScalar {}
extension UInt64: NumericScalar {}

extension Tensor {
    /// All elements as Double (typed loops for the dtypes quantized and float models use most).
    var doubles: [Double] {
        switch dtype {
        case .uint8: return withUnsafeBufferPointer(of: UInt8.self) { $0.map { Double($0) } }
        case .int8: return withUnsafeBufferPointer(of: Int8.self) { $0.map { Double($0) } }
        case .int32: return withUnsafeBufferPointer(of: Int32.self) { $0.map { Double($0) } }
        case .int64: return withUnsafeBufferPointer(of: Int64.self) { $0.map { Double($0) } }
        case .float32: return withUnsafeBufferPointer(of: Float.self) { $0.map { Double($0) } }
        case .float64: return scalars(as: Double.self)
        default: return (0..<count).map { doubleValue(at: $0) }
        }
    }

    /// All elements as Int (for int64/int32 shape and index tensors; floats are truncated).
    var ints: [Int] {
        switch dtype {
        case .int64: return withUnsafeBufferPointer(of: Int64.self) { $0.map { Int($0) } }
        case .int32: return withUnsafeBufferPointer(of: Int32.self) { $0.map { Int($0) } }
        default: return doubles.map { Int(clampedInteger($0, Int64.self)) }
        }
    }

    /// An int64 tensor.
    static func int64(_ values: [Int], shape: [Int]? = nil) -> Tensor {
        Tensor(shape: shape ?? [values.count], scalars: values.map { Int64($0) })
    }

    /// A float32 tensor filled by `body` (which must write every element).
    static func makeFloat(shape: [Int], _ body: (UnsafeMutablePointer<Float>) throws -> Void) rethrows -> Tensor {
        var t = Tensor.pooled(.float32, shape: shape)
        try t.withUnsafeMutableBufferPointer(of: Float.self) { p in
            if let base = p.baseAddress { try body(base) }
        }
        return t
    }

    /// A float32 tensor filled by `body`, written into `placement`'s window when one of the right size is given
    /// (through its raw pointer: the window's buffer is shared, so copy-on-write access would copy it away).
    static func makeFloat(shape: [Int], placement: OutputPlacement?, _ body: (UnsafeMutablePointer<Float>) throws -> Void) rethrows -> Tensor {
        guard let placement, placement.isContiguous, placement.byteCount == Tensor.elementCount(shape) * MemoryLayout<Float>.stride,
              placement.byteCount > 0 else {
            return try makeFloat(shape: shape, body)
        }
        try body((placement.storage.pointer + placement.byteOffset).assumingMemoryBound(to: Float.self))
        return placement.tensor(.float32, shape: shape)
    }

    /// Read-only float pointer (tensor must be float32).
    func floatPointer<R>(_ body: (UnsafePointer<Float>) throws -> R) rethrows -> R {
        try withUnsafeBufferPointer(of: Float.self) { p in
            try body(p.baseAddress ?? UnsafePointer(bitPattern: 64)!)
        }
    }
}

/// IEEE half bits to Float (handles subnormals, infinities and NaN).
@inline(__always) func float16ToFloat(_ h: UInt16) -> Float {
    let sign = UInt32(h & 0x8000) << 16
    let exponent = Int((h >> 10) & 0x1f)
    let mantissa = UInt32(h & 0x3ff)
    if exponent == 0 {
        if mantissa == 0 { return Float(bitPattern: sign) }
        let value = Float(mantissa) * Float(sign: .plus, exponent: -24, significand: 1)
        return sign != 0 ? -value : value
    }
    if exponent == 31 { return Float(bitPattern: sign | 0x7f80_0000 | (mantissa << 13)) }
    return Float(bitPattern: sign | UInt32(exponent - 15 + 127) << 23 | (mantissa << 13))
}

/// Float to IEEE half bits, rounding to nearest even.
@inline(__always) func floatToFloat16(_ f: Float) -> UInt16 {
    let bits = f.bitPattern
    let sign = UInt16((bits >> 16) & 0x8000)
    if f.isNaN { return sign | 0x7e00 }
    let a = Swift.abs(f)
    if a >= 65520 { return sign | 0x7c00 }
    if a < Float(sign: .plus, exponent: -14, significand: 1) {
        // Subnormal half: value / 2^-24, rounded to nearest even.
        let scaled = (a * Float(sign: .plus, exponent: 24, significand: 1)).rounded(.toNearestOrEven)
        return sign | UInt16(scaled)
    }
    let abits = a.bitPattern
    var exponent = Int(abits >> 23) - 127 + 15
    var mantissa = abits & 0x7f_ffff
    let round = mantissa & 0x1fff
    mantissa >>= 13
    if round > 0x1000 || (round == 0x1000 && (mantissa & 1) == 1) {
        mantissa += 1
        if mantissa == 0x400 { mantissa = 0; exponent += 1 }
    }
    if exponent >= 31 { return sign | 0x7c00 }
    return sign | UInt16(exponent) << 10 | UInt16(mantissa)
}

/// The declared-dimension type, named apart from Foundation's `Dimension`.
typealias DeclaredDimension = Dimension
