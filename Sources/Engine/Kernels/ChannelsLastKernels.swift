import CKernelShim

/// A channels-last depthwise convolution's geometry (one filter per channel, dilation 1).
struct ChannelsLastDepthwiseGeometry: Sendable {
    /// Images, input rows and columns, channels.
    var batch: Int, inHeight: Int, inWidth: Int, channels: Int
    /// Kernel size, strides and leading pads (trailing pads only decide the output size).
    var kernelHeight: Int, kernelWidth: Int, strideHeight: Int, strideWidth: Int, padTop: Int, padLeft: Int
    /// Output rows and columns.
    var outHeight: Int, outWidth: Int

    /// The C kernel's per-image geometry.
    var image: osprey_nhwc_depthwise_geometry {
        osprey_nhwc_depthwise_geometry(in_height: inHeight, in_width: inWidth, channels: channels, kernel_height: kernelHeight,
                                       kernel_width: kernelWidth, stride_height: strideHeight, stride_width: strideWidth,
                                       pad_top: padTop, pad_left: padLeft, out_height: outHeight, out_width: outWidth)
    }
}

/// Depthwise weights [C, 1, kH, kW] repacked to [kH][kW][C], so each tap reads a contiguous vector of channels.
func channelsLastDepthwiseWeights(_ w: UnsafePointer<Float>, channels: Int, taps: Int) -> [Float] {
    var packed = [Float](repeating: 0, count: channels * taps)
    for c in 0..<channels { for t in 0..<taps { packed[t * channels + c] = w[c * taps + t] } }
    return packed
}

/// A LayerNormalization over the channels of each pixel (ConvNeXt's after its depthwise conv): gamma and beta of
/// one value per channel.
struct ChannelNorm: Sendable {
    /// Scale and shift, one value per channel.
    var gamma: [Float], beta: [Float]
    /// Added to the variance.
    var epsilon: Float
}

/// NHWC depthwise convolution: input [N][H][W][C], weights [kH][kW][C], output and residual [N][outH][outW][C];
/// activation(bias + taps + residual), then `norm` over each pixel's channels. Output rows are split across the
/// compute pool; the C kernel applies Relu, Clip, SiLU, Sigmoid and HardSwish in registers, other activations and the
/// norm run over each finished row block while it is in cache.
func channelsLastDepthwise(_ g: ChannelsLastDepthwiseGeometry, input: UnsafePointer<Float>, weights: UnsafePointer<Float>,
                           bias: UnsafePointer<Float>?, residual: UnsafePointer<Float>?, activation: Activation,
                           output: UnsafeMutablePointer<Float>, norm: ChannelNorm? = nil) {
    let epilogue = DepthwisePlaneEpilogue(activation)
    let inImage = g.inHeight * g.inWidth * g.channels, outRow = g.outWidth * g.channels
    // One read-only copy per thread: the C kernel takes it by pointer.
    let image = g.image
    let rows = g.batch * g.outHeight
    parallelRanges(rows, minimumChunk: max(1, 16_384 / max(1, outRow))) { range in
        var row = range.lowerBound
        while row < range.upperBound {
            let n = row / g.outHeight, first = row % g.outHeight, end = min(g.outHeight, first + range.upperBound - row)
            let outImage = n * g.outHeight * outRow
            withUnsafePointer(to: image) { geometry in
                osprey_nhwc_depthwise_f32(geometry, input + n * inImage, weights, bias, first, end, output + outImage,
                                          residual.map { $0 + outImage }, epilogue.code, epilogue.low, epilogue.high)
            }
            if !epilogue.complete { activation.apply(output + outImage + first * outRow, count: (end - first) * outRow) }
            if let norm { normalizePixels(output + outImage + first * outRow, pixels: (end - first) * g.outWidth, norm) }
            row += end - first
        }
    }
}

/// `norm` over each of `pixels` NHWC pixels of `norm.gamma.count` channels, in place, on the calling thread.
private func normalizePixels(_ data: UnsafeMutablePointer<Float>, pixels: Int, _ norm: ChannelNorm) {
    let c = norm.gamma.count
    norm.gamma.withUnsafeBufferPointer { g in
        norm.beta.withUnsafeBufferPointer { b in
            for p in 0..<pixels {
                _ = layerNormRow(data + p * c, data + p * c, width: c, gamma: g.baseAddress!, beta: b.baseAddress!, epsilon: norm.epsilon)
            }
        }
    }
}

/// `channelsLastDepthwise` as plain loops: the twin the C bodies are tested against.
func channelsLastDepthwiseReference(_ g: ChannelsLastDepthwiseGeometry, input: UnsafePointer<Float>, weights: UnsafePointer<Float>,
                                    bias: UnsafePointer<Float>?, residual: UnsafePointer<Float>?, activation: Activation,
                                    output: UnsafeMutablePointer<Float>) {
    let c = g.channels
    for n in 0..<g.batch {
        for y in 0..<g.outHeight {
            for x in 0..<g.outWidth {
                let at = ((n * g.outHeight + y) * g.outWidth + x) * c
                for ch in 0..<c {
                    var sum = bias?[ch] ?? 0
                    for i in 0..<g.kernelHeight {
                        let iy = y * g.strideHeight - g.padTop + i
                        guard iy >= 0 && iy < g.inHeight else { continue }
                        for j in 0..<g.kernelWidth {
                            let ix = x * g.strideWidth - g.padLeft + j
                            guard ix >= 0 && ix < g.inWidth else { continue }
                            sum += input[((n * g.inHeight + iy) * g.inWidth + ix) * c + ch] * weights[(i * g.kernelWidth + j) * c + ch]
                        }
                    }
                    output[at + ch] = activation(sum + (residual?[at + ch] ?? 0))
                }
            }
        }
    }
}

/// NHWC pointwise (1x1, stride 1, one group) convolution: out[P x M] = activation(in[P x C] * W + bias + residual)
/// with the P = N * H * W pixels as rows of A read in place and W packed once; `scale` [N][C] (or nil) multiplies
/// image n's input channels first (a folded squeeze-and-excitation Mul), through one scaled copy of each image or,
/// for images of many pixels, of the weights.
func channelsLastPointwise(_ input: UnsafePointer<Float>, batch: Int, pixels: Int, _ w: PackedMatrixB, bias: UnsafePointer<Float>?,
                           residual: UnsafePointer<Float>?, scale: UnsafePointer<Float>?, activation: Activation,
                           output: UnsafeMutablePointer<Float>) {
    let c = w.depth, m = w.columns
    guard let scale else {
        pointwiseProduct(input, rows: batch * pixels, w, bias: bias, residual: residual, activation: activation, output: output)
        return
    }
    // Scaling the weights' rows (C x M) per image touches fewer values than scaling the activations (pixels x C) when
    // the image has more pixels than the padded outputs (EfficientNet's 56x56 and 28x28 projections); the result
    // differs only in rounding.
    let scaleWeights = pixels > (m + 15) / 16 * 16
    // Scaled weights inside the tasks when each image is one task; with fewer images than threads an image's tasks
    // would each scale the same weights (EfficientNet-B0 batch 1, two threads: 1.3% slower), so it is scaled once.
    if hasChannelsLastProduct && (!scaleWeights || batch >= EngineThreads.threads) {
        scaledPointwiseProduct(input, batch: batch, pixels: pixels, w, bias: bias, residual: residual, scale: scale, scaleWeights: scaleWeights,
                               activation: activation, output: output)
        return
    }
    if scaleWeights {
        for n in 0..<batch {
            let scaledWeights = PackedMatrixB(w, scalingRowsBy: scale + n * c)
            pointwiseProduct(input + n * pixels * c, rows: pixels, scaledWeights, bias: bias, residual: residual.map { $0 + n * pixels * m },
                             activation: activation, output: output + n * pixels * m)
        }
        return
    }
    let scaled = allocateFloats(pixels * c)
    defer { scaled.deallocate() }
    for n in 0..<batch {
        let source = input + n * pixels * c, factors = scale + n * c
        parallelRanges(pixels, minimumChunk: max(1, 8192 / max(1, c))) { range in
            for p in range {
                let s = source + p * c, d = scaled + p * c
                for k in 0..<c { d[k] = s[k] * factors[k] }
            }
        }
        pointwiseProduct(scaled, rows: pixels, w, bias: bias, residual: residual.map { $0 + n * pixels * m }, activation: activation,
                         output: output + n * pixels * m)
    }
}

/// `channelsLastPointwise` with a channel scale, on the C kernel, in one parallel region: each task (an image, or a
/// `PointwiseSplit` task of one image when the images are fewer than the threads) scales its own rows, or with
/// `scaleWeights` its strips of the weights, into a scratch and multiplies. It was a scaling pass and then a product per
/// image (two hand-offs per image, the images one after the other; the weights scaled on the calling thread while the
/// others waited: MobileNetV3-Large batch 8 spent 4% of its two-thread time there), each computing the same values.
private func scaledPointwiseProduct(_ input: UnsafePointer<Float>, batch: Int, pixels: Int, _ w: PackedMatrixB, bias: UnsafePointer<Float>?,
                                    residual: UnsafePointer<Float>?, scale: UnsafePointer<Float>, scaleWeights: Bool, activation: Activation,
                                    output: UnsafeMutablePointer<Float>) {
    let c = w.depth, m = w.columns
    let epilogue = DepthwisePlaneEpilogue(activation)
    let split = PointwiseSplit(rows: pixels, columns: m, depth: c, threads: max(1, EngineThreads.threads / max(1, batch)))
    parallelFor(batch * split.tasks) { index in
        let n = index / split.tasks
        let (bands, strips) = split.task(index % split.tasks)
        let first = bands.lowerBound * 6, end = min(pixels, bands.upperBound * 6)
        guard first < end else { return }
        let rows = end - first
        let source = input + (n * pixels + first) * c, factors = scale + n * c
        let at = (n * pixels + first) * m
        if scaleWeights {
            // Only this task's strips of the image's scaled weights.
            let weights = allocateFloats(w.strips * c * 16)
            defer { weights.deallocate() }
            w.scaleRows(strips: strips, by: factors, into: weights)
            osprey_nhwc_pointwise_f32_strips(0, rows, strips.lowerBound, strips.upperBound, c, source, c, weights, m, bias, residual.map { $0 + at },
                                             output + at, epilogue.code, epilogue.low, epilogue.high)
        } else {
            let scratch = allocateFloats(rows * c)
            defer { scratch.deallocate() }
            for p in 0..<rows {
                let s = source + p * c, d = scratch + p * c
                for k in 0..<c { d[k] = s[k] * factors[k] }
            }
            osprey_nhwc_pointwise_f32_strips(0, rows, strips.lowerBound, strips.upperBound, c, scratch, c, w.pointer, m, bias, residual.map { $0 + at },
                                             output + at, epilogue.code, epilogue.low, epilogue.high)
        }
        if !epilogue.complete {
            let low = strips.lowerBound * 16, high = min(m, strips.upperBound * 16)
            for r in 0..<rows where low < high { activation.apply(output + at + r * m + low, count: high - low) }
        }
    }
}

/// Whether the C shim's AVX-512 channels-last product runs on this CPU (read per call: tests switch AVX-512 off).
var hasChannelsLastProduct: Bool { osprey_nhwc_pointwise_fast() == 1 }

/// activation(A [rows x depth] * B + bias + residual): the C kernel with its epilogue in registers where it runs
/// (tasks of `PointwiseSplit` spread over the compute pool), else `packedMatmul`.
func pointwiseProduct(_ a: UnsafePointer<Float>, rows: Int, _ w: PackedMatrixB, bias: UnsafePointer<Float>?, residual: UnsafePointer<Float>?,
                      activation: Activation, output: UnsafeMutablePointer<Float>) {
    guard hasChannelsLastProduct else {
        packedMatmul(a, lda: w.depth, rows: rows, w, bias: bias, residual: residual, activation: activation, out: output)
        return
    }
    let epilogue = DepthwisePlaneEpilogue(activation)
    let columns = w.columns
    let split = PointwiseSplit(rows: rows, columns: columns, depth: w.depth, threads: EngineThreads.threads)
    parallelFor(split.tasks) { task in
        let (band, strips) = split.task(task)
        let first = band.lowerBound * 6, end = min(rows, band.upperBound * 6)
        osprey_nhwc_pointwise_f32_strips(first, end, strips.lowerBound, strips.upperBound, w.depth, a, w.depth, w.pointer, columns, bias,
                                         residual, output, epilogue.code, epilogue.low, epilogue.high)
        if !epilogue.complete {
            let low = strips.lowerBound * 16, high = min(columns, strips.upperBound * 16)
            guard low < high else { return }
            if low == 0 && high == columns {
                activation.apply(output + first * columns, count: (end - first) * columns)
            } else {
                for r in first..<end { activation.apply(output + r * columns + low, count: high - low) }
            }
        }
    }
}

/// How `pointwiseProduct` cuts its output into tasks: ranges of six-row bands times ranges of 16-column strips.
///
/// About eight tasks per thread (claimed in turn, so uneven progress evens out), each of at least `minimumTaskWork`:
/// rows first, and when the rows are few (a 7x7 image has 9 bands, a squeezed vector 1) the strips are cut too, in
/// pairs (the kernel's 32-column blocks). A 49-pixel layer was one task on one thread, a 196-pixel one three tasks.
struct PointwiseSplit: Sendable {
    /// Six-row bands and 16-column strips of the product.
    let bands: Int, strips: Int
    /// Row chunks and column parts; tasks are their product, row chunk major.
    let rowChunks: Int, columnParts: Int

    /// Below this many multiply-adds a second thread's wake-up costs more than it saves.
    static let minimumParallelWork = 1 << 20
    /// Multiply-adds a task should have at least (a few microseconds), so claiming it costs little in comparison.
    static let minimumTaskWork = 1 << 16

    /// The split of a rows x columns product over `depth` for `threads` compute threads.
    init(rows: Int, columns: Int, depth: Int, threads: Int) {
        bands = (rows + 5) / 6
        strips = (columns + 15) / 16
        let work = rows * columns * depth
        guard threads > 1, bands > 0, strips > 0, work >= Self.minimumParallelWork else {
            rowChunks = 1; columnParts = 1; return
        }
        let target = max(threads, min(threads * 8, work / Self.minimumTaskWork))
        rowChunks = min(bands, target)
        columnParts = min((strips + 1) / 2, (target + rowChunks - 1) / rowChunks)
    }

    /// Tasks to run (at least one, even for an empty product).
    var tasks: Int { rowChunks * columnParts }

    /// Task `index`'s bands and strips: even shares, column parts on strip pairs.
    func task(_ index: Int) -> (bands: Range<Int>, strips: Range<Int>) {
        let r = index / columnParts, c = index % columnParts
        let firstBand = bands * r / rowChunks, endBand = bands * (r + 1) / rowChunks
        let pairs = (strips + 1) / 2
        let firstStrip = min(strips, 2 * (pairs * c / columnParts)), endStrip = min(strips, 2 * (pairs * (c + 1) / columnParts))
        return (firstBand..<endBand, firstStrip..<endStrip)
    }
}

/// dst[n][p][c] = src[n][c][p] (NCHW -> NHWC with P = H * W pixels), or the reverse with `toChannelsLast` false.
func convertLayout(_ src: UnsafePointer<Float>, _ dst: UnsafeMutablePointer<Float>, batch: Int, channels: Int, pixels: Int, toChannelsLast: Bool) {
    let rows = toChannelsLast ? channels : pixels, columns = toChannelsLast ? pixels : channels
    // One channel or one pixel: both layouts are the same bytes.
    if rows == 1 || columns == 1 { dst.update(from: src, count: batch * channels * pixels); return }
    UnsafeRawPointer(src).withMemoryRebound(to: UInt32.self, capacity: batch * rows * columns) { s in
        UnsafeMutableRawPointer(dst).withMemoryRebound(to: UInt32.self, capacity: batch * rows * columns) { d in
            blockedTranspose(s, d, outer: batch, rows: rows, columns: columns)
        }
    }
}

/// out[n][c] = mean over pixels of x[n][p][c]: GlobalAveragePool of an NHWC tensor, written as its NCHW [N, C, 1, 1] result.
func channelsLastChannelMeans(_ x: UnsafePointer<Float>, batch: Int, pixels: Int, channels: Int, out: UnsafeMutablePointer<Float>) {
    let inverse = 1 / Float(pixels)
    for n in 0..<batch {
        let o = out + n * channels
        o.initialize(repeating: 0, count: channels)
        let image = x + n * pixels * channels
        for p in 0..<pixels {
            let row = image + p * channels
            var k = 0
            while k + FloatVector.scalarCount <= channels {
                (o + k).store((o + k).vector(FloatVector.self) + (row + k).vector(FloatVector.self))
                k += FloatVector.scalarCount
            }
            while k < channels { o[k] += row[k]; k += 1 }
        }
        for k in 0..<channels { o[k] *= inverse }
    }
}

/// A depthwise conv (epilogue code and bounds as `osprey_nhwc_depthwise_f32` takes them) followed by a pointwise conv:
/// output [N][outH][outW][M] = activation(depthwise(input) * W + bias + residual). With the AVX-512 product, bands of
/// depthwise output rows (about 256 KB) go through a per-thread scratch straight into the product; elsewhere the two
/// run one after the other over whole tensors.
func channelsLastSeparable(_ g: ChannelsLastDepthwiseGeometry, input: UnsafePointer<Float>, depthwiseWeights: UnsafePointer<Float>,
                           depthwiseBias: UnsafePointer<Float>?, depthwiseEpilogue: (code: Int32, low: Float, high: Float),
                           pointwise w: PackedMatrixB, pointwiseBias: UnsafePointer<Float>?, residual: UnsafePointer<Float>?,
                           activation: Activation, output: UnsafeMutablePointer<Float>) {
    let c = g.channels, m = w.columns, pixels = g.outHeight * g.outWidth
    // One read-only copy per thread: the C kernel takes it by pointer.
    let image = g.image
    guard hasChannelsLastProduct else {
        let middle = allocateFloats(g.batch * pixels * c)
        defer { middle.deallocate() }
        let rows = g.batch * g.outHeight, outRow = g.outWidth * c, inImage = g.inHeight * g.inWidth * c
        parallelRanges(rows, minimumChunk: max(1, 16_384 / max(1, outRow))) { range in
            var row = range.lowerBound
            while row < range.upperBound {
                let n = row / g.outHeight, first = row % g.outHeight, end = min(g.outHeight, first + range.upperBound - row)
                withUnsafePointer(to: image) { geometry in
                    osprey_nhwc_depthwise_f32(geometry, input + n * inImage, depthwiseWeights, depthwiseBias, first, end, middle + n * pixels * c,
                                              nil, depthwiseEpilogue.code, depthwiseEpilogue.low, depthwiseEpilogue.high)
                }
                row += end - first
            }
        }
        pointwiseProduct(middle, rows: g.batch * pixels, w, bias: pointwiseBias, residual: residual, activation: activation, output: output)
        return
    }
    var band = max(1, min(g.outHeight, 65_536 / max(1, g.outWidth * c)))
    // Every compute thread needs a band: at batch 1 a whole small image fits one band and ran on one thread
    // (ShuffleNetV2 at 2 threads 1.27x the NCHW plan's time). Below about a million multiply-adds, as in
    // `pointwiseProduct`, a second thread's wake-up costs more than it saves.
    let bandsWanted = (EngineThreads.threads + g.batch - 1) / max(1, g.batch)  // an empty batch is one (empty) task
    if bandsWanted > 1, pixels * c * m >= 1 << 20 {
        band = min(band, max(1, (g.outHeight + bandsWanted - 1) / bandsWanted))
    }
    let bandsPerImage = (g.outHeight + band - 1) / band
    let epilogue = DepthwisePlaneEpilogue(activation)
    let inImage = g.inHeight * g.inWidth * c
    parallelRanges(g.batch * bandsPerImage) { range in
        let scratch = allocateFloats(band * g.outWidth * c)
        defer { scratch.deallocate() }
        for task in range {
            let n = task / bandsPerImage, first = (task % bandsPerImage) * band, end = min(g.outHeight, first + band)
            // The kernel writes row y at y * outW * C from `out`: shift the scratch so row `first` lands at its start.
            withUnsafePointer(to: image) { geometry in
                osprey_nhwc_depthwise_f32(geometry, input + n * inImage, depthwiseWeights, depthwiseBias, first, end,
                                          scratch - first * g.outWidth * c, nil, depthwiseEpilogue.code, depthwiseEpilogue.low,
                                          depthwiseEpilogue.high)
            }
            let rows = (end - first) * g.outWidth, at = (n * pixels + first * g.outWidth) * m
            osprey_nhwc_pointwise_f32(0, rows, c, scratch, c, w.pointer, m, pointwiseBias, residual.map { $0 + at }, output + at,
                                      epilogue.code, epilogue.low, epilogue.high)
            if !epilogue.complete { activation.apply(output + at, count: rows * m) }
        }
    }
}
