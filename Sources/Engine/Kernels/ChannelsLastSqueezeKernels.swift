import CKernelShim

/// Per-task channel sums of an NHWC output, added while its rows are still in cache and reduced to the channel means
/// (a squeeze-and-excitation pool, `ChannelsLastSqueezeFusion.swift`) after the tasks join: one slot per task, so the
/// threads never share one and the result does not depend on which thread ran which task.
struct ChannelSums {
    /// Tasks per image (image n's tasks are n * tasksPerImage ..<).
    let tasksPerImage: Int
    /// Channels of the output.
    let channels: Int
    /// [images * tasksPerImage][channels] running sums.
    let sums: UnsafeMutablePointer<Float>

    /// Zeroed sums for `batch` images of `tasksPerImage` tasks each; `deallocate` frees them.
    init(batch: Int, tasksPerImage: Int, channels: Int) {
        self.tasksPerImage = tasksPerImage
        self.channels = channels
        sums = allocateFloats(max(1, batch * tasksPerImage * channels))
        sums.initialize(repeating: 0, count: max(1, batch * tasksPerImage * channels))
    }

    /// Adds `pixels` NHWC pixels starting at `rows` to task `task`'s sums. Channel blocks are the outer loop, so each
    /// block's sum stays in registers over the pixels: one load per value, where a pixel-major walk also loaded and
    /// stored the running sums for every pixel (it cost as much as the pooling step it replaced).
    func add(task: Int, _ rows: UnsafePointer<Float>, pixels: Int) {
        let o = sums + task * channels, c = channels
        var k = 0
        while k + FloatVector.scalarCount <= c {
            var acc = FloatVector(), p = rows + k
            for _ in 0..<pixels { acc += p.vector(FloatVector.self); p += c }
            (o + k).store((o + k).vector(FloatVector.self) + acc)
            k += FloatVector.scalarCount
        }
        while k + 4 <= c {
            var acc = SIMD4<Float>(), p = rows + k
            for _ in 0..<pixels { acc += p.vector(SIMD4<Float>.self); p += c }
            (o + k).store((o + k).vector(SIMD4<Float>.self) + acc)
            k += 4
        }
        while k < c {
            var acc: Float = 0
            for q in 0..<pixels { acc += rows[q * c + k] }
            o[k] += acc
            k += 1
        }
    }

    /// means[n][c] = (sum of image n's task sums) / pixels, for `batch` images.
    func finish(into means: UnsafeMutablePointer<Float>, batch: Int, pixels: Int) {
        let inverse = 1 / Float(max(1, pixels))
        for n in 0..<batch {
            let o = means + n * channels
            o.initialize(repeating: 0, count: channels)
            for t in 0..<tasksPerImage {
                let s = sums + (n * tasksPerImage + t) * channels
                for k in 0..<channels { o[k] += s[k] }
            }
            for k in 0..<channels { o[k] *= inverse }
        }
    }

    /// Frees the sums.
    func deallocate() { sums.deallocate() }
}

/// `channelsLastDepthwise` that also writes the output's channel means [N][C] to `means`.
func channelsLastDepthwiseWithMeans(_ g: ChannelsLastDepthwiseGeometry, input: UnsafePointer<Float>, weights: UnsafePointer<Float>,
                                    bias: UnsafePointer<Float>?, residual: UnsafePointer<Float>?, activation: Activation,
                                    output: UnsafeMutablePointer<Float>, means: UnsafeMutablePointer<Float>) {
    let epilogue = DepthwisePlaneEpilogue(activation)
    channelsLastDepthwiseRows(g, input: input, weights: weights, bias: bias, residual: residual,
                              epilogue: (epilogue.code, epilogue.low, epilogue.high), after: epilogue.complete ? nil : activation,
                              output: output, means: means)
}

/// NHWC depthwise convolution with the C kernel's epilogue (code and bounds), then `after` (an activation the epilogue
/// lacks) on each finished block; each image's rows are cut into tasks (a few per thread) and, when `means` is given,
/// each task sums the blocks of about 64 KB it wrote while they are in cache, reduced to the channel means [N][C].
func channelsLastDepthwiseRows(_ g: ChannelsLastDepthwiseGeometry, input: UnsafePointer<Float>, weights: UnsafePointer<Float>,
                               bias: UnsafePointer<Float>?, residual: UnsafePointer<Float>?, epilogue: (code: Int32, low: Float, high: Float),
                               after: Activation?, output: UnsafeMutablePointer<Float>, means: UnsafeMutablePointer<Float>?) {
    let inImage = g.inHeight * g.inWidth * g.channels, outRow = g.outWidth * g.channels, outImage = g.outHeight * outRow
    let image = g.image
    // As `channelsLastDepthwise` cuts rows: a few tasks per thread, each of at least 16K outputs.
    let block = max(1, 16_384 / max(1, outRow)), threads = EngineThreads.threads
    let perImage = threads > 1 ? max(1, min((threads * 4 + g.batch - 1) / max(1, g.batch), g.outHeight / block)) : 1
    let sums = means.map { _ in ChannelSums(batch: g.batch, tasksPerImage: perImage, channels: g.channels) }
    defer { sums?.deallocate() }
    parallelFor(g.batch * perImage) { task in
        let n = task / perImage, part = task % perImage
        let first = g.outHeight * part / perImage, end = g.outHeight * (part + 1) / perImage
        let out = output + n * outImage
        var row = first
        while row < end {
            let stop = min(end, row + block)
            withUnsafePointer(to: image) { geometry in
                osprey_nhwc_depthwise_f32(geometry, input + n * inImage, weights, bias, row, stop, out, residual.map { $0 + n * outImage },
                                          epilogue.code, epilogue.low, epilogue.high)
            }
            after?.apply(out + row * outRow, count: (stop - row) * outRow)
            sums?.add(task: task, out + row * outRow, pixels: (stop - row) * g.outWidth)
            row = stop
        }
    }
    if let sums, let means { sums.finish(into: means, batch: g.batch, pixels: g.outHeight * g.outWidth) }
}
