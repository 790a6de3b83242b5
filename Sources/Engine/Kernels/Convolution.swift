/// Convolution weights prepared once at compile time, run many times with any batch and spatial size.
///
/// Paths: 1x1 stride-1 unpadded convs are one sgemm per image and group on NCHW data; depthwise convs (one input
/// channel per group) use a vectorised direct kernel; everything else unfolds into the workspace (im2col) and runs
/// one sgemm per group. Bias, an optional residual and the activation are applied in one vectorised epilogue.
/// `convolutionReference` is the twin the fast paths are tested against.
public final class PackedConvolution: @unchecked Sendable {
    /// Output channels (M).
    public let outChannels: Int
    /// Input channels (C, all groups).
    public let inChannels: Int
    /// Kernel height.
    public let kernelHeight: Int
    /// Kernel width.
    public let kernelWidth: Int
    /// Channel groups.
    public let groups: Int
    /// Epilogue applied after the bias.
    public let activation: Activation
    /// OIHW weights, 64-byte aligned: row m is the gemm A row [cg*kh*kw], and the depthwise filter when cg == 1.
    private let weights: UnsafeMutablePointer<Float>
    private let bias: UnsafeMutablePointer<Float>?

    /// Packs OIHW `weights` (count outChannels * inChannels/groups * kh * kw) and an optional per-output-channel bias.
    public init(weights: UnsafeBufferPointer<Float>, bias: UnsafeBufferPointer<Float>?, outChannels: Int, inChannels: Int,
                kernelHeight: Int, kernelWidth: Int, groups: Int, activation: Activation) {
        precondition(groups > 0 && inChannels % groups == 0 && outChannels % groups == 0, "channels must divide into groups")
        precondition(weights.count == outChannels * (inChannels / groups) * kernelHeight * kernelWidth, "weight count mismatch")
        precondition(bias == nil || bias!.count == outChannels, "bias count mismatch")
        self.outChannels = outChannels
        self.inChannels = inChannels
        self.kernelHeight = kernelHeight
        self.kernelWidth = kernelWidth
        self.groups = groups
        self.activation = activation
        self.weights = allocateFloats(weights.count)
        self.weights.initialize(from: weights.baseAddress!, count: weights.count)
        if let bias {
            let b = allocateFloats(outChannels)
            b.initialize(from: bias.baseAddress!, count: outChannels)
            self.bias = b
        } else {
            self.bias = nil
        }
    }

    deinit {
        weights.deallocate()
        bias?.deallocate()
    }

    private enum Path { case pointwise, depthwise, unfolded }

    private func path(for g: ConvGeometry) -> Path {
        if g.inChannelsPerGroup == 1 && g.groups > 1 { return .depthwise }
        if g.kernelHeight == 1 && g.kernelWidth == 1 && g.strideHeight == 1 && g.strideWidth == 1
            && g.padTop == 0 && g.padLeft == 0 && g.padBottom == 0 && g.padRight == 0 {
            return .pointwise
        }
        return .unfolded
    }

    /// Small output planes (ResNet's 14x14 and 7x7) make narrow gemms; batches of them run as one wide gemm per group.
    private func batchesImages(_ g: ConvGeometry) -> Bool {
        g.batch > 1 && g.outHeight * g.outWidth < 256
    }

    /// Floats of scratch memory `run` needs for this geometry (the caller's memory plan provides it).
    public func workspaceCount(for geometry: ConvGeometry) -> Int {
        let g = geometry
        let k = g.inChannelsPerGroup * kernelHeight * kernelWidth, outPlane = g.outHeight * g.outWidth
        switch path(for: g) {
        case .depthwise: return 0
        case .pointwise, .unfolded:
            if batchesImages(g) { return (k + g.outChannelsPerGroup) * g.batch * outPlane }
            // Tiles unfold into per-thread scratch instead.
            if tiling(g).count >= Self.minimumTiles { return 0 }
            return path(for: g) == .pointwise ? 0 : k * outPlane
        }
    }

    /// Computes the convolution of NCHW `input` into NCHW `output` (batch * outChannels * outHeight * outWidth floats).
    ///
    /// `residual`, when given, has the output's shape and is added before the activation (a fused Add + Relu).
    public func run(_ geometry: ConvGeometry, input: UnsafePointer<Float>, output: UnsafeMutablePointer<Float>,
                    workspace: UnsafeMutablePointer<Float>?, residual: UnsafePointer<Float>? = nil) {
        let g = geometry
        precondition(g.inChannels == inChannels && g.outChannels == outChannels && g.groups == groups
                     && g.kernelHeight == kernelHeight && g.kernelWidth == kernelWidth, "geometry does not match the packed convolution")
        let oh = g.outHeight, ow = g.outWidth
        guard g.batch > 0, oh > 0, ow > 0 else { return }
        let path = path(for: g)
        if path == .depthwise {
            depthwiseConvolution(g, input: input, weights: weights, bias: bias, residual: residual, activation: activation, output: output)
            return
        }
        let needed = workspaceCount(for: g)
        precondition(needed == 0 || workspace != nil, "convolution needs a workspace of \(needed) floats")
        let tiling = tiling(g)
        if tiling.count >= Self.minimumTiles {
            runTiled(g, path: path, tilesPerImage: tiling.count / (g.batch * groups),
                     input: input, output: output, residual: residual)
            return
        }
        let batched = batchesImages(g)
        if batched {
            runBatched(g, path: path, input: input, output: output, workspace: workspace!)
        } else {
            runPerImage(g, path: path, input: input, output: output, workspace: workspace)
        }
        let outPlane = oh * ow
        let outChannels = self.outChannels, bias = self.bias, activation = self.activation
        // Split across images: with batched small planes this pass is a few MB, the wide gemm's only serial neighbour.
        parallelFor(g.batch) { n in
            // The per-image gemms started from the bias already.
            applyChannelEpilogue(output + n * outChannels * outPlane, channels: outChannels, planeSize: outPlane, bias: batched ? bias : nil,
                                 residual: residual.map { $0 + n * outChannels * outPlane }, activation: activation)
        }
    }

    /// Fewest tiles worth running in parallel (two per thread on this 2-core box); below that, one wide gemm split
    /// across the threads does better. Independent of the thread count so `workspaceCount` stays valid if it changes.
    private static let minimumTiles = 4

    /// Tiles of whole output rows sized so one tile's columns and products stay in the L2 cache (about 1 MB here),
    /// or none when small planes batch better (`runBatched`). count = tiles over all images and groups.
    private func tiling(_ g: ConvGeometry) -> (rowsPerTile: Int, count: Int) {
        if batchesImages(g) { return (0, 0) }
        let k = g.inChannelsPerGroup * kernelHeight * kernelWidth
        let budget = 640 * 1024 / MemoryLayout<Float>.stride
        let columns = min(g.outHeight * g.outWidth, max(128, budget / (k + g.outChannelsPerGroup)))
        let rowsPerTile = max(1, columns / g.outWidth)
        var tilesPerImage = (g.outHeight + rowsPerTile - 1) / rowsPerTile
        // A few more, slightly smaller tiles so every thread gets the same share (7 tiles on 2 threads left one idle
        // a seventh of the layer). Only ever more tiles, so `workspaceCount`'s tiled-or-not answer stays valid.
        let threads = EngineThreads.threads, images = g.batch * groups
        if threads > 1 && images * tilesPerImage < 8 * threads {
            while (images * tilesPerImage) % threads != 0 && tilesPerImage < g.outHeight { tilesPerImage += 1 }
        }
        return (rowsPerTile, images * tilesPerImage)
    }

    /// Tiles run in parallel, each on one thread: unfold its rows into the thread's scratch, one single-threaded gemm
    /// into the output columns, then the epilogue while the tile is still in cache.
    private func runTiled(_ g: ConvGeometry, path: Path, tilesPerImage: Int, input: UnsafePointer<Float>,
                          output: UnsafeMutablePointer<Float>, residual: UnsafePointer<Float>?) {
        let cg = g.inChannelsPerGroup, mg = g.outChannelsPerGroup
        let k = cg * kernelHeight * kernelWidth
        let outPlane = g.outHeight * g.outWidth, inPlane = g.inHeight * g.inWidth
        let tiles = g.batch * groups * tilesPerImage
        let weights = self.weights, bias = self.bias, activation = self.activation, groups = self.groups
        let inChannels = self.inChannels, outChannels = self.outChannels
        parallelFor(tiles) { tile in
            let block = tile % tilesPerImage, group = (tile / tilesPerImage) % groups, n = tile / (tilesPerImage * groups)
            // Rows split evenly over the tiles (sizes differ by at most one row).
            let rows = (g.outHeight * block / tilesPerImage)..<(g.outHeight * (block + 1) / tilesPerImage)
            let first = rows.lowerBound * g.outWidth, width = rows.count * g.outWidth
            let image = input + n * inChannels * inPlane
            let result = output + (n * outChannels + group * mg) * outPlane + first
            let gemm = { (b: UnsafePointer<Float>, ldb: Int) in
                // Starting from the bias (beta 1) replaces OpenBLAS's zeroing pass over C and the epilogue's add.
                if let bias {
                    for i in 0..<mg { (result + i * outPlane).update(repeating: bias[group * mg + i], count: width) }
                }
                sgemm(transposeA: false, transposeB: false, m: mg, n: width, k: k, alpha: 1, a: weights + group * mg * k, lda: k,
                      b: b, ldb: ldb, beta: bias == nil ? 0 : 1, c: result, ldc: outPlane)
            }
            if path == .pointwise {
                gemm(image + group * cg * inPlane + first, inPlane)
            } else {
                withThreadScratch(k * width) { columns in
                    im2col(g, image: image, firstChannel: group * cg, columns: columns, outRows: rows)
                    gemm(columns, width)
                }
            }
            let res = residual.map { $0 + (n * outChannels + group * mg) * outPlane + first }
            if res != nil || activation != .none {
                for i in 0..<mg { activation.apply(result + i * outPlane, count: width, adding: 0, residual: res.map { $0 + i * outPlane }) }
            }
        }
    }

    /// One gemm per image and group: weights [mg, k] x columns [k, outPlane] straight into the output planes.
    private func runPerImage(_ g: ConvGeometry, path: Path, input: UnsafePointer<Float>, output: UnsafeMutablePointer<Float>,
                             workspace: UnsafeMutablePointer<Float>?) {
        let cg = g.inChannelsPerGroup, mg = g.outChannelsPerGroup
        let k = cg * kernelHeight * kernelWidth
        let outPlane = g.outHeight * g.outWidth, inPlane = g.inHeight * g.inWidth
        for n in 0..<g.batch {
            let image = input + n * inChannels * inPlane
            let result = output + n * outChannels * outPlane
            for group in 0..<groups {
                let b: UnsafePointer<Float>
                if path == .pointwise {
                    b = image + group * cg * inPlane
                } else {
                    im2col(g, image: image, firstChannel: group * cg, columns: workspace!)
                    b = UnsafePointer(workspace!)
                }
                let c = result + group * mg * outPlane
                // Starting from the bias (beta 1) replaces OpenBLAS's zeroing pass over C and the epilogue's add.
                if let bias {
                    for i in 0..<mg { (c + i * outPlane).update(repeating: bias[group * mg + i], count: outPlane) }
                }
                sgemm(transposeA: false, transposeB: false, m: mg, n: outPlane, k: k, alpha: 1,
                      a: weights + group * mg * k, lda: k, b: b, ldb: outPlane, beta: bias == nil ? 0 : 1, c: c, ldc: outPlane)
            }
        }
    }

    /// One gemm per group over all images: columns [k, batch*outPlane] side by side, the product [mg, batch*outPlane]
    /// in the workspace, then scattered into each image's planes.
    private func runBatched(_ g: ConvGeometry, path: Path, input: UnsafePointer<Float>, output: UnsafeMutablePointer<Float>,
                            workspace: UnsafeMutablePointer<Float>) {
        let cg = g.inChannelsPerGroup, mg = g.outChannelsPerGroup
        let k = cg * kernelHeight * kernelWidth
        let outPlane = g.outHeight * g.outWidth, inPlane = g.inHeight * g.inWidth
        let wide = g.batch * outPlane
        let columns = workspace, product = workspace + k * wide
        for group in 0..<groups {
            for n in 0..<g.batch {
                let image = input + n * inChannels * inPlane
                if path == .pointwise {
                    for c in 0..<cg { (columns + c * wide + n * outPlane).update(from: image + (group * cg + c) * inPlane, count: inPlane) }
                } else {
                    im2col(g, image: image, firstChannel: group * cg, columns: columns + n * outPlane, rowStride: wide)
                }
            }
            sgemm(transposeA: false, transposeB: false, m: mg, n: wide, k: k, alpha: 1,
                  a: weights + group * mg * k, lda: k, b: columns, ldb: wide, beta: 0, c: product, ldc: wide)
            let outChannels = self.outChannels
            parallelFor(g.batch) { n in
                for i in 0..<mg {
                    (output + (n * outChannels + group * mg + i) * outPlane).update(from: product + i * wide + n * outPlane, count: outPlane)
                }
            }
        }
    }
}

/// Direct convolution, one output at a time: the twin the fast kernels are tested against.
/// input NCHW, weights OIHW (I = C/groups), bias [M] or nil, output and residual (optional, added before the activation) N x M x outH x outW.
public func convolutionReference(_ g: ConvGeometry, input: UnsafePointer<Float>, weights: UnsafePointer<Float>,
                                 bias: UnsafePointer<Float>?, activation: Activation, output: UnsafeMutablePointer<Float>,
                                 residual: UnsafePointer<Float>? = nil) {
    let cg = g.inChannelsPerGroup, mg = g.outChannelsPerGroup
    let oh = g.outHeight, ow = g.outWidth
    for n in 0..<g.batch {
        for m in 0..<g.outChannels {
            let group = m / mg
            for y in 0..<oh {
                for x in 0..<ow {
                    var sum = bias?[m] ?? 0
                    for c in 0..<cg {
                        let channel = group * cg + c
                        for ky in 0..<g.kernelHeight {
                            let iy = y * g.strideHeight - g.padTop + ky * g.dilationHeight
                            if iy < 0 || iy >= g.inHeight { continue }
                            for kx in 0..<g.kernelWidth {
                                let ix = x * g.strideWidth - g.padLeft + kx * g.dilationWidth
                                if ix < 0 || ix >= g.inWidth { continue }
                                let iv = input[((n * g.inChannels + channel) * g.inHeight + iy) * g.inWidth + ix]
                                let wv = weights[((m * cg + c) * g.kernelHeight + ky) * g.kernelWidth + kx]
                                sum += iv * wv
                            }
                        }
                    }
                    let index = ((n * g.outChannels + m) * oh + y) * ow + x
                    output[index] = activation(sum + (residual?[index] ?? 0))
                }
            }
        }
    }
}
