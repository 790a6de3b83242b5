import CKernelShim

/// The L2 cache of one core in bytes, from sysfs (`index2/size`, e.g. "1024K"); 512 KiB when absent.
let levelTwoCacheBytes: Int = {
    let directory = "/sys/devices/system/cpu/cpu0/cache/index2/"
    func read(_ name: String) -> String? {
        (try? String(contentsOfFile: directory + name, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
    }
    return read("level") == "2" ? read("size").flatMap(CompiledModel.cacheBytes) ?? 512 << 10 : 512 << 10
}()

/// Output rows per band of an inverted-residual block: the expanded input rows a band needs plus its depthwise
/// output fit in half of L2, so the expanded tensor never goes through memory.
func invertedResidualBandRows(_ g: ChannelsLastDepthwiseGeometry) -> Int {
    let inRow = g.inWidth * g.channels * 4, outRow = g.outWidth * g.channels * 4
    let budget = levelTwoCacheBytes / 2 - max(0, g.kernelHeight - g.strideHeight) * inRow
    return max(1, min(g.outHeight, budget / max(1, g.strideHeight * inRow + outRow)))
}

/// An inverted-residual block channels-last: expand 1x1 (input [N][H][W][Cin] times `expand`, bias, activation as an
/// epilogue code), the depthwise conv of `g` (whose channels are the expanded ones) and the project 1x1 with bias,
/// residual and `activation`. With the AVX-512 product each thread runs bands of output rows: it expands only the
/// input rows the band's depthwise reads (the rows shared with the previous band carried over, not recomputed),
/// runs the depthwise on them and projects the band, all in two per-thread scratch buffers that stay in L2.
/// Elsewhere, and on small images split across threads, the expand runs over the whole tensor, then
/// `channelsLastSeparable`. Without `pointwise` (a block whose squeeze-and-excitation needs the whole depthwise
/// output) the depthwise output, with the depthwise epilogue, is the output and `residual` and `activation` are unused; then `means`, when given, receives its channel means [N][C]
/// (the block's squeeze-and-excitation pool), summed by each thread from the bands it wrote.
/// `bandRows` overrides the band height (tests of band boundaries).
func channelsLastInvertedResidual(_ g: ChannelsLastDepthwiseGeometry, input: UnsafePointer<Float>, expand e: PackedMatrixB,
                                  expandBias: UnsafePointer<Float>?, expandActivation: Activation, depthwiseWeights: UnsafePointer<Float>,
                                  depthwiseBias: UnsafePointer<Float>?, depthwiseEpilogue: (code: Int32, low: Float, high: Float),
                                  pointwise w: PackedMatrixB?, pointwiseBias: UnsafePointer<Float>?, residual: UnsafePointer<Float>?,
                                  activation: Activation, output: UnsafeMutablePointer<Float>, means: UnsafeMutablePointer<Float>? = nil,
                                  bandRows: Int? = nil) {
    let cin = e.depth, c = g.channels, m = w?.columns ?? 0
    let expandEpilogue = DepthwisePlaneEpilogue(expandActivation)
    // Every compute thread needs work: at batch 1 the image's rows split into one segment per thread (each segment
    // expands its first band's halo rows again). Below about a million multiply-adds a wake-up costs more than it saves.
    let pixels = g.outHeight * g.outWidth
    let wanted = (EngineThreads.threads + g.batch - 1) / max(1, g.batch)
    let work = g.inHeight * g.inWidth * cin * c + pixels * c * max(m, 1)
    let segments = wanted > 1 && work >= 1 << 20 ? min(wanted, g.outHeight) : 1
    // On small images the segments' halo rows are a large share of the expand (a 5x5 at 7x7 in two segments expanded
    // 11 rows for 7): then the expand runs once over the whole tensor, split across the threads by columns, and the
    // depthwise after it (one more hand-off, no repeated work). It paid at 7x7 (EfficientNet-B0's last blocks 0.75-0.8
    // at two threads) but not at 14x14 (1.14-1.26), where the expanded image (376-527 KB) no longer stays in L2.
    let expandedImageBytes = g.inHeight * g.inWidth * c * MemoryLayout<Float>.size
    let haloHeavy = segments > 1 && bandRows == nil && (segments - 1) * max(0, g.kernelHeight - g.strideHeight) * 4 >= g.inHeight
        && expandedImageBytes <= levelTwoCacheBytes / 4
    guard hasChannelsLastProduct, expandEpilogue.complete, !haloHeavy else {
        let expanded = allocateFloats(g.batch * g.inHeight * g.inWidth * c)
        defer { expanded.deallocate() }
        pointwiseProduct(input, rows: g.batch * g.inHeight * g.inWidth, e, bias: expandBias, residual: nil, activation: expandActivation,
                         output: expanded)
        guard let w else {
            channelsLastDepthwiseRows(g, input: expanded, weights: depthwiseWeights, bias: depthwiseBias, residual: nil,
                                      epilogue: depthwiseEpilogue, after: nil, output: output, means: means)
            return
        }
        channelsLastSeparable(g, input: expanded, depthwiseWeights: depthwiseWeights, depthwiseBias: depthwiseBias,
                              depthwiseEpilogue: depthwiseEpilogue, pointwise: w, pointwiseBias: pointwiseBias, residual: residual,
                              activation: activation, output: output)
        return
    }
    let band = max(1, min(g.outHeight, bandRows ?? invertedResidualBandRows(g)))
    let segmentRows = (g.outHeight + segments - 1) / max(1, segments)
    let inRow = g.inWidth * c, outRow = g.outWidth * c, inImage = g.inHeight * g.inWidth * cin
    let maxInputRows = min(g.inHeight, (band - 1) * g.strideHeight + g.kernelHeight), outImage = g.outHeight * outRow
    let epilogue = DepthwisePlaneEpilogue(activation)
    let image = g.image
    let sums = w == nil && means != nil ? ChannelSums(batch: g.batch, tasksPerImage: segments, channels: c) : nil
    defer { sums?.deallocate() }
    parallelRanges(g.batch * segments) { range in
        let expanded = allocateFloats(maxInputRows * inRow), middle = w == nil ? nil : allocateFloats(band * outRow)
        defer { expanded.deallocate(); middle?.deallocate() }
        for task in range {
            let n = task / segments, segmentEnd = min(g.outHeight, (task % segments + 1) * segmentRows)
            var first = (task % segments) * segmentRows
            // Expanded input rows [have, haveEnd) sit at the start of `expanded`.
            var have = 0, haveEnd = 0
            while first < segmentEnd {
                let end = min(segmentEnd, first + band)
                let need = max(0, first * g.strideHeight - g.padTop)
                let needEnd = max(need, min(g.inHeight, (end - 1) * g.strideHeight - g.padTop + g.kernelHeight))
                var start = need
                if need >= have && need < haveEnd {
                    // The previous band's last rows are this band's first: move them to the front (a few rows, overlapping).
                    expanded.update(from: expanded + (need - have) * inRow, count: (haveEnd - need) * inRow)
                    start = haveEnd
                }
                if needEnd > start {
                    osprey_nhwc_pointwise_f32(0, (needEnd - start) * g.inWidth, cin, input + n * inImage + start * g.inWidth * cin, cin,
                                              e.pointer, c, expandBias, nil, expanded + (start - need) * inRow, expandEpilogue.code,
                                              expandEpilogue.low, expandEpilogue.high)
                }
                (have, haveEnd) = (need, needEnd)
                // The depthwise kernel addresses rows from the image's top: shift both buffers so row `need` and
                // output row `first` land at their starts.
                withUnsafePointer(to: image) { geometry in
                    osprey_nhwc_depthwise_f32(geometry, expanded - need * inRow, depthwiseWeights, depthwiseBias, first, end,
                                              middle.map { $0 - first * outRow } ?? output + n * outImage, nil, depthwiseEpilogue.code,
                                              depthwiseEpilogue.low, depthwiseEpilogue.high)
                }
                guard let w, let middle else {
                    sums?.add(task: task, output + n * outImage + first * outRow, pixels: (end - first) * g.outWidth)
                    first = end
                    continue
                }
                let rows = (end - first) * g.outWidth, at = (n * pixels + first * g.outWidth) * m
                osprey_nhwc_pointwise_f32(0, rows, c, middle, c, w.pointer, m, pointwiseBias, residual.map { $0 + at }, output + at,
                                          epilogue.code, epilogue.low, epilogue.high)
                if !epilogue.complete { activation.apply(output + at, count: rows * m) }
                first = end
            }
        }
    }
    if let sums, let means { sums.finish(into: means, batch: g.batch, pixels: pixels) }
}
