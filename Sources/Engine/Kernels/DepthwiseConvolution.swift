import CKernelShim

/// Depthwise convolution (one input channel per group, outChannels = multiplier * inChannels), any kernel, stride,
/// dilation and pads. input NCHW, weights [M, kh*kw], bias [M] or nil, residual and output N x M x outH x outW.
///
/// Equal strides 1 or 2 run as a 1-D filter in full 16-lane vectors over `FlatWindowLayout` (zero-bordered plane, or
/// its parity planes at stride 2), with no row tails even on 7x7 planes; other strides compute one output at a time
/// from the padded plane. Planes are split across the compute pool.
///
/// With `native` (CPUs with AVX2 + FMA), the flat-window cases run the C shim's plane kernel, which filters straight
/// into the output with the epilogue in registers; the Swift filter + `emitRows` pass is the portable path and twin.
func depthwiseConvolution(_ g: ConvGeometry, input: UnsafePointer<Float>, weights: UnsafePointer<Float>, bias: UnsafePointer<Float>?,
                          residual: UnsafePointer<Float>?, activation: Activation, output: UnsafeMutablePointer<Float>,
                          native: Bool = hasFastLogisticKernel) {
    let oh = g.outHeight, ow = g.outWidth
    let multiplier = g.outChannels / g.inChannels
    let planes = g.batch * g.outChannels
    let inPlane = g.inHeight * g.inWidth, outPlane = oh * ow
    let taps = g.kernelHeight * g.kernelWidth
    let flatLayout = g.flatWindowLayout
    // Any other stride: the same padded plane at stride 1 gives the reads, computed one output at a time.
    let layout = flatLayout ?? FlatWindowLayout(inHeight: g.inHeight, inWidth: g.inWidth, outHeight: 1, outWidth: 1,
                                                window: SlidingWindow(kernelHeight: 1, kernelWidth: 1, padTop: g.padTop, padLeft: g.padLeft,
                                                                      padBottom: g.padBottom, padRight: g.padRight))!
    let rowWidth = flatLayout == nil ? layout.paddedWidth : layout.rowWidth
    let flatCount = flatLayout == nil ? oh * rowWidth : layout.flatCount
    let planeEpilogue = native && flatLayout != nil ? DepthwisePlaneEpilogue(activation) : nil
    // Without the C plane kernel, SiLU / Sigmoid run over the finished plane in the C activation kernel (Swift SIMD
    // in registers calls them out of line); with it, activations it has no epilogue for run after it.
    let lateActivation = planeEpilogue.map { !$0.complete } ?? (activation.logisticKernelFlag != nil)
    parallelRanges(planes, minimumChunk: max(1, 4096 / max(1, outPlane))) { range in
        let scratch = allocateFloats(layout.scratchCount + flatCount + vectorReadSlack)
        defer { scratch.deallocate() }
        layout.prepare(scratch, fill: 0)
        let flat = scratch + layout.scratchCount
        let bases = layout.bases(scratch)
        let planeBases: [UnsafePointer<Float>?] = bases
        var loadedPlane = -1
        for plane in range {
            let n = plane / g.outChannels, m = plane % g.outChannels
            let sourcePlane = n * g.inChannels + m / multiplier
            if sourcePlane != loadedPlane {
                layout.load(input + sourcePlane * inPlane, into: scratch)
                loadedPlane = sourcePlane
            }
            let filter = weights + m * taps
            let b = bias?[m] ?? 0
            let dst = output + plane * outPlane
            if let e = planeEpilogue {
                planeBases.withUnsafeBufferPointer { p in
                    osprey_depthwise_plane_f32(p.baseAddress, Int32(taps), filter, b, Int32(oh), Int32(rowWidth), Int32(ow), dst,
                                               residual.map { $0 + plane * outPlane }, e.code, e.low, e.high)
                }
                if lateActivation { activation.apply(dst, count: outPlane) }
                continue
            }
            if flatLayout == nil && g.strideWidth == 1 {
                rowFilterUnitWidthStride(g, UnsafePointer(scratch), paddedWidth: layout.paddedWidth, filter: filter, bias: b, output: flat)
            } else if flatLayout == nil {
                rowFilter(g, UnsafePointer(scratch), paddedWidth: layout.paddedWidth, filter: filter, bias: b, output: flat)
            } else if taps == 9 {
                flatFilter3x3(bases, filter: filter, bias: b, count: flatCount, output: flat)
            } else {
                flatFilter(bases, filter: filter, bias: b, count: flatCount, output: flat)
            }
            emitRows(flat, rowWidth: rowWidth, rows: oh, width: ow, output: dst, residual: residual.map { $0 + plane * outPlane },
                     activation: lateActivation ? .none : activation)
            if lateActivation { activation.apply(dst, count: outPlane) }
        }
    }
}

/// The epilogue code and clamp bounds of `osprey_depthwise_plane_f32` for an activation; activations it has no code
/// for run as the identity there and `complete` is false (the caller applies them to the finished plane).
struct DepthwisePlaneEpilogue {
    let code: Int32
    let low: Float, high: Float
    let complete: Bool

    init(_ activation: Activation) {
        var (code, low, high, complete) = (Int32(OSPREY_DW_CLAMP), -Float.infinity, Float.infinity, true)
        switch activation {
        case .none: break
        case .relu: low = 0
        case .clip(let lo, let hi): (low, high) = (lo, hi)
        case .silu: code = Int32(OSPREY_DW_SILU)
        case .sigmoid: code = Int32(OSPREY_DW_SIGMOID)
        case .hardSwish: code = Int32(OSPREY_DW_HARDSWISH)
        default: complete = false
        }
        (self.code, self.low, self.high, self.complete) = (code, low, high, complete)
    }
}

/// Output rows out of the flat buffer through the epilogue (residual, activation) in one vector pass.
///
/// A row's last vector may run past its end into the next row, which is written after it and so overwrites it:
/// no per-row copy calls or tails, except at the plane's end (the next plane may belong to another thread).
/// `flat` may be read up to 16 floats past rows * rowWidth.
@inline(__always)
func emitRows(_ flat: UnsafePointer<Float>, rowWidth: Int, rows: Int, width: Int, output: UnsafeMutablePointer<Float>,
                      residual: UnsafePointer<Float>?, activation: Activation) {
    for y in 0..<rows {
        let src = flat + y * rowWidth, dst = output + y * width, res = residual.map { $0 + y * width }
        // Whole vectors while they end inside the plane.
        let room = (rows - y) * width
        var x = 0
        while x < width && x + 16 <= room {
            var v = (src + x).vector(FloatVector.self)
            if let res { v += (res + x).vector(FloatVector.self) }
            (dst + x).store(activation.vector(v))
            x += 16
        }
        while x < width {
            dst[x] = activation(src[x] + (res?[x] ?? 0))
            x += 1
        }
    }
}

/// out[j] = bias + sum_t filter[t] * bases[t][j] for j < count (a multiple of 16).
///
/// 32 outputs at a time with two accumulators each (even and odd taps): four independent FMA chains a quarter as
/// deep as one accumulator's (a 5x5 filter was a 25-FMA chain per vector, bound by FMA latency, not throughput).
private func flatFilter(_ bases: [UnsafePointer<Float>], filter: UnsafePointer<Float>, bias: Float, count: Int,
                        output: UnsafeMutablePointer<Float>) {
    bases.withUnsafeBufferPointer { bases in
        let taps = bases.count, start = SIMD16<Float>(repeating: bias)
        var j = 0
        while j + 32 <= count {
            var a0 = start, a1 = start, b0 = SIMD16<Float>(), b1 = SIMD16<Float>()
            var t = 0
            while t + 1 < taps {
                let w0 = SIMD16(repeating: filter[t]), w1 = SIMD16(repeating: filter[t + 1])
                let p = bases[t] + j, q = bases[t + 1] + j
                multiplyAdd(&a0, p.vector(SIMD16<Float>.self), w0)
                multiplyAdd(&a1, (p + 16).vector(SIMD16<Float>.self), w0)
                multiplyAdd(&b0, q.vector(SIMD16<Float>.self), w1)
                multiplyAdd(&b1, (q + 16).vector(SIMD16<Float>.self), w1)
                t += 2
            }
            if t < taps {
                let w = SIMD16(repeating: filter[t]), p = bases[t] + j
                multiplyAdd(&a0, p.vector(SIMD16<Float>.self), w)
                multiplyAdd(&a1, (p + 16).vector(SIMD16<Float>.self), w)
            }
            (output + j).store(a0 + b0)
            (output + j + 16).store(a1 + b1)
            j += 32
        }
        while j < count {
            var a = start, b = SIMD16<Float>()
            var t = 0
            while t + 1 < taps {
                multiplyAdd(&a, (bases[t] + j).vector(SIMD16<Float>.self), SIMD16(repeating: filter[t]))
                multiplyAdd(&b, (bases[t + 1] + j).vector(SIMD16<Float>.self), SIMD16(repeating: filter[t + 1]))
                t += 2
            }
            if t < taps { multiplyAdd(&a, (bases[t] + j).vector(SIMD16<Float>.self), SIMD16(repeating: filter[t])) }
            (output + j).store(a + b)
            j += 16
        }
    }
}

/// `flatFilter` for 3x3 kernels, the nine weights and bases held in registers and two accumulators for latency.
private func flatFilter3x3(_ bases: [UnsafePointer<Float>], filter: UnsafePointer<Float>, bias: Float, count: Int,
                           output: UnsafeMutablePointer<Float>) {
    let p0 = bases[0], p1 = bases[1], p2 = bases[2], p3 = bases[3], p4 = bases[4]
    let p5 = bases[5], p6 = bases[6], p7 = bases[7], p8 = bases[8]
    let w0 = SIMD16(repeating: filter[0]), w1 = SIMD16(repeating: filter[1]), w2 = SIMD16(repeating: filter[2])
    let w3 = SIMD16(repeating: filter[3]), w4 = SIMD16(repeating: filter[4]), w5 = SIMD16(repeating: filter[5])
    let w6 = SIMD16(repeating: filter[6]), w7 = SIMD16(repeating: filter[7]), w8 = SIMD16(repeating: filter[8])
    let start = SIMD16<Float>(repeating: bias)
    var j = 0
    while j < count {
        var a = start, b = SIMD16<Float>()
        multiplyAdd(&a, (p0 + j).vector(SIMD16<Float>.self), w0)
        multiplyAdd(&b, (p1 + j).vector(SIMD16<Float>.self), w1)
        multiplyAdd(&a, (p2 + j).vector(SIMD16<Float>.self), w2)
        multiplyAdd(&b, (p3 + j).vector(SIMD16<Float>.self), w3)
        multiplyAdd(&a, (p4 + j).vector(SIMD16<Float>.self), w4)
        multiplyAdd(&b, (p5 + j).vector(SIMD16<Float>.self), w5)
        multiplyAdd(&a, (p6 + j).vector(SIMD16<Float>.self), w6)
        multiplyAdd(&b, (p7 + j).vector(SIMD16<Float>.self), w7)
        multiplyAdd(&a, (p8 + j).vector(SIMD16<Float>.self), w8)
        (output + j).store(a + b)
        j += 16
    }
}

/// `rowFilter` for a horizontal stride of 1 (PP-OCR recognisers' (2, 1) strides): 16 outputs of a row at a time.
/// Lanes past the row's end compute garbage into the row's padding (and up to 15 floats past the last row, inside the
/// caller's read slack), which `emitRows` never reads; their reads stay inside the scratch that follows the plane.
private func rowFilterUnitWidthStride(_ g: ConvGeometry, _ padded: UnsafePointer<Float>, paddedWidth: Int, filter: UnsafePointer<Float>,
                                      bias: Float, output: UnsafeMutablePointer<Float>) {
    let kh = g.kernelHeight, kw = g.kernelWidth
    for y in 0..<g.outHeight {
        let rowBase = padded + y * g.strideHeight * paddedWidth
        var x = 0
        while x < g.outWidth {
            var acc = SIMD16<Float>(repeating: bias)
            for ky in 0..<kh {
                let row = rowBase + ky * g.dilationHeight * paddedWidth + x
                for kx in 0..<kw {
                    multiplyAdd(&acc, (row + kx * g.dilationWidth).vector(SIMD16<Float>.self), SIMD16(repeating: filter[ky * kw + kx]))
                }
            }
            (output + y * paddedWidth + x).store(acc)
            x += 16
        }
    }
}

/// Unequal or large strides: out[y*PW + x] = bias + sum filter[ky][kx] * padded[(y*sh + ky*dh)*PW + x*sw + kx*dw], one value at a time.
private func rowFilter(_ g: ConvGeometry, _ padded: UnsafePointer<Float>, paddedWidth: Int, filter: UnsafePointer<Float>,
                       bias: Float, output: UnsafeMutablePointer<Float>) {
    for y in 0..<g.outHeight {
        for x in 0..<g.outWidth {
            let base = padded + y * g.strideHeight * paddedWidth + x * g.strideWidth
            var acc = bias
            for ky in 0..<g.kernelHeight {
                for kx in 0..<g.kernelWidth {
                    acc += base[ky * g.dilationHeight * paddedWidth + kx * g.dilationWidth] * filter[ky * g.kernelWidth + kx]
                }
            }
            output[y * paddedWidth + x] = acc
        }
    }
}
