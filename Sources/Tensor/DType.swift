/// Element type of a tensor; raw values follow ONNX's `TensorProto.DataType` numbering.
public enum DType: Int, Sendable, CaseIterable, CustomStringConvertible {
    case float32 = 1
    case uint8 = 2
    case int8 = 3
    case uint16 = 4
    case int16 = 5
    case int32 = 6
    case int64 = 7
    case string = 8
    case bool = 9
    case float16 = 10
    case float64 = 11
    case uint32 = 12
    case uint64 = 13
    case bfloat16 = 16
    /// 8-bit float, 4 exponent and 3 mantissa bits, no infinities, NaN = S.1111.111 (one byte per element).
    case float8e4m3fn = 17
    /// 8-bit float E4M3 with exponent bias 8, no infinities or negative zero, NaN = 0x80.
    case float8e4m3fnuz = 18
    /// 8-bit float, 5 exponent and 2 mantissa bits, IEEE-like (infinities and NaNs).
    case float8e5m2 = 19
    /// 8-bit float E5M2 with exponent bias 16, no infinities or negative zero, NaN = 0x80.
    case float8e5m2fnuz = 20
    /// Unsigned 4-bit integer, held one per byte in memory (ONNX packs two per byte only on the wire).
    case uint4 = 21
    /// Signed 4-bit integer, held sign-extended one per byte in memory (two per byte only on the wire).
    case int4 = 22
    /// 4-bit float E2M1 (values 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives; no infinity or NaN), its code held in
    /// the low four bits of one byte per element (two per byte on the wire).
    case float4e2m1 = 23
    /// 8-bit power of two 2^(e - 127), no sign or zero, 0xFF = NaN (MX formats' shared scale); one byte per element.
    case float8e8m0 = 24
    /// Unsigned 2-bit integer, held one per byte in memory (four per byte on the wire).
    case uint2 = 25
    /// Signed 2-bit integer, held sign-extended one per byte in memory (four per byte on the wire).
    case int2 = 26

    /// Bytes per element; strings are stored out of line and report 0.
    public var byteSize: Int {
        switch self {
        case .uint8, .int8, .bool: return 1
        case .float8e4m3fn, .float8e4m3fnuz, .float8e5m2, .float8e5m2fnuz, .uint4, .int4: return 1
        case .float4e2m1, .float8e8m0, .uint2, .int2: return 1
        case .uint16, .int16, .float16, .bfloat16: return 2
        case .float32, .int32, .uint32: return 4
        case .int64, .float64, .uint64: return 8
        case .string: return 0
        }
    }

    /// True for floating-point element types.
    public var isFloatingPoint: Bool {
        switch self {
        case .float32, .float64, .float16, .bfloat16: return true
        default: return false
        }
    }

    /// Lower-case name used in logs and error messages (`float32`, `int64`, ...).
    public var description: String {
        switch self {
        case .float32: return "float32"
        case .uint8: return "uint8"
        case .int8: return "int8"
        case .uint16: return "uint16"
        case .int16: return "int16"
        case .int32: return "int32"
        case .int64: return "int64"
        case .string: return "string"
        case .bool: return "bool"
        case .float16: return "float16"
        case .float64: return "float64"
        case .uint32: return "uint32"
        case .uint64: return "uint64"
        case .bfloat16: return "bfloat16"
        case .float8e4m3fn: return "float8e4m3fn"
        case .float8e4m3fnuz: return "float8e4m3fnuz"
        case .float8e5m2: return "float8e5m2"
        case .float8e5m2fnuz: return "float8e5m2fnuz"
        case .uint4: return "uint4"
        case .int4: return "int4"
        case .float4e2m1: return "float4e2m1"
        case .float8e8m0: return "float8e8m0"
        case .uint2: return "uint2"
        case .int2: return "int2"
        }
    }
}

extension DType {
    /// True for the four 8-bit float formats (not `isFloatingPoint`: kernels do no arithmetic on them, only Cast and
    /// (De)QuantizeLinear convert them).
    public var isFloat8: Bool {
        switch self {
        case .float8e4m3fn, .float8e4m3fnuz, .float8e5m2, .float8e5m2fnuz: return true
        default: return false
        }
    }

    /// Bits per element of the types ONNX packs several to a byte on the wire, first element in the lowest bits
    /// (4 for int4 / uint4 / float4e2m1, 2 for int2 / uint2); nil for the others.
    public var packedBits: Int? {
        switch self {
        case .int4, .uint4, .float4e2m1: return 4
        case .int2, .uint2: return 2
        default: return nil
        }
    }

    /// True for int4 and int2, held sign-extended one per byte.
    public var isSignedSubByte: Bool { self == .int4 || self == .int2 }
}

/// A Swift scalar type that can be stored in a `Tensor`.
public protocol TensorScalar: Sendable {
    /// The dtype this Swift type maps to.
    static var dtype: DType { get }
    /// The zero value, used to fill new tensors.
    static var zero: Self { get }
}

extension Float: TensorScalar {
    /// float32.
    public static var dtype: DType { .float32 }
}
extension Double: TensorScalar {
    /// float64.
    public static var dtype: DType { .float64 }
}
extension Int64: TensorScalar {
    /// int64.
    public static var dtype: DType { .int64 }
}
extension Int32: TensorScalar {
    /// int32.
    public static var dtype: DType { .int32 }
}
extension Int16: TensorScalar {
    /// int16.
    public static var dtype: DType { .int16 }
}
extension Int8: TensorScalar {
    /// int8.
    public static var dtype: DType { .int8 }
}
extension UInt8: TensorScalar {
    /// uint8.
    public static var dtype: DType { .uint8 }
}
extension UInt16: TensorScalar {
    /// uint16.
    public static var dtype: DType { .uint16 }
}
extension UInt32: TensorScalar {
    /// uint32.
    public static var dtype: DType { .uint32 }
}
extension UInt64: TensorScalar {
    /// uint64.
    public static var dtype: DType { .uint64 }
}
extension Bool: TensorScalar {
    /// bool (one byte per element, 0 or 1).
    public static var dtype: DType { .bool }
    /// false.
    public static var zero: Bool { false }
}
