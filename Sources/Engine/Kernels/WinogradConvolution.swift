import CKernelShim

/// 3x3 stride-1 dense convolution by Winograd F(4x4, 3x3): 36 multiplies per 4x4 outputs and channel pair instead
/// of 144, so about a quarter of the direct kernel's multiply-adds.
///
/// The filters are transformed once at compile time into 36 matrices U[p] (input channels x output channels, both
/// rounded up to 8). A call copies the input once into a zero-bordered channels-last buffer, then splits the 4x4
/// output tiles of all images into blocks, one task each: the input transform writes V[p] (tiles x channels), 36
/// register-blocked products make M[p] = V[p] U[p] (6 tiles x 16 output channels per micro-kernel call: OpenBLAS
/// reached half of that speed on these short products), and the output transform adds the bias and writes the NCHW output; the
/// residual and the activation then run over the block's rows while they are in cache. Channels-last keeps both
/// transforms lane-wise (8 channels per vector). `convolutionReference` is the twin it is tested against.
struct WinogradFilters {
    /// Input and output channels of the convolution.
    let inChannels: Int, outChannels: Int
    /// Input channels rounded up to the transform's 8 lanes, output channels to the micro-kernel's 16 (zeros in U).
    let paddedIn: Int, paddedOut: Int
    /// [36][paddedOut / 16][paddedIn][16]: per position, strips of 16 output channels interleaved by input channel.
    let transformed: UnsafeMutablePointer<Float>
    /// [paddedOut], zero without a bias.
    let bias: UnsafeMutablePointer<Float>

    /// Channels both sides need for the transforms' overhead to pay off (smaller convs keep the direct kernel).
    static let minimumChannels = 16

    /// Whether filters of this shape are worth transforming: dense 3x3 with enough channels both sides.
    static func suits(outChannels: Int, inChannels: Int, kernelHeight: Int, kernelWidth: Int, groups: Int) -> Bool {
        groups == 1 && kernelHeight == 3 && kernelWidth == 3 && inChannels >= minimumChannels && outChannels >= minimumChannels
    }

    /// Transforms OIHW 3x3 `weights` (outChannels x inChannels x 3 x 3) and copies the bias, rounded up with zeros.
    init(weights: UnsafePointer<Float>, bias: UnsafePointer<Float>?, outChannels: Int, inChannels: Int) {
        self.inChannels = inChannels
        self.outChannels = outChannels
        paddedIn = roundUp(inChannels, Winograd.lanes)
        paddedOut = roundUp(outChannels, productWidth)
        let count = Winograd.positions * paddedIn * paddedOut
        transformed = allocateFloats(count)
        transformed.initialize(repeating: 0, count: count)
        for k in 0..<outChannels {
            for c in 0..<inChannels {
                let u = Winograd.transformFilter(weights + (k * inChannels + c) * 9)
                for p in 0..<Winograd.positions {
                    transformed[((p * paddedOut / productWidth + k / productWidth) * paddedIn + c) * productWidth + k % productWidth] = u[p]
                }
            }
        }
        self.bias = allocateFloats(paddedOut)
        self.bias.initialize(repeating: 0, count: paddedOut)
        if let bias { self.bias.update(from: bias, count: outChannels) }
    }

    /// Frees the transformed filters and the bias.
    func deallocate() {
        transformed.deallocate()
        bias.deallocate()
    }

    /// Whether a call with geometry `g` should run here: stride and dilation 1 and at least 16 tiles per image, so
    /// the 4x larger transformed filters pay for their memory (a 7x7 plane has 4 and stays direct at any batch: at
    /// batch 8 Winograd would save ResNet-18 10% of its time but hold 113 MB more, past onnxruntime's peak RSS), and
    /// an image takes the same path at every batch size.
    func fits(_ g: ConvGeometry) -> Bool { Self.fits(g, inChannels: inChannels, outChannels: outChannels) }

    /// `fits` for filters of these channels, made or not.
    static func fits(_ g: ConvGeometry, inChannels: Int, outChannels: Int) -> Bool {
        g.strideHeight == 1 && g.strideWidth == 1 && g.dilationHeight == 1 && g.dilationWidth == 1
            && g.inChannels == inChannels && g.outChannels == outChannels && g.groups == 1
            && WinogradTiling(g).tilesX * WinogradTiling(g).tilesY >= 16
    }
}

/// Rounds `value` up to a multiple of `step`.
@inline(__always)
private func roundUp(_ value: Int, _ step: Int) -> Int { (value + step - 1) / step * step }

/// Output channels per micro-kernel call (its vector width), and tiles (its rows).
private let productWidth = 16, productRows = 6

/// The 4x4 output tiles of one call and the zero-bordered channels-last input they read.
struct WinogradTiling {
    /// Tile rows and columns per image, and tiles of all images (raster order: image, tile row, tile column).
    let tilesY: Int, tilesX: Int, tiles: Int
    /// Rows and columns of one padded input image: every tile's 6x6 window lies inside.
    let rows: Int, columns: Int

    init(_ g: ConvGeometry) {
        tilesY = (g.outHeight + 3) / 4
        tilesX = (g.outWidth + 3) / 4
        tiles = g.batch * tilesY * tilesX
        rows = 4 * tilesY + 2
        columns = 4 * tilesX + 2
    }

    /// Estimated work of the busiest thread when `tiles` are cut into `blocks` (by whole sixes of tiles or evenly) and
    /// block b runs on thread b % threads: a product call of up to 6 tiles counts 10, each tile's transforms 1.
    static func busiest(tiles: Int, blocks: Int, threads: Int, bySixes: Bool) -> Int {
        var work = [Int](repeating: 0, count: max(1, threads))
        let perBlock = (tiles + blocks - 1) / blocks
        for block in 0..<blocks {
            let count = blockTiles(block, of: blocks, tiles: tiles, perBlock: perBlock, bySixes: bySixes).count
            work[block % work.count] += 10 * ((count + productRows - 1) / productRows) + count
        }
        return work.max() ?? 0
    }

    /// The tiles of block `block` of `blocks`: by whole sixes of tiles (only the last six short), or `perBlock` each.
    static func blockTiles(_ block: Int, of blocks: Int, tiles: Int, perBlock: Int, bySixes: Bool) -> Range<Int> {
        let sixes = (tiles + productRows - 1) / productRows
        let first = bySixes ? sixes * block / blocks * productRows : block * perBlock
        let end = min(tiles, bySixes ? sixes * (block + 1) / blocks * productRows : first + perBlock)
        return first..<max(first, end)
    }
}

/// Runs the 3x3 stride-1 convolution `g` (which `filters.fits`) on NCHW `input` into NCHW `output`; `residual`, when
/// given, has the output's shape and is added before `activation`. `tilesPerBlock` overrides the block size (tests).
/// Image n of the output starts `outputImageStride` floats after image n - 1 (default: compact; the residual always is).
/// `channelChunks` overrides how many ranges of output channels the tiles are split into (tests).
func winogradConvolution(_ g: ConvGeometry, filters: WinogradFilters, residual: UnsafePointer<Float>?, activation: Activation,
                         input: UnsafePointer<Float>, output: UnsafeMutablePointer<Float>, tilesPerBlock: Int? = nil,
                         outputImageStride: Int? = nil, channelChunks: Int? = nil) {
    let imageStride = outputImageStride ?? g.outChannels * g.outHeight * g.outWidth
    let tiling = WinogradTiling(g)
    let cp = filters.paddedIn, kp = filters.paddedOut
    let imageFloats = tiling.rows * tiling.columns * cp
    withThreadScratch(g.batch * imageFloats, slot: .layer) { padded in
        fillChannelsLast(g, tiling: tiling, paddedChannels: cp, input: input, into: padded)
        // Each position's V[p], U[p] and M[p] are what must share the L2 cache; the block's whole V and M (36 x tiles x
        // channels each) only stay in L3 between the transforms and the products. Blocks of up to 6 MB, then, but no
        // fewer than 16 tiles: every block reads all of U (9 MB at 256 channels), and 1 MB blocks read it 8 times per
        // ResNet-18 batch-8 layer (-25%).
        // When U is small (few channels: SqueezeNet's 16-64 to 64-256) blocks of up to 512 KB keep V and M in L2
        // instead: one big block left the output transform waiting on L3 for M (14% of SqueezeNet), and the extra
        // reads of U cost less than that round trip once a block's V and M hold at least half of U.
        let perTile = Winograd.positions * MemoryLayout<Float>.stride * (cp + kp)
        let filterBytes = Winograd.positions * MemoryLayout<Float>.stride * cp * kp
        let l2Tiles = 524_288 / perTile
        let budget = l2Tiles >= 12 && 2 * l2Tiles * perTile >= filterBytes ? l2Tiles : 6_291_456 / perTile
        var blocks = (tiling.tiles + max(16, budget) - 1) / max(16, budget)
        let threads = EngineThreads.threads
        // Few tiles in one block under a large U (ResNet-18's 14x14 stage: 16 tiles, U 9.4 MB): split the output
        // channels instead of the tiles. Split by tiles, each thread streamed all of U from L3 for 8 tiles; split by
        // channels, each reads half of U, and only the cheap input transform is done twice (-25% on those layers at two
        // threads). Under a U of 1-2.4 MB (SqueezeNet's 13x13 expand convs) the tile split stayed 10% faster.
        let strips32 = kp / (2 * productWidth)
        let splitsChannels = threads > 1 && blocks == 1 && tiling.tiles <= 24 * threads && strips32 >= 2 * threads
            && filterBytes >= 4_194_304
        let chunks = channelChunks ?? (splitsChannels ? threads : 1)
        if chunks > 1 { blocks = 1 }
        // A multiple of the thread count, so that the threads finish together (SqueezeNet's 196 tiles in 5 L2 blocks
        // left one of two threads idle for a fifth of the layer).
        if chunks == 1 && threads > 1 && tiling.tiles >= 8 * threads { blocks = (blocks + threads - 1) / threads * threads }
        // Blocks of whole sixes of tiles (the product's rows), only the last six short, where that shortens the busiest
        // thread: DenseNet's 28x28 layer (49 tiles) in four blocks of 13 made 3 product calls per block and position
        // (6 + 6 + 1 rows), 12 in all, where 2, 2, 2 and 3 sixes make 9.
        let sixes = (tiling.tiles + productRows - 1) / productRows
        let bySixes = tilesPerBlock == nil
            && WinogradTiling.busiest(tiles: tiling.tiles, blocks: min(blocks, sixes), threads: threads, bySixes: true)
                < WinogradTiling.busiest(tiles: tiling.tiles, blocks: blocks, threads: threads, bySixes: false)
        if bySixes { blocks = min(blocks, sixes) }
        let perBlock = tilesPerBlock ?? (bySixes ? (sixes + blocks - 1) / blocks * productRows : (tiling.tiles + blocks - 1) / blocks)
        if !bySixes { blocks = (tiling.tiles + perBlock - 1) / perBlock }
        // Positions of V and M an odd number of tile rows apart: 16 tiles x 128 channels (8 KB) put a tile's 36
        // positions into one L1 set, and the 14x14 layer ran 1.6x slower.
        let stride = perBlock | 1
        parallelFor(blocks * chunks) { task in
            let block = task / chunks, chunk = task % chunks
            let tiles = WinogradTiling.blockTiles(block, of: blocks, tiles: tiling.tiles, perBlock: perBlock, bySixes: bySixes)
            let (first, count) = (tiles.lowerBound, tiles.count)
            // Channel ranges in whole pairs of 16-channel strips (the AVX-512 product's width).
            let channels = (2 * productWidth * (strips32 * chunk / chunks))..<(chunk + 1 == chunks ? kp : 2 * productWidth * (strips32 * (chunk + 1) / chunks))
            let job = WinogradBlock(g: g, tiling: tiling, filters: filters, first: first, count: count, channels: channels,
                                    padded: UnsafePointer(padded), residual: residual, activation: activation, output: output,
                                    imageStride: imageStride)
            withThreadScratch(Winograd.positions * stride * (cp + kp) + 64 * Winograd.lanes) { scratch in
                job.run(scratch: scratch, stride: stride)
            }
        }
    }
}

/// Copies NCHW `input` into `padded`: per image [rows][columns][paddedChannels], the input at (padTop, padLeft), zeros
/// around it and in the channels past inChannels.
private func fillChannelsLast(_ g: ConvGeometry, tiling: WinogradTiling, paddedChannels cp: Int, input: UnsafePointer<Float>,
                              into padded: UnsafeMutablePointer<Float>) {
    let rows = tiling.rows, columns = tiling.columns, c = g.inChannels, h = g.inHeight, w = g.inWidth
    let top = g.padTop, left = g.padLeft, plane = h * w
    parallelRanges(g.batch * rows, minimumChunk: max(1, 16_384 / max(1, columns * cp))) { range in
        for row in range {
            let n = row / rows, r = row - n * rows, y = r - top
            let dst = padded + row * columns * cp
            guard y >= 0 && y < h else { dst.update(repeating: 0, count: columns * cp); continue }
            let visible = max(0, min(w, columns - left))
            if left > 0 { dst.update(repeating: 0, count: min(left, columns) * cp) }
            if left + visible < columns { (dst + (left + visible) * cp).update(repeating: 0, count: (columns - left - visible) * cp) }
            let source = input + n * c * plane + y * w
            // Eight channels at a time: one vector store per pixel.
            var channel = 0
            while channel + 8 <= c {
                let s = source + channel * plane
                for x in 0..<visible {
                    let v = SIMD8<Float>(s[x], s[x + plane], s[x + 2 * plane], s[x + 3 * plane], s[x + 4 * plane], s[x + 5 * plane],
                                         s[x + 6 * plane], s[x + 7 * plane])
                    (dst + (left + x) * cp + channel).store(v)
                }
                channel += 8
            }
            if channel < cp {
                for x in 0..<visible {
                    let d = dst + (left + x) * cp
                    for k in channel..<cp { d[k] = k < c ? source[k * plane + x] : 0 }
                }
            }
        }
    }
}

/// One task of `winogradConvolution`: tiles [first, first + count) through transform, products and inverse transform.
private struct WinogradBlock {
    let g: ConvGeometry
    let tiling: WinogradTiling
    let filters: WinogradFilters
    let first: Int, count: Int
    /// Padded output channels this task computes: whole 32-channel pairs of strips from 0, or the rest up to paddedOut.
    let channels: Range<Int>
    let padded: UnsafePointer<Float>
    let residual: UnsafePointer<Float>?
    let activation: Activation
    let output: UnsafeMutablePointer<Float>
    /// Floats from one image of the output to the next.
    let imageStride: Int

    /// Clamp bounds when the epilogue is only a clamp (Relu, Clip) and no residual: applied as the output transform
    /// stores, instead of a second pass over rows of 4-13 outputs (SqueezeNet's expand convs: 6% of the model).
    var registerClamp: (low: Float, high: Float)? { residual == nil ? activation.clampBounds : nil }

    /// `scratch` holds V ([36][stride][paddedIn]), M ([36][stride][paddedOut]) and 64 transform vectors.
    func run(scratch: UnsafeMutablePointer<Float>, stride: Int) {
        let cp = filters.paddedIn, kp = filters.paddedOut
        let v = scratch, m = scratch + Winograd.positions * stride * cp, work = m + Winograd.positions * stride * kp
        transformInput(into: v, stride: stride, work: work)
        for p in 0..<Winograd.positions {
            multiply(UnsafePointer(v + p * stride * cp), filters.transformed + p * cp * kp, into: m + p * stride * kp)
        }
        transformOutput(from: UnsafePointer(m), stride: stride, work: work)
        epilogue()
    }

    /// M = V U for one position: each strip of 16 output channels (from L1) against every 6 tiles of the block.
    @inline(__always)
    func multiply(_ v: UnsafePointer<Float>, _ u: UnsafePointer<Float>, into m: UnsafeMutablePointer<Float>) {
        let cp = filters.paddedIn, kp = filters.paddedOut
        if osprey_float_avx512() != 0 {
            // AVX-512F: two strips (32 output channels, 12 zmm accumulators) per call, the same layouts.
            var strip = channels.lowerBound / productWidth
            while strip < channels.upperBound / productWidth {
                let width = min(2 * productWidth, channels.upperBound - strip * productWidth)
                let b = u + strip * cp * productWidth
                var t = 0
                while t < count {
                    osprey_rows_tile_avx512(min(productRows, count - t), width, cp, v + t * cp, cp, b, cp * productWidth,
                                            m + t * kp + strip * productWidth, kp)
                    t += productRows
                }
                strip += 2
            }
            return
        }
        for strip in (channels.lowerBound / productWidth)..<(channels.upperBound / productWidth) {
            let b = u + strip * cp * productWidth
            var t = 0
            while t < count {
                let rows = min(productRows, count - t)
                // Missing rows of the last panel repeat its first row and are not stored.
                let a = v + t * cp
                @inline(__always) func row(_ r: Int) -> UnsafePointer<Float> { r < rows ? a + r * cp : a }
                let c = productKernel(cp, (a, row(1), row(2), row(3), row(4), row(5)), b)
                let out = m + t * kp + strip * productWidth
                storeRows(c, rows: rows, at: out, stride: kp)
                t += productRows
            }
        }
    }

    /// Image, tile row and tile column of tile `t`.
    @inline(__always)
    func position(_ t: Int) -> (n: Int, ty: Int, tx: Int) {
        let perImage = tiling.tilesY * tiling.tilesX
        let n = t / perImage, rest = t - n * perImage, ty = rest / tiling.tilesX
        return (n, ty, rest - ty * tiling.tilesX)
    }

    /// V[p][t][c] = (B^T d B)[p] of each tile's 6x6 window, 8 channels at a time.
    func transformInput(into v: UnsafeMutablePointer<Float>, stride: Int, work: UnsafeMutablePointer<Float>) {
        let cp = filters.paddedIn, columns = tiling.columns
        let imageFloats = tiling.rows * columns * cp
        for t in 0..<count {
            let (n, ty, tx) = position(first + t)
            let window = padded + n * imageFloats + (4 * ty * columns + 4 * tx) * cp
            for c in Swift.stride(from: 0, to: cp, by: Winograd.lanes) {
                Winograd.inputTile(window + c, rowStride: columns * cp, columnStride: cp, scratch: work, v + t * cp + c,
                                   positionStride: stride * cp)
            }
        }
    }

    /// (A^T m A) + bias of each tile, 8 output channels at a time, written to the NCHW output (edge tiles clipped).
    func transformOutput(from m: UnsafePointer<Float>, stride: Int, work: UnsafeMutablePointer<Float>) {
        let kp = filters.paddedOut, k = min(g.outChannels, channels.upperBound), oh = g.outHeight, ow = g.outWidth, plane = oh * ow
        let tile = work + 24 * Winograd.lanes
        let clamp = registerClamp
        let low = SIMD8<Float>(repeating: clamp?.low ?? -.infinity), high = SIMD8<Float>(repeating: clamp?.high ?? .infinity)
        let wide = osprey_float_avx512() != 0
        for t in 0..<count {
            let (n, ty, tx) = position(first + t)
            let rows = min(4, oh - 4 * ty), columns = min(4, ow - 4 * tx)
            let corner = output + n * imageStride + 4 * ty * ow + 4 * tx
            var c = channels.lowerBound
            // AVX-512F: whole tiles 16 channels at a time in C (transform, bias, clamp and transposed stores).
            if wide && rows == 4 && columns == 4 {
                while c + 16 <= k {
                    osprey_winograd_output_avx512(m + t * kp + c, stride * kp, filters.bias + c, corner + c * plane, plane, ow,
                                                  clamp?.low ?? -.infinity, clamp?.high ?? .infinity)
                    c += 16
                }
            }
            for c in Swift.stride(from: c, to: k, by: Winograd.lanes) {
                Winograd.outputTile(m + t * kp + c, positionStride: stride * kp, scratch: work, tile)
                let bias = UnsafePointer(filters.bias + c).vector(SIMD8<Float>.self)
                let lanes = min(Winograd.lanes, k - c)
                if rows == 4 && columns == 4 && lanes == Winograd.lanes {
                    // Whole tiles: each lane (channel) is four rows of four contiguous outputs.
                    for r in 0..<4 {
                        var v0 = UnsafePointer(tile + (r * 4) * 8).vector(SIMD8<Float>.self) + bias
                        var v1 = UnsafePointer(tile + (r * 4 + 1) * 8).vector(SIMD8<Float>.self) + bias
                        var v2 = UnsafePointer(tile + (r * 4 + 2) * 8).vector(SIMD8<Float>.self) + bias
                        var v3 = UnsafePointer(tile + (r * 4 + 3) * 8).vector(SIMD8<Float>.self) + bias
                        if clamp != nil {
                            v0 = clamp8(v0, low, high)
                            v1 = clamp8(v1, low, high)
                            v2 = clamp8(v2, low, high)
                            v3 = clamp8(v3, low, high)
                        }
                        let row = corner + c * plane + r * ow
                        for lane in 0..<8 { (row + lane * plane).store(SIMD4<Float>(v0[lane], v1[lane], v2[lane], v3[lane])) }
                    }
                } else {
                    for r in 0..<rows {
                        for x in 0..<columns {
                            var value = UnsafePointer(tile + (r * 4 + x) * 8).vector(SIMD8<Float>.self) + bias
                            if clamp != nil { value = clamp8(value, low, high) }
                            let at = corner + c * plane + r * ow + x
                            for lane in 0..<lanes { at[lane * plane] = value[lane] }
                        }
                    }
                }
            }
        }
    }

    /// Residual and activation over the block's output rows, one run of tiles in the same tile row at a time.
    func epilogue() {
        if residual == nil, case .none = activation { return }
        if registerClamp != nil { return }
        let k = g.outChannels, oh = g.outHeight, ow = g.outWidth, plane = oh * ow
        var t = first
        while t < first + count {
            let (n, ty, tx) = position(t)
            let run = min(first + count - t, tiling.tilesX - tx)
            let x0 = 4 * tx, x1 = min(ow, 4 * (tx + run))
            for channel in channels.lowerBound..<min(k, channels.upperBound) {
                for y in (4 * ty)..<min(oh, 4 * ty + 4) {
                    let offset = (n * k + channel) * plane + y * ow + x0
                    activation.apply(output + n * imageStride + channel * plane + y * ow + x0, count: x1 - x0, adding: 0,
                                     residual: residual.map { $0 + offset })
                }
            }
            t += run
        }
    }
}

/// Lane-wise min(max(v, lo), hi) as compare + blend (as `clamp` for 16 lanes).
@_transparent
private func clamp8(_ v: SIMD8<Float>, _ lo: SIMD8<Float>, _ hi: SIMD8<Float>) -> SIMD8<Float> {
    var r = v
    r.replace(with: lo, where: r .< lo)
    r.replace(with: hi, where: r .> hi)
    return r
}

/// Six tiles' rows of V (depth floats each) times one strip of U (depth x 16): 12 AVX2 accumulators kept in
/// registers over the whole depth, one broadcast per tile and channel.
@inline(__always)
private func productKernel(_ depth: Int, _ a: (UnsafePointer<Float>, UnsafePointer<Float>, UnsafePointer<Float>, UnsafePointer<Float>,
                                               UnsafePointer<Float>, UnsafePointer<Float>),
                           _ b: UnsafePointer<Float>) -> Tile6x16 {
    typealias V = SIMD16<Float>
    var c0 = V(), c1 = V(), c2 = V(), c3 = V(), c4 = V(), c5 = V()
    var bp = b
    for k in 0..<depth {
        let w = bp.vector(V.self)
        multiplyAdd(&c0, V(repeating: a.0[k]), w)
        multiplyAdd(&c1, V(repeating: a.1[k]), w)
        multiplyAdd(&c2, V(repeating: a.2[k]), w)
        multiplyAdd(&c3, V(repeating: a.3[k]), w)
        multiplyAdd(&c4, V(repeating: a.4[k]), w)
        multiplyAdd(&c5, V(repeating: a.5[k]), w)
        bp += productWidth
    }
    return (c0, c1, c2, c3, c4, c5)
}
