import CKernelShim
import Tensor

// The float <-> 8-bit conversions the quantized graphs run between every integer operator (QuantizeLinear,
// DequantizeLinear, DynamicQuantizeLinear, QLinearMatMul's requantization), on the C bodies of quantize_linear.c
// (AVX2 when the CPU has it, checked at run time): the same float division or product as the scalar reference, round
// half to even, the same saturation (NaN to 0), bit for bit.

/// Bytes of round_half_even(x[i] / scale) + zero saturated to the output's range, for `count` floats.
func quantizeRun(_ x: UnsafePointer<Float>, count: Int, scale: Float, zero: Float, signed: Bool, into out: UnsafeMutableRawPointer) {
    osprey_quantize_f32(x, count, scale, zero, signed ? 1 : 0, out.assumingMemoryBound(to: UInt8.self))
}

/// Floats (q[i] - zero) * scale of `count` 8-bit values (int8 when `signed`).
func dequantizeRun(_ q: UnsafeRawPointer, count: Int, scale: Float, zero: Float, signed: Bool, into out: UnsafeMutablePointer<Float>) {
    osprey_dequantize_u8(q.assumingMemoryBound(to: UInt8.self), count, scale, zero, signed ? 1 : 0, out)
}

/// Bytes of round_half_even(Float(sums[i]) * multiplier) + zero saturated to the output's range (one multiplier
/// for the whole tensor), for `count` int32 sums.
func requantizeRun(_ sums: UnsafePointer<Int32>, count: Int, multiplier: Float, zero: Float, signed: Bool, into out: UnsafeMutableRawPointer) {
    osprey_requantize_i32(sums, count, multiplier, zero, signed ? 1 : 0, out.assumingMemoryBound(to: UInt8.self))
}

/// DynamicQuantizeLinear of float32 (its scalar twin is `dynamicQuantizeLinearReference`): y, y_scale, y_zero_point
/// with the range widened to include 0, scale (max - min) / 255, zero point round(-min / scale) saturated.
func dynamicQuantizeLinearVector(_ x: Tensor) -> [Tensor] {
    var out = Tensor.pooled(.uint8, shape: x.shape)
    let (scale, zero) = x.floatPointer { p -> (Float, Float) in
        var lo: Float = 0, hi: Float = 0
        osprey_range_with_zero_f32(p, x.count, &lo, &hi)
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
