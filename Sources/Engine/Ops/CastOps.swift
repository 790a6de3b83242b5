import Tensor

@inline(__always)
private func convert<S: NumericScalar, D: NumericScalar>(_ src: Tensor, _ s: S.Type, _ d: D.Type) -> Tensor {
    if S.self == Float.self && D.self == Int64.self {
        return mapElements(src) { (v: Float) in clampedInteger(Double(v), Int64.self) }
    }
    return mapElements(src) { (v: S) in D(fromDouble: v.asDouble) }
}

private func fromScalar<S: NumericScalar>(_ t: Tensor, _ s: S.Type, to dtype: DType, saturate: Bool = true,
                                          rounding: Float8E8M0.Rounding = .up) -> Tensor? {
    switch dtype {
    case .float32: return convert(t, S.self, Float.self)
    case .float64: return convert(t, S.self, Double.self)
    case .int64: return convert(t, S.self, Int64.self)
    case .int32: return convert(t, S.self, Int32.self)
    case .int16: return convert(t, S.self, Int16.self)
    case .int8: return convert(t, S.self, Int8.self)
    case .uint8: return convert(t, S.self, UInt8.self)
    case .uint16: return convert(t, S.self, UInt16.self)
    case .uint32: return convert(t, S.self, UInt32.self)
    case .uint64: return convert(t, S.self, UInt64.self)
    case .bool: return mapElements(t) { (v: S) in v != S(fromDouble: 0) }
    case .float16: return halfWidth(t, S.self, .float16, floatToFloat16)
    case .bfloat16:
        return halfWidth(t, S.self, .bfloat16) { f in
            // Round to nearest even on the dropped 16 bits; NaN stays NaN.
            let bits = f.bitPattern
            return f.isNaN ? 0x7fc0 : UInt16(truncatingIfNeeded: (bits &+ 0x7fff &+ ((bits >> 16) & 1)) >> 16)
        }
    case .int4, .uint4, .int2, .uint2:
        // Cast keeps the low bits of the integer value (as ONNX's reference does: -9 becomes int4 7, -3 int2 1).
        let signed = dtype.isSignedSubByte, bits = dtype.packedBits!
        return narrowBytes(convert(t, S.self, Int64.self), to: dtype) { (v: Int64) -> UInt8 in
            SubBytePacking.lowBits(UInt8(truncatingIfNeeded: v), bits: bits, signed: signed)
        }
    case .float4e2m1:
        return narrowBytes(convert(t, S.self, Float.self), to: dtype) { (v: Float) -> UInt8 in Float4E2M1.encode(v) }
    case .float8e8m0:
        return narrowBytes(convert(t, S.self, Float.self), to: dtype) { (v: Float) -> UInt8 in
            Float8E8M0.encode(v, saturate: saturate, rounding: rounding)
        }
    default:
        guard let format = Float8Format(dtype) else { return nil }
        return narrowBytes(convert(t, S.self, Float.self), to: dtype) { (v: Float) -> UInt8 in format.encode(v, saturate: saturate) }
    }
}

/// `t`'s elements (of Swift type `E`) encoded one byte each by `encode` into a tensor of `dtype`.
@inline(__always)
private func narrowBytes<E: TensorScalar>(_ t: Tensor, to dtype: DType, _ encode: (E) -> UInt8) -> Tensor {
    var out = Tensor(uninitialized: dtype, shape: t.shape)
    t.withUnsafeBufferPointer(of: E.self) { src in
        out.withUnsafeMutableBytes { dst in
            for i in 0..<src.count { dst[i] = encode(src[i]) }
        }
    }
    return out
}

/// `t` as a 16-bit float tensor of `dtype` (float16 or bfloat16): through Float, each element encoded by `encode`.
@inline(__always)
private func halfWidth<S: NumericScalar>(_ t: Tensor, _ s: S.Type, _ dtype: DType, _ encode: (Float) -> UInt16) -> Tensor {
    let f = convert(t, S.self, Float.self)
    var out = Tensor(uninitialized: dtype, shape: t.shape)
    f.withUnsafeBufferPointer(of: Float.self) { src in
        out.withUnsafeMutableBytes { raw in
            let dst = raw.bindMemory(to: UInt16.self)
            for i in 0..<src.count { dst[i] = encode(src[i]) }
        }
    }
    return out
}

/// Converts a tensor to `dtype` (float32/64, float16, bfloat16, float8 input, all integer widths, bool); integers
/// truncate toward zero; `saturate` (Cast's attribute) clamps out-of-range values to an 8-bit float's largest.
func castTensor(_ t: Tensor, to dtype: DType, saturate: Bool = true, rounding: Float8E8M0.Rounding = .up, _ ctx: OpContext) throws -> Tensor {
    if t.dtype == dtype { return t }
    var result: Tensor?
    switch t.dtype {
    case .float32: result = fromScalar(t, Float.self, to: dtype, saturate: saturate, rounding: rounding)
    case .float64: result = fromScalar(t, Double.self, to: dtype, saturate: saturate, rounding: rounding)
    case .int64: result = fromScalar(t, Int64.self, to: dtype, saturate: saturate)
    case .int32: result = fromScalar(t, Int32.self, to: dtype, saturate: saturate)
    case .int16: result = fromScalar(t, Int16.self, to: dtype, saturate: saturate)
    case .int8: result = fromScalar(t, Int8.self, to: dtype, saturate: saturate)
    case .uint8: result = fromScalar(t, UInt8.self, to: dtype, saturate: saturate)
    case .uint16: result = fromScalar(t, UInt16.self, to: dtype, saturate: saturate)
    case .uint32: result = fromScalar(t, UInt32.self, to: dtype, saturate: saturate)
    case .uint64: result = fromScalar(t, UInt64.self, to: dtype, saturate: saturate)
    case .bool, .int4, .uint4, .int2, .uint2:
        // One byte per element already: bool, uint4 and uint2 read as uint8, int4 and int2 (sign-extended) as int8.
        let wide: DType = t.dtype.isSignedSubByte ? .int8 : .uint8
        let bytes = Tensor(dtype: wide, shape: t.shape, storage: t.storage, byteOffset: t.byteOffset)
        if dtype == wide { result = stridedCopy(bytes, shape: t.shape, strides: Tensor.contiguousStrides(t.shape), offset: 0) }
        else if wide == .int8 { result = fromScalar(bytes, Int8.self, to: dtype, saturate: saturate) }
        else { result = fromScalar(bytes, UInt8.self, to: dtype, saturate: saturate) }
    case .float8e4m3fn, .float8e4m3fnuz, .float8e5m2, .float8e5m2fnuz, .float4e2m1, .float8e8m0:
        let decode = narrowFloatDecoder(t.dtype)!
        var f = Tensor(uninitialized: .float32, shape: t.shape)
        t.withUnsafeBytes { src in
            f.withUnsafeMutableBufferPointer(of: Float.self) { dst in
                for i in 0..<src.count { dst[i] = decode(src[i]) }
            }
        }
        result = dtype == .float32 ? f : fromScalar(f, Float.self, to: dtype, saturate: saturate, rounding: rounding)
    case .float16, .bfloat16:
        let f = HalfFloatLowering.widened(t)
        result = dtype == .float32 ? f : fromScalar(f, Float.self, to: dtype, saturate: saturate, rounding: rounding)
    case .string: result = nil
    }
    guard let r = result else { throw ctx.error(.unsupportedDType, "cannot cast \(t.dtype) to \(dtype)") }
    return r
}

/// Decodes an ONNX dtype number from an attribute.
func dtypeAttribute(_ ctx: OpContext, _ name: String, _ fallback: DType?) throws -> DType {
    guard ctx.has(name) else {
        guard let f = fallback else { throw ctx.error(.invalidModel, "attribute '\(name)' is required") }
        return f
    }
    let raw = try ctx.int(name, 0)
    guard let dtype = DType(rawValue: raw) else { throw ctx.unsupported(name, "= \(raw) (unknown dtype)") }
    return dtype
}

/// Cast's `round_mode` (opset 25): how a float becomes float8e8m0.
private func roundMode(_ ctx: OpContext) throws -> Float8E8M0.Rounding {
    let mode = try ctx.string("round_mode", "up")
    guard let rounding = Float8E8M0.Rounding(rawValue: mode) else { throw ctx.unsupported("round_mode", "= '\(mode)' (up, down or nearest)") }
    return rounding
}

let castOperators: OperatorTable = [
    "Cast": { ctx in
        let to = try dtypeAttribute(ctx, "to", nil)
        guard to != .string else { throw ctx.unsupported("to", "= string") }
        let saturate = try ctx.int("saturate", 1) != 0, rounding = try roundMode(ctx)
        return PreparedKernel { inputs in [try castTensor(inputs.required(0, ctx), to: to, saturate: saturate, rounding: rounding, ctx)] }
    },
    "CastLike": { ctx in
        let saturate = try ctx.int("saturate", 1) != 0, rounding = try roundMode(ctx)
        return PreparedKernel { inputs in
            [try castTensor(inputs.required(0, ctx), to: inputs.required(1, ctx).dtype, saturate: saturate, rounding: rounding, ctx)]
        }
    },
]
