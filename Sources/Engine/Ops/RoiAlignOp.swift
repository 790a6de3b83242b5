import Foundation
import Tensor

/// One bilinear sample of RoiAlign: four plane offsets and their weights (all zero outside the feature map).
private struct BilinearTap {
    var offsets: (Int, Int, Int, Int) = (0, 0, 0, 0)
    var weights: (Float, Float, Float, Float) = (0, 0, 0, 0)
}

/// The bilinear tap at (y, x) on an h x w plane, with Caffe2/Detectron's clamping (what ONNX's reference and onnxruntime do).
private func bilinearTap(y yIn: Float, x xIn: Float, h: Int, w: Int) -> BilinearTap {
    // NaN coordinates (a malformed box) sample nothing rather than trapping in Int(_:).
    guard yIn >= -1, yIn <= Float(h), xIn >= -1, xIn <= Float(w) else { return BilinearTap() }
    var y = max(yIn, 0), x = max(xIn, 0)
    var yLow = Int(y), xLow = Int(x), yHigh: Int, xHigh: Int
    if yLow >= h - 1 { yLow = h - 1; yHigh = yLow; y = Float(yLow) } else { yHigh = yLow + 1 }
    if xLow >= w - 1 { xLow = w - 1; xHigh = xLow; x = Float(xLow) } else { xHigh = xLow + 1 }
    let ly = y - Float(yLow), lx = x - Float(xLow), hy = 1 - ly, hx = 1 - lx
    return BilinearTap(offsets: (yLow * w + xLow, yLow * w + xHigh, yHigh * w + xLow, yHigh * w + xHigh),
                       weights: (hy * hx, hy * lx, ly * hx, ly * lx))
}

/// RoiAlign (opset 10 and 16): X [N, C, H, W], rois [R, 4] as (x1, y1, x2, y2), batch_indices [R] -> [R, C, oh, ow].
let roiAlignOperators: OperatorTable = [
    "RoiAlign": { ctx in
        // Opset 10 had no attribute and behaved as output_half_pixel; opset 16 defaults to half_pixel.
        let transform = try ctx.string("coordinate_transformation_mode", ctx.opset >= 16 ? "half_pixel" : "output_half_pixel")
        let mode = try ctx.string("mode", "avg")
        let (outH, outW) = (try ctx.int("output_height", 1), try ctx.int("output_width", 1))
        let samplingRatio = try ctx.int("sampling_ratio", 0)
        let spatialScale = try ctx.float("spatial_scale", 1)
        guard transform == "half_pixel" || transform == "output_half_pixel" else {
            throw ctx.unsupported("coordinate_transformation_mode", "'\(transform)' (expected half_pixel or output_half_pixel)")
        }
        guard mode == "avg" || mode == "max" else { throw ctx.unsupported("mode", "'\(mode)' (expected avg or max)") }
        guard outH >= 1, outW >= 1, outH <= 1 << 12, outW <= 1 << 12 else {
            throw ctx.unsupported("output_height/output_width", "= \(outH) x \(outW) (expected 1...4096)")
        }
        guard samplingRatio >= 0, samplingRatio <= 1 << 10 else { throw ctx.unsupported("sampling_ratio", "= \(samplingRatio) (expected 0...1024)") }
        let halfPixel = transform == "half_pixel", average = mode == "avg"
        return PreparedKernel { inputs in
            let x = try castTensor(try inputs.required(0, ctx), to: .float32, ctx)
            let roisT = try inputs.required(1, ctx), indicesT = try inputs.required(2, ctx)
            guard x.rank == 4, roisT.rank == 2, roisT.shape[1] == 4, indicesT.rank == 1, indicesT.shape[0] == roisT.shape[0] else {
                throw ctx.error(.executionFailed, "expected X [N, C, H, W], rois [R, 4] and batch_indices [R], got \(x), \(roisT), \(indicesT)")
            }
            let (n, c, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
            let count = roisT.shape[0]
            let rois = try castTensor(roisT, to: .float32, ctx).scalars(as: Float.self), batchIndices = indicesT.ints
            for b in batchIndices where b < 0 || b >= n { throw ctx.error(.executionFailed, "batch index \(b) is out of range for \(n) images") }
            let src = x.scalars(as: Float.self)
            let out = src.withUnsafeBufferPointer { image in Tensor.makeFloat(shape: [count, c, outH, outW]) { dst in
                guard h > 0, w > 0, let image = image.baseAddress else { dst.initialize(repeating: 0, count: count * c * outH * outW); return }
                var taps: [BilinearTap] = []
                for r in 0..<count {
                    let offset: Float = halfPixel ? 0.5 : 0
                    let startW = rois[r * 4] * spatialScale - offset, startH = rois[r * 4 + 1] * spatialScale - offset
                    var roiW = rois[r * 4 + 2] * spatialScale - offset - startW, roiH = rois[r * 4 + 3] * spatialScale - offset - startH
                    if !halfPixel { roiW = max(roiW, 1); roiH = max(roiH, 1) }
                    let binH = roiH / Float(outH), binW = roiW / Float(outW)
                    // sampling_ratio 0: an adaptive grid of ceil(roi / output) samples per bin (capped against hostile boxes).
                    func grid(_ bin: Float) -> Int { samplingRatio > 0 ? samplingRatio : bin.isFinite ? Int(min(max(bin.rounded(.up), 0), 1024)) : 0 }
                    let (gridH, gridW) = (grid(binH), grid(binW))
                    let samples = max(gridH * gridW, 1)
                    taps.removeAll(keepingCapacity: true)
                    for ph in 0..<outH {
                        for pw in 0..<outW {
                            for iy in 0..<gridH {
                                let y = startH + Float(ph) * binH + (Float(iy) + 0.5) * binH / Float(gridH)
                                for ix in 0..<gridW {
                                    let xx = startW + Float(pw) * binW + (Float(ix) + 0.5) * binW / Float(gridW)
                                    taps.append(bilinearTap(y: y, x: xx, h: h, w: w))
                                }
                            }
                        }
                    }
                    let perBin = gridH * gridW
                    for ch in 0..<c {
                        let plane = image + (batchIndices[r] * c + ch) * h * w
                        for bin in 0..<(outH * outW) {
                            var value: Float = 0
                            for t in 0..<perBin {
                                let tap = taps[bin * perBin + t], o = tap.offsets, k = tap.weights
                                if average {
                                    value += k.0 * plane[o.0] + k.1 * plane[o.1] + k.2 * plane[o.2] + k.3 * plane[o.3]
                                } else {
                                    let m = max(max(k.0 * plane[o.0], k.1 * plane[o.1]), max(k.2 * plane[o.2], k.3 * plane[o.3]))
                                    value = t == 0 ? m : max(value, m)
                                }
                            }
                            dst[(r * c + ch) * outH * outW + bin] = average ? value / Float(samples) : value
                        }
                    }
                }
            } }
            return [try castTensor(out, to: inputs[0]!.dtype, ctx)]
        }
    },
]
