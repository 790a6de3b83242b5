import Foundation
import Tensor

/// DeformConv (opset 19, 2-D): each kernel tap samples the input at its regular place plus a learned offset per
/// output pixel (bilinear, zero outside the image), scaled by an optional mask, then the usual grouped product with
/// the weights and the bias. Offsets are [N, offset_group * kH * kW * 2 (y, x), oH, oW], the mask [N, offset_group *
/// kH * kW, oH, oW]. The sampled columns of each image go through one sgemm per group.
let deformConvOperators: OperatorTable = [
    "DeformConv": { ctx in
        let groups = try ctx.int("group", 1), offsetGroups = try ctx.int("offset_group", 1)
        let dilationsAttribute = try ctx.ints("dilations"), padsAttribute = try ctx.ints("pads"), stridesAttribute = try ctx.ints("strides")
        let kernelAttribute = try ctx.ints("kernel_shape")
        guard groups > 0, offsetGroups > 0 else { throw ctx.error(.invalidModel, "group and offset_group must be positive") }
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx), w = try inputs.required(1, ctx), offset = try inputs.required(2, ctx)
            guard x.dtype == .float32, w.dtype == .float32, offset.dtype == .float32, x.rank == 4, w.rank == 4, offset.rank == 4 else {
                throw ctx.error(.unsupportedAttribute, "only 2-D float32 DeformConv is supported: X \(x), W \(w), offset \(offset)")
            }
            let (n, c, h, wd) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
            let m = w.shape[0], kernel = kernelAttribute ?? Array(w.shape[2...])
            let (kh, kw) = (kernel[0], kernel[1])
            let dilations = dilationsAttribute ?? [1, 1], strides = stridesAttribute ?? [1, 1], pads = padsAttribute ?? [0, 0, 0, 0]
            let (oh, ow) = (offset.shape[2], offset.shape[3])
            let taps = kh * kw
            guard kernel.count == 2, w.shape[2] == kh, w.shape[3] == kw, c == w.shape[1] * groups, m % groups == 0, c % offsetGroups == 0,
                  offset.shape[0] == n, offset.shape[1] == offsetGroups * taps * 2,
                  oh == (h + pads[0] + pads[2] - (dilations[0] * (kh - 1) + 1)) / strides[0] + 1,
                  ow == (wd + pads[1] + pads[3] - (dilations[1] * (kw - 1) + 1)) / strides[1] + 1 else {
                throw ctx.error(.executionFailed, "X \(x.shape), W \(w.shape), offset \(offset.shape), group \(groups), offset_group \(offsetGroups) are inconsistent")
            }
            let bias = try inputs[3].map { b -> [Float] in
                guard b.count == m else { throw ctx.error(.executionFailed, "B has \(b.count) values for \(m) output channels") }
                return try castTensor(b, to: .float32, ctx).scalars(as: Float.self)
            }
            let mask = try inputs[4].map { t -> [Float] in
                guard t.count == n * offsetGroups * taps * oh * ow else { throw ctx.error(.executionFailed, "mask \(t.shape) does not match [\(n), \(offsetGroups * taps), \(oh), \(ow)]") }
                return try castTensor(t, to: .float32, ctx).scalars(as: Float.self)
            }
            let source = x.scalars(as: Float.self), offsets = offset.scalars(as: Float.self), weights = w.scalars(as: Float.self)
            let pixels = oh * ow, perGroup = c / groups, perOffsetGroup = c / offsetGroups, outPerGroup = m / groups
            let depth = perGroup * taps
            var columns = [Float](repeating: 0, count: c * taps * pixels)
            let out = Tensor.makeFloat(shape: [n, m, oh, ow]) { dst in
                for b in 0..<n {
                    // Columns [c * taps, pixels]: the sampled, masked input of every tap.
                    for ch in 0..<c {
                        let g = ch / perOffsetGroup, plane = (b * c + ch) * h * wd
                        for tap in 0..<taps {
                            let ky = tap / kw, kx = tap % kw
                            for p in 0..<pixels {
                                let oy = p / ow, ox = p % ow
                                let o = (((b * offsetGroups + g) * taps + tap) * 2) * pixels + p
                                let y = Float(oy * strides[0] - pads[0] + ky * dilations[0]) + offsets[o]
                                let xx = Float(ox * strides[1] - pads[1] + kx * dilations[1]) + offsets[o + pixels]
                                var v = bilinearZero(source, plane, h, wd, y, xx)
                                if let mask { v *= mask[((b * offsetGroups + g) * taps + tap) * pixels + p] }
                                columns[(ch * taps + tap) * pixels + p] = v
                            }
                        }
                    }
                    columns.withUnsafeBufferPointer { cols in
                        weights.withUnsafeBufferPointer { wp in
                            for g in 0..<groups {
                                let output = dst + (b * m + g * outPerGroup) * pixels
                                sgemm(transposeA: false, transposeB: false, m: outPerGroup, n: pixels, k: depth, alpha: 1,
                                      a: wp.baseAddress! + g * outPerGroup * depth, lda: depth, b: cols.baseAddress! + g * depth * pixels,
                                      ldb: pixels, beta: 0, c: output, ldc: pixels)
                                if let bias {
                                    for k in 0..<outPerGroup { for p in 0..<pixels { output[k * pixels + p] += bias[g * outPerGroup + k] } }
                                }
                            }
                        }
                    }
                }
            }
            return [out]
        }
    },
]

/// Bilinear sample of one plane at (y, x), corners outside the image counting as zero.
private func bilinearZero(_ source: [Float], _ plane: Int, _ h: Int, _ w: Int, _ y: Float, _ x: Float) -> Float {
    guard y > -1, y < Float(h), x > -1, x < Float(w), y.isFinite, x.isFinite else { return 0 }
    let y0 = Int(Foundation.floor(y)), x0 = Int(Foundation.floor(x))
    let fy = y - Float(y0), fx = x - Float(x0)
    func at(_ r: Int, _ c: Int) -> Float { r >= 0 && r < h && c >= 0 && c < w ? source[plane + r * w + c] : 0 }
    return (1 - fy) * ((1 - fx) * at(y0, x0) + fx * at(y0, x0 + 1)) + fy * ((1 - fx) * at(y0 + 1, x0) + fx * at(y0 + 1, x0 + 1))
}
