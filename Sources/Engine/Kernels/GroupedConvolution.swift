import CKernelShim

/// Grouped convolution with few channels per group (RegNet's and ResNeXt-style groups of 8), and convolutions with
/// few input channels at all (image stems), as a direct filter.
///
/// The dense path would pack every group's columns and run 6-row panels over 8 channels (a third padding), with the
/// packing costing as much as the products on 7x7 and 14x14 planes. Here each input plane of a group is loaded once
/// into its `FlatWindowLayout` (zero border; parity planes at stride 2) and 4 output channels x 16 flat outputs at a
/// time accumulate sum_c sum_t w[m][c][t] * P_c[j + offset_t] in registers: per tap one 16-lane load feeds 4 FMAs.
/// Columns past the output width are computed and dropped, as in the depthwise filter: on AVX-512F with a clamp
/// epilogue the C block packs each chunk's output lanes into the output planes itself (`FlatChunks`), else a flat
/// buffer is emitted row by row. Weights are 4-row panels
/// (`ConvWeightPanels` with rows 4); panels of groups of images are split across the compute pool. Image n of
/// the output starts `outputImageStride` floats after image n - 1 (default: compact), the residual is compact.
func groupedConvolution(_ g: ConvGeometry, layout: FlatWindowLayout, weights: ConvWeightPanels, bias: UnsafePointer<Float>?,
                        residual: UnsafePointer<Float>?, activation: Activation, input: UnsafePointer<Float>,
                        output: UnsafeMutablePointer<Float>, outputImageStride: Int? = nil) {
    let cg = g.inChannelsPerGroup, mg = g.outChannelsPerGroup
    let taps = g.kernelHeight * g.kernelWidth
    let inPlane = g.inHeight * g.inWidth, outPlane = g.outHeight * g.outWidth
    let imageStride = outputImageStride ?? g.outChannels * outPlane
    let channelFloats = layout.paddedCount + layout.phaseCount
    let flatCount = layout.flatCount, rows = weights.rows
    // Tap t of input channel c reads from scratch + offsets[c * taps + t] + j.
    let offsets = (0..<cg * taps).map { $0 / taps * channelFloats + layout.tapOffsets[$0 % taps] }
    // AVX-512F: the same block as 4 x 32 flat outputs in 8 zmm accumulators (C); the Swift SIMD16 filter otherwise.
    let wide = osprey_float_avx512() != 0
    // With a clamp epilogue (or none) the C block stores straight into the output planes; other activations, and the
    // Swift filter, go through the flat buffer and `emitRows`.
    let directBounds = wide && rows == 4 ? activation.registerClampBounds : nil
    let flatChunks = directBounds == nil ? nil : FlatChunks(layout)
    // A task is one panel of one group of one image; each thread takes one contiguous run of them, so the threads get
    // equal numbers of panels (13 groups at two threads: 13 panels each, not 7 groups and 6) and fill their scratch's
    // zero borders once (`load` rewrites only the interior; a fill per part of a finer split cost 3% of RegNetY at
    // two threads). A group whose panels straddle two runs is loaded by both.
    let panels = weights.panels
    parallelRanges(g.batch * g.groups * panels, partsPerThread: 1) { tasks in
        withThreadScratch(cg * channelFloats + rows * flatCount + vectorReadSlack) { scratch in
            for c in 0..<cg { layout.prepare(scratch + c * channelFloats, fill: 0) }
            let flat = scratch + cg * channelFloats
            var loaded = -1
            offsets.withUnsafeBufferPointer { offsets in
                for task in tasks {
                    let block = task % panels, n = task / panels / g.groups, group = task / panels % g.groups
                    if task / panels != loaded {
                        for c in 0..<cg {
                            layout.load(input + (n * g.inChannels + group * cg + c) * inPlane, into: scratch + c * channelFloats)
                        }
                        loaded = task / panels
                    }
                    let first = group * mg + block * rows, valid = min(rows, mg - block * rows)
                    var start = SIMD4<Float>()
                    if let bias { for r in 0..<valid { start[r] = bias[first + r] } }
                    let panel = weights.panel(group: group, index: block)
                    if let flatChunks, let directBounds {
                        withUnsafeBytes(of: start) { s in
                            osprey_grouped_block_direct_avx512(UnsafePointer(scratch), offsets.baseAddress!, offsets.count, panel,
                                                               s.baseAddress!.assumingMemoryBound(to: Float.self), flatCount,
                                                               flatChunks.masks, flatChunks.destinations, valid,
                                                               output + n * imageStride + first * outPlane, outPlane,
                                                               residual.map { $0 + (n * g.outChannels + first) * outPlane },
                                                               directBounds.low, directBounds.high)
                        }
                        continue
                    }
                    if wide && rows == 4 {
                        withUnsafeBytes(of: start) { s in
                            osprey_grouped_block_avx512(UnsafePointer(scratch), offsets.baseAddress!, offsets.count, panel,
                                                        s.baseAddress!.assumingMemoryBound(to: Float.self), flatCount, flat)
                        }
                    } else {
                        filterBlock(UnsafePointer(scratch), offsets: offsets, panel: panel, start: start, count: flatCount, output: flat)
                    }
                    for r in 0..<valid {
                        let plane = (n * g.outChannels + first + r) * outPlane
                        emitRows(flat + r * flatCount, rowWidth: layout.rowWidth, rows: g.outHeight, width: g.outWidth,
                                 output: output + n * imageStride + (first + r) * outPlane, residual: residual.map { $0 + plane },
                                 activation: activation)
                    }
                }
            }
        }
    }
}

/// Four output channels of one group over the flat outputs j < count (a multiple of 16): row r of `output`
/// (count floats apart) = start[r] + sum_k panel[k * 4 + r] * (scratch + offsets[k])[j].
@inline(__always)
private func filterBlock(_ scratch: UnsafePointer<Float>, offsets: UnsafeBufferPointer<Int>, panel: UnsafePointer<Float>, start: SIMD4<Float>,
                         count: Int, output: UnsafeMutablePointer<Float>) {
    let depth = offsets.count
    var j = 0
    while j < count {
        var c0 = SIMD16<Float>(repeating: start[0]), c1 = SIMD16<Float>(repeating: start[1])
        var c2 = SIMD16<Float>(repeating: start[2]), c3 = SIMD16<Float>(repeating: start[3])
        var a = panel
        let base = scratch + j
        for k in 0..<depth {
            let v = (base + offsets[k]).vector(SIMD16<Float>.self)
            multiplyAdd(&c0, SIMD16(repeating: a[0]), v)
            multiplyAdd(&c1, SIMD16(repeating: a[1]), v)
            multiplyAdd(&c2, SIMD16(repeating: a[2]), v)
            multiplyAdd(&c3, SIMD16(repeating: a[3]), v)
            a += 4
        }
        (output + j).store(c0)
        (output + count + j).store(c1)
        (output + 2 * count + j).store(c2)
        (output + 3 * count + j).store(c3)
        j += 16
    }
}

extension ConvGeometry {
    /// The flat layout of one input plane, or nil unless the strides are equal and 1 or 2.
    var flatWindowLayout: FlatWindowLayout? {
        FlatWindowLayout(inHeight: self.inHeight, inWidth: self.inWidth, outHeight: outHeight, outWidth: outWidth, window: parts.window)
    }
}

/// Convolutions `groupedConvolution` runs: groups of 2-16 input channels (one is depthwise) and at most 16 outputs,
/// where 6-row panels waste the most and packing costs the most relative to the products; and ungrouped convs with at
/// most 4 input channels (RGB stems: MobileNetV2's 3x3 stride-2 stem 0.60 -> 0.35-0.50 ms, a 7x7 stem unchanged).
func groupedFilterFits(groups: Int, inPerGroup: Int, outPerGroup: Int) -> Bool {
    (groups > 1 && inPerGroup > 1 && inPerGroup <= 16 && outPerGroup <= 16) || (groups == 1 && inPerGroup <= 4)
}
