import Tensor

/// A KServe V2 tensor datatype name (`FP32`, `INT64`, `BYTES`, ...), with Triton's `BF16`.
public enum V2Datatype: String, Sendable, CaseIterable {
    /// One byte, 0 or 1.
    case bool = "BOOL"
    /// Unsigned 8-bit.
    case uint8 = "UINT8"
    /// Unsigned 16-bit.
    case uint16 = "UINT16"
    /// Unsigned 32-bit.
    case uint32 = "UINT32"
    /// Unsigned 64-bit.
    case uint64 = "UINT64"
    /// Signed 8-bit.
    case int8 = "INT8"
    /// Signed 16-bit.
    case int16 = "INT16"
    /// Signed 32-bit.
    case int32 = "INT32"
    /// Signed 64-bit.
    case int64 = "INT64"
    /// IEEE half.
    case fp16 = "FP16"
    /// bfloat16 (Triton extension).
    case bf16 = "BF16"
    /// IEEE single.
    case fp32 = "FP32"
    /// IEEE double.
    case fp64 = "FP64"
    /// Variable-length byte strings.
    case bytes = "BYTES"

    /// The tensor element type this datatype is stored as.
    public var dtype: DType {
        switch self {
        case .bool: return .bool
        case .uint8: return .uint8
        case .uint16: return .uint16
        case .uint32: return .uint32
        case .uint64: return .uint64
        case .int8: return .int8
        case .int16: return .int16
        case .int32: return .int32
        case .int64: return .int64
        case .fp16: return .float16
        case .bf16: return .bfloat16
        case .fp32: return .float32
        case .fp64: return .float64
        case .bytes: return .string
        }
    }

    /// The V2 name of a tensor element type.
    public init(_ dtype: DType) {
        switch dtype {
        case .bool: self = .bool
        // V2 has no 8- or 4-bit float: those travel as their bit patterns (4- and 2-bit integers as one byte each, exactly).
        case .uint8, .uint4, .uint2, .float8e4m3fn, .float8e4m3fnuz, .float8e5m2, .float8e5m2fnuz, .float4e2m1, .float8e8m0: self = .uint8
        case .uint16: self = .uint16
        case .uint32: self = .uint32
        case .uint64: self = .uint64
        case .int8, .int4, .int2: self = .int8
        case .int16: self = .int16
        case .int32: self = .int32
        case .int64: self = .int64
        case .float16: self = .fp16
        case .bfloat16: self = .bf16
        case .float32: self = .fp32
        case .float64: self = .fp64
        case .string: self = .bytes
        }
    }

    /// Bytes per element in the binary extension (0 for BYTES, which is length-prefixed).
    public var byteSize: Int { dtype.byteSize }
}
