/// Widening between element types that cannot change a value (INT32 data for an INT64 input, FP32 for FP64): what a
/// server accepts in place of a model's exact dtype, as Triton does.
extension DType {
    /// True when every value of `self` is exactly representable in `target` (integer/float widening).
    public func widensLosslessly(to target: DType) -> Bool {
        if self == target { return true }
        switch self {
        case .int8: return [.int16, .int32, .int64, .float16, .float32, .float64].contains(target)
        case .uint8: return [.uint16, .uint32, .uint64, .int16, .int32, .int64, .float16, .float32, .float64].contains(target)
        case .int16: return [.int32, .int64, .float32, .float64].contains(target)
        case .uint16: return [.uint32, .uint64, .int32, .int64, .float32, .float64].contains(target)
        case .int32: return [.int64, .float64].contains(target)
        case .uint32: return [.uint64, .int64, .float64].contains(target)
        case .float16, .bfloat16: return [.float32, .float64].contains(target)
        case .float32: return target == .float64
        default: return false
        }
    }
}

extension Tensor {
    /// This tensor in `target`'s element type when that is lossless (itself when it already is), else nil.
    public func losslesslyConverted(to target: DType) -> Tensor? {
        let source = dtype
        if source == target { return self }
        guard source.widensLosslessly(to: target) else { return nil }
        let count = self.count
        var result = Tensor(uninitialized: target, shape: shape)
        withUnsafeBytes { src in
            result.withUnsafeMutableBytes { dst in
                for i in 0..<count { store(elementAsDouble(src, source, i), dst, target, i) }
            }
        }
        return result
    }
}

extension Tensor {
    /// Element `i` as Double: exact for every float type and every integer of up to 53 bits; 0 for string tensors.
    public func doubleValue(at i: Int) -> Double { withUnsafeBytes { elementAsDouble($0, dtype, i) } }

    /// Every element as Double, as `doubleValue(at:)` reads it.
    public var elementDoubles: [Double] { withUnsafeBytes { raw in (0..<count).map { elementAsDouble(raw, dtype, $0) } } }
}

/// Element `i` of a buffer of `dtype` as Double (exact for every source `widensLosslessly` admits); 0 for strings.
private func elementAsDouble(_ raw: UnsafeRawBufferPointer, _ dtype: DType, _ i: Int) -> Double {
    switch dtype {
    case .int8, .int4, .int2: return Double(raw.load(fromByteOffset: i, as: Int8.self))
    case .uint4, .uint2: return Double(raw[i])
    case .float8e4m3fn, .float8e4m3fnuz, .float8e5m2, .float8e5m2fnuz, .float4e2m1, .float8e8m0: return Double(narrowFloatDecoder(dtype)!(raw[i]))
    case .uint8, .bool: return Double(raw[i])
    case .int16: return Double(raw.loadUnaligned(fromByteOffset: i * 2, as: Int16.self))
    case .uint16: return Double(raw.loadUnaligned(fromByteOffset: i * 2, as: UInt16.self))
    case .int32: return Double(raw.loadUnaligned(fromByteOffset: i * 4, as: Int32.self))
    case .uint32: return Double(raw.loadUnaligned(fromByteOffset: i * 4, as: UInt32.self))
    case .int64: return Double(raw.loadUnaligned(fromByteOffset: i * 8, as: Int64.self))
    case .uint64: return Double(raw.loadUnaligned(fromByteOffset: i * 8, as: UInt64.self))
    case .float16: return Double(raw.loadUnaligned(fromByteOffset: i * 2, as: Float16.self))
    case .bfloat16: return Double(Float(bitPattern: UInt32(raw.loadUnaligned(fromByteOffset: i * 2, as: UInt16.self)) << 16))
    case .float32: return Double(raw.loadUnaligned(fromByteOffset: i * 4, as: Float.self))
    case .float64: return raw.loadUnaligned(fromByteOffset: i * 8, as: Double.self)
    case .string: return 0
    }
}

private func store(_ value: Double, _ raw: UnsafeMutableRawBufferPointer, _ dtype: DType, _ i: Int) {
    switch dtype {
    case .int16: raw.storeBytes(of: Int16(value), toByteOffset: i * 2, as: Int16.self)
    case .uint16: raw.storeBytes(of: UInt16(value), toByteOffset: i * 2, as: UInt16.self)
    case .int32: raw.storeBytes(of: Int32(value), toByteOffset: i * 4, as: Int32.self)
    case .uint32: raw.storeBytes(of: UInt32(value), toByteOffset: i * 4, as: UInt32.self)
    case .int64: raw.storeBytes(of: Int64(value), toByteOffset: i * 8, as: Int64.self)
    case .uint64: raw.storeBytes(of: UInt64(value), toByteOffset: i * 8, as: UInt64.self)
    case .float16: raw.storeBytes(of: Float16(value), toByteOffset: i * 2, as: Float16.self)
    case .float32: raw.storeBytes(of: Float(value), toByteOffset: i * 4, as: Float.self)
    case .float64: raw.storeBytes(of: value, toByteOffset: i * 8, as: Double.self)
    default: preconditionFailure("no lossless conversion writes \(dtype)")
    }
}
