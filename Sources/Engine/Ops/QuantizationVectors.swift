import Tensor

// 16-lane bodies of the float <-> 8-bit conversions the quantized graphs run between every integer operator
// (QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, QLinearMatMul's requantization). Each computes what its
// scalar twin computes, bit for bit: the same float division or product, round half to even, the same saturation
// (NaN to 0). Rounding and the 8-bit cast use one exact float addition of 1.5 * 2^23 (the value, clamped to the
// output range first, is then an integer in the low mantissa bits), so no float-to-integer conversion is needed.

/// 1.5 * 2^23: adding it to |t| < 2^22 rounds t half to even into the low mantissa bits.
private let roundingMagic = SIMD16<Float>(repeating: 12_582_912)

/// The 8-bit patterns of round_half_even(t) + zero saturated to [low, high] (NaN gives 0), 16 lanes; `zero`,
/// `low` and `high` are integers (`low`/`high` the output type's bounds).
@inline(__always)
func quantizedBytes(_ t: SIMD16<Float>, zero: Float, low: Float, high: Float) -> SIMD16<UInt8> {
    var v = t.replacing(with: -zero, where: t .!= t)
    // Clamping before rounding equals clamping after it: the bounds minus the zero point are integers.
    v = clamp(v, SIMD16(repeating: low - zero), SIMD16(repeating: high - zero))
    let bits = unsafeBitCast(v + roundingMagic, to: SIMD16<UInt32>.self) &+ SIMD16(repeating: UInt32(bitPattern: Int32(zero)))
    return SIMD16<UInt8>(truncatingIfNeeded: bits)
}

/// Bytes of round_half_even(x[i] / scale) + zero saturated to the output's range, for `count` floats.
func quantizeRun(_ x: UnsafePointer<Float>, count: Int, scale: Float, zero: Float, signed: Bool, into out: UnsafeMutableRawPointer) {
    let (low, high): (Float, Float) = signed ? (-128, 127) : (0, 255)
    let s = SIMD16<Float>(repeating: scale)
    var i = 0
    while i + 16 <= count {
        out.storeBytes(of: quantizedBytes(x.advanced(by: i).vector(SIMD16<Float>.self) / s, zero: zero, low: low, high: high),
                       toByteOffset: i, as: SIMD16<UInt8>.self)
        i += 16
    }
    while i < count {
        var t = SIMD16<Float>(repeating: 0)
        t[0] = x[i] / scale
        out.storeBytes(of: quantizedBytes(t, zero: zero, low: low, high: high)[0], toByteOffset: i, as: UInt8.self)
        i += 1
    }
}

/// Floats (q[i] - zero) * scale of `count` 8-bit values (int8 when `signed`).
func dequantizeRun(_ q: UnsafeRawPointer, count: Int, scale: Float, zero: Float, signed: Bool, into out: UnsafeMutablePointer<Float>) {
    let s = SIMD16<Float>(repeating: scale), z = SIMD16<Float>(repeating: zero)
    // int8 as its byte + 128 (flipping the sign bit), taken back off after the exact conversion.
    let flip = SIMD16<UInt8>(repeating: signed ? 0x80 : 0), offset = SIMD16<Float>(repeating: signed ? 8_388_736 : 8_388_608)
    var i = 0
    while i + 16 <= count {
        let bytes = q.loadUnaligned(fromByteOffset: i, as: SIMD16<UInt8>.self) ^ flip
        let exact = unsafeBitCast(SIMD16<UInt32>(truncatingIfNeeded: bytes) | SIMD16(repeating: 0x4B00_0000), to: SIMD16<Float>.self) - offset
        out.advanced(by: i).store((exact - z) * s)
        i += 16
    }
    while i < count {
        let v = signed ? Float(q.load(fromByteOffset: i, as: Int8.self)) : Float(q.load(fromByteOffset: i, as: UInt8.self))
        out[i] = (v - zero) * scale
        i += 1
    }
}

/// Bytes of round_half_even(Float(sums[i]) * multiplier) + zero saturated to the output's range (one multiplier
/// for the whole tensor), for `count` int32 sums.
func requantizeRun(_ sums: UnsafePointer<Int32>, count: Int, multiplier: Float, zero: Float, signed: Bool, into out: UnsafeMutableRawPointer) {
    let (low, high): (Float, Float) = signed ? (-128, 127) : (0, 255)
    let m = SIMD16<Float>(repeating: multiplier)
    var i = 0
    while i + 16 <= count {
        let s = UnsafeRawPointer(sums).loadUnaligned(fromByteOffset: 4 * i, as: SIMD16<Int32>.self)
        out.storeBytes(of: quantizedBytes(SIMD16<Float>(s) * m, zero: zero, low: low, high: high), toByteOffset: i, as: SIMD16<UInt8>.self)
        i += 16
    }
    while i < count {
        var t = SIMD16<Float>(repeating: 0)
        t[0] = Float(sums[i]) * multiplier
        out.storeBytes(of: quantizedBytes(t, zero: zero, low: low, high: high)[0], toByteOffset: i, as: UInt8.self)
        i += 1
    }
}

/// DynamicQuantizeLinear of float32 (its scalar twin is `dynamicQuantizeLinearReference`): y, y_scale, y_zero_point
/// with the range widened to include 0, scale (max - min) / 255, zero point round(-min / scale) saturated.
func dynamicQuantizeLinearVector(_ x: Tensor) -> [Tensor] {
    var out = Tensor.pooled(.uint8, shape: x.shape)
    let (scale, zero) = x.floatPointer { p -> (Float, Float) in
        var low = SIMD16<Float>(repeating: 0), high = SIMD16<Float>(repeating: 0)
        var i = 0
        while i + 16 <= x.count {
            let v = p.advanced(by: i).vector(SIMD16<Float>.self)
            low.replace(with: v, where: v .< low); high.replace(with: v, where: v .> high)
            i += 16
        }
        var lo = low.min(), hi = high.max()
        while i < x.count { lo = min(lo, p[i]); hi = max(hi, p[i]); i += 1 }
        let scale = (hi - lo) / 255
        let zero = scale == 0 ? 0 : min(max((0 - lo / scale).rounded(.toNearestOrEven), 0), 255)
        out.withUnsafeMutableBytes { raw in
            if scale == 0 {
                raw.initializeMemory(as: UInt8.self, repeating: UInt8(zero))
            } else {
                quantizeRun(p, count: x.count, scale: scale, zero: zero, signed: false, into: raw.baseAddress!)
            }
        }
        return (scale, zero)
    }
    return [out, Tensor(scalar: scale), Tensor(scalar: UInt8(zero))]
}

/// DynamicQuantizeLinear of any float input in scalar arithmetic (the reference twin of `dynamicQuantizeLinearVector`).
func dynamicQuantizeLinearReference(_ x: Tensor) -> [Tensor] {
    let values = x.scalars(as: Float.self)
    let low = min(0, values.min() ?? 0), high = max(0, values.max() ?? 0)
    let scale = (high - low) / 255
    let zero = scale == 0 ? 0 : min(max((0 - low / scale).rounded(.toNearestOrEven), 0), 255)
    let q = values.map { v -> UInt8 in
        let r = scale == 0 ? zero : (v / scale).rounded(.toNearestOrEven) + zero
        return UInt8(min(max(r, 0), 255))
    }
    return [Tensor(shape: x.shape, scalars: q), Tensor(scalar: scale), Tensor(scalar: UInt8(zero))]
}
