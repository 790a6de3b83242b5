import CKernelShim

/// Dense convolution (every group with more than one input channel) as a register-blocked matrix product.
///
/// out[m][j] = bias[m] + sum_k W[m][k] * col[k][j], where col is the im2col matrix of one group over the output
/// pixels of all images side by side (j = image * outPlane + pixel), so small planes still make wide products.
/// The weights are packed once into panels of 6 output channels interleaved by k; each tile of columns is unfolded
/// straight into strips of 16 columns interleaved by k (pointwise: from the input planes; otherwise gathered from one
/// zero-padded copy of the input, not im2col; reading a pointwise conv's planes in place instead, k a plane apart,
/// stalled the micro-kernel on its loads: MobileNetV2 +10%). The 6x16 micro-kernel keeps its 12 accumulators,
/// started from the bias, in registers over the whole of k (no C reload); a clamp epilogue (Relu, Relu6) is applied
/// to them before the store, other activations and the residual follow in one pass over each panel's rows of the
/// tile while they are still in cache.
struct ConvWeightPanels {
    /// Output channels per panel: the dense micro-kernel's 6 (`gemmRows`), or 4 for `groupedConvolution`.
    let rows: Int
    /// The dense micro-kernel's rows.
    static let gemmRows = 6
    /// Panels per group.
    let panels: Int
    /// k = inChannelsPerGroup * kernelHeight * kernelWidth.
    let depth: Int
    /// [group][panel][k][rows], rows past a group's channels zero.
    let pointer: UnsafeMutablePointer<Float>

    /// Packs OIHW weights of `groups` groups of `channelsPerGroup` output channels each, `rows` channels per panel.
    init(weights: UnsafePointer<Float>, channelsPerGroup: Int, groups: Int, depth: Int, rows: Int = gemmRows) {
        self.rows = rows
        panels = (channelsPerGroup + rows - 1) / rows
        self.depth = depth
        let count = groups * panels * depth * rows
        pointer = allocateFloats(count)
        pointer.initialize(repeating: 0, count: count)
        for group in 0..<groups {
            for m in 0..<channelsPerGroup {
                let panel = pointer + (group * panels + m / rows) * depth * rows
                let source = weights + (group * channelsPerGroup + m) * depth
                for k in 0..<depth { panel[k * rows + m % rows] = source[k] }
            }
        }
    }

    /// Frees the packed weights.
    func deallocate() { pointer.deallocate() }

    /// Start of one panel: depth * rows floats.
    @inline(__always)
    func panel(group: Int, index: Int) -> UnsafePointer<Float> {
        UnsafePointer(pointer + (group * panels + index) * depth * rows)
    }
}

/// Columns per packed strip (the micro-kernel's width).
private let stripWidth = 16

/// Runs the dense convolution `g` with packed weights; output and residual are NCHW, image n of the output starting
/// `outputImageStride` floats after image n - 1 (default outChannels * outHeight * outWidth: a window of a wider
/// Concat buffer otherwise), the residual always compact. `inputScale` ([batch][inChannels], pointwise convs only)
/// multiplies each input plane as its columns are packed: a squeeze-and-excitation Mul folded into the conv after it.
func denseConvolution(_ g: ConvGeometry, weights: ConvWeightPanels, bias: UnsafePointer<Float>?, residual: UnsafePointer<Float>?,
                      activation: Activation, input: UnsafePointer<Float>, output: UnsafeMutablePointer<Float>,
                      outputImageStride: Int? = nil, inputScale: UnsafePointer<Float>? = nil, inputShift: InputShift? = nil) {
    let imageStride = outputImageStride ?? g.outChannels * g.outHeight * g.outWidth
    if g.isPointwise && inputScale == nil && PointwisePlanes.suits(g, weights: weights, activation: activation) {
        PointwisePlanes.run(g, weights: weights, bias: bias, residual: residual, activation: activation, input: input, output: output,
                            imageStride: imageStride)
        return
    }
    if g.isPointwise {
        multiplyPanels(g, weights: weights, bias: bias, residual: residual, activation: activation, input: input, padded: nil,
                       output: output, imageStride: imageStride, inputScale: inputScale, inputShift: inputShift)
        return
    }
    precondition(inputScale == nil && inputShift == nil, "an input scale needs a pointwise convolution")
    // One zero-bordered copy of the input replaces im2col's kh*kw copies: tiles gather their columns from it.
    let padded = PaddedInput(g)
    withThreadScratch(padded.floats, slot: .layer) { buffer in
        padded.fill(from: input, into: buffer)
        multiplyPanels(g, weights: weights, bias: bias, residual: residual, activation: activation, input: input,
                       padded: (padded, UnsafePointer(buffer + padded.slack)), output: output, imageStride: imageStride)
    }
}

/// The parallel tile loop of `denseConvolution`: columns come from the input itself (pointwise) or from `padded`.
private func multiplyPanels(_ g: ConvGeometry, weights: ConvWeightPanels, bias: UnsafePointer<Float>?, residual: UnsafePointer<Float>?,
                            activation: Activation, input: UnsafePointer<Float>, padded: (PaddedInput, UnsafePointer<Float>)?,
                            output: UnsafeMutablePointer<Float>, imageStride: Int, inputScale: UnsafePointer<Float>? = nil,
                            inputShift: InputShift? = nil) {
    let depth = weights.depth, groups = g.groups
    let columns = g.batch * g.outHeight * g.outWidth
    // Unfolded tiles of up to 768 KB stay in the L2 cache while every weight panel passes over them; up to 1024
    // columns, so that short-k (pointwise) tiles read long runs of each input plane (MobileNetV2 batch 8: -5%).
    let widest = max(stripWidth, min(1024, (196_608 / max(1, depth)) / stripWidth * stripWidth))
    var tiles = (columns + widest - 1) / widest
    let threads = EngineThreads.threads
    // Equal tiles, a multiple of the thread count when there are columns enough: splitting columns packs each once,
    // where splitting panels would pack the same columns on every thread.
    let allStrips = (columns + stripWidth - 1) / stripWidth
    // A few strips (a 7x7 plane) are split too when the weights are smaller than the columns (DenseNet's 32-channel
    // 3x3 convs: each thread packed all 1152 x 49 columns for half of 32 channels); larger weights keep the panel
    // split below, where each thread reads half of them (ResNet-18's 9 MB 7x7 layers).
    let smallWeights = allStrips >= 2 * threads && weights.panels * weights.rows <= allStrips * stripWidth
    if threads > 1 && (columns >= 64 * threads || smallWeights) { tiles = (max(tiles, threads) + threads - 1) / threads * threads }
    // Strips shared out so that tiles differ by at most one strip (196 columns in 4 tiles: 4,3,3,3 strips, not
    // 64,64,64,4 columns).
    tiles = min(tiles, allStrips)
    // Too few columns to share (one image of a 7x7 plane): split the panels, one share per thread.
    let base = groups * tiles
    let chunks = threads > 1 && base < threads ? min(weights.panels, threads) : 1
    parallelFor(base * chunks) { task in
        let chunk = task % chunks, tile = (task / chunks) % tiles, group = task / (chunks * tiles)
        let first = allStrips * tile / tiles * stripWidth
        let count = min(columns, allStrips * (tile + 1) / tiles * stripWidth) - first
        let strips = (count + stripWidth - 1) / stripWidth
        withThreadScratch(strips * stripWidth * depth + ConvWeightPanels.gemmRows * 2 * stripWidth) { scratch in
            let packed = scratch, tileBuffer = scratch + strips * stripWidth * depth
            if let (layout, base) = padded {
                gatherColumns(g, layout: layout, padded: base, group: group, first: first, count: count, depth: depth, packed: packed)
            } else {
                packPointwiseColumns(g, input: input, group: group, first: first, count: count, depth: depth, packed: packed,
                                     scale: inputScale, shift: inputShift)
            }
            let panels = (weights.panels * chunk / chunks)..<(weights.panels * (chunk + 1) / chunks)
            let tile = PanelTile(g: g, group: group, first: first, count: count, strips: strips, depth: depth, packed: packed,
                                 bias: bias, residual: residual, activation: activation, output: output, imageStride: imageStride)
            tile.multiply(weights, panels: panels, scratch: tileBuffer)
        }
    }
}

/// One tile of packed columns times a range of weight panels, written to the NCHW output through the epilogue.
private struct PanelTile {
    let g: ConvGeometry
    let group: Int, first: Int, count: Int, strips: Int, depth: Int
    let packed: UnsafeMutablePointer<Float>
    let bias: UnsafePointer<Float>?
    let residual: UnsafePointer<Float>?
    let activation: Activation
    let output: UnsafeMutablePointer<Float>
    /// Floats from one image of the output to the next (the residual's images are outChannels planes apart).
    let imageStride: Int

    var outPlane: Int { g.outHeight * g.outWidth }

    /// Clamp bounds when the epilogue is only a clamp (Relu, Clip: MobileNet's Relu6), or the identity after a
    /// residual: the residual and the clamp are applied to the accumulators before they are stored, instead of a
    /// second pass over the tile rows (MobileNetV2's projections add a residual and no activation).
    var registerClamp: (low: Float, high: Float)? {
        if let bounds = activation.clampBounds { return bounds }
        if case .none = activation, residual != nil { return (-.infinity, .infinity) }
        return nil
    }

    /// First output channel and valid rows of panel p.
    @inline(__always)
    func channels(_ p: Int) -> (first: Int, rows: Int) {
        let mg = g.outChannelsPerGroup
        return (group * mg + p * ConvWeightPanels.gemmRows, min(ConvWeightPanels.gemmRows, mg - p * ConvWeightPanels.gemmRows))
    }

    /// Bias of panel p as the accumulators' starting values.
    @inline(__always)
    func start(_ p: Int) -> SIMD8<Float> {
        var start = SIMD8<Float>()
        if let bias {
            let (firstChannel, rows) = channels(p)
            for r in 0..<rows { start[r] = bias[firstChannel + r] }
        }
        return start
    }

    /// Each panel runs over every strip of the tile (from L2) for the whole of k, results straight to the output.
    /// `scratch` holds 6 x 32 floats.
    func multiply(_ weights: ConvWeightPanels, panels: Range<Int>, scratch: UnsafeMutablePointer<Float>) {
        if osprey_float_avx512() != 0 {
            multiplyWide(weights, panels: panels, scratch: scratch)
            return
        }
        let outPlane = self.outPlane, imageStride = self.imageStride, outChannels = g.outChannels
        let clamp = registerClamp
        let low = FloatVector(repeating: clamp?.low ?? -.infinity), high = FloatVector(repeating: clamp?.high ?? .infinity)
        for p in panels {
            let a = weights.panel(group: group, index: p)
            let (firstChannel, rows) = channels(p)
            let start = start(p)
            for s in 0..<strips {
                let column = first + s * stripWidth, width = min(stripWidth, count - s * stripWidth)
                let b = UnsafePointer(packed + s * stripWidth * depth)
                let n = column / outPlane, pixel = column - n * outPlane
                if width == stripWidth && pixel + stripWidth <= outPlane {
                    // Plain stores, all inline: the epilogue runs over the whole tile row afterwards (or is a clamp here).
                    var c = microKernel(depth, a, b, start6x16(start))
                    let offset = (n * outChannels + firstChannel) * outPlane + pixel
                    if clamp != nil {
                        if let residual { c = addingRows(c, rows: rows, at: residual + offset, stride: outPlane) }
                        c = (Engine.clamp(c.0, low, high), Engine.clamp(c.1, low, high), Engine.clamp(c.2, low, high),
                             Engine.clamp(c.3, low, high), Engine.clamp(c.4, low, high), Engine.clamp(c.5, low, high))
                    }
                    let o = output + n * imageStride + firstChannel * outPlane + pixel
                    storeRows(c, rows: rows, at: o, stride: outPlane)
                } else {
                    if width <= 8 {
                        storeTile(microKernel(depth, a, b, start6x8(start)), scratch)
                    } else {
                        storeTile(microKernel(depth, a, b, start6x16(start)), scratch)
                    }
                    scatter(scratch, panel: p, strip: s)
                }
            }
            epilogue(panel: p)
        }
    }

    /// `multiply` on CPUs with AVX-512F: each panel over two adjacent strips at a time (6 x 32 in 12 zmm accumulators,
    /// C), the register epilogue and masked stores of partial widths inside the C tile; only a pair of strips that
    /// runs into the next image goes through `scratch` and the lane-by-lane scatter.
    private func multiplyWide(_ weights: ConvWeightPanels, panels: Range<Int>, scratch: UnsafeMutablePointer<Float>) {
        let outPlane = self.outPlane, imageStride = self.imageStride, outChannels = g.outChannels, depth = self.depth
        let clamp = registerClamp
        let low = clamp?.low ?? -.infinity, high = clamp?.high ?? .infinity
        let stripStride = stripWidth * depth
        for p in panels {
            let a = weights.panel(group: group, index: p)
            let (firstChannel, rows) = channels(p)
            var start = start(p)
            withUnsafeBytes(of: &start) { startBytes in
                let starts = startBytes.baseAddress!.assumingMemoryBound(to: Float.self)
                var s = 0
                while s < strips {
                    let pair = min(2, strips - s)
                    let column = first + s * stripWidth, width = min(pair * stripWidth, count - s * stripWidth)
                    let b = UnsafePointer(packed + s * stripStride)
                    let n = column / outPlane, pixel = column - n * outPlane
                    if pixel + width <= outPlane {
                        let o = output + n * imageStride + firstChannel * outPlane + pixel
                        let r = clamp == nil ? nil : residual.map { $0 + (n * outChannels + firstChannel) * outPlane + pixel }
                        osprey_conv_tile_avx512(rows, width, depth, a, b, stripStride, starts, o, outPlane, r, outPlane, low, high)
                    } else {
                        osprey_conv_tile_avx512(rows, width, depth, a, b, stripStride, starts, scratch, 2 * stripWidth, nil, 0,
                                                -.infinity, .infinity)
                        scatter(scratch, stride: 2 * stripWidth, panel: p, column: column, width: width)
                    }
                    s += pair
                }
            }
            epilogue(panel: p)
        }
    }

    /// Tile lanes to the output one by one: the columns may run into the next image.
    @inline(__always)
    func scatter(_ tile: UnsafeMutablePointer<Float>, panel p: Int, strip s: Int) {
        let column = first + s * stripWidth, width = min(stripWidth, count - s * stripWidth)
        scatter(tile, stride: stripWidth, panel: p, column: column, width: width)
    }

    /// Lanes [0, width) of the tile rows (`stride` floats apart) to the output columns from `column`, one by one.
    @inline(__always)
    func scatter(_ tile: UnsafeMutablePointer<Float>, stride tileStride: Int, panel p: Int, column: Int, width: Int) {
        let (firstChannel, rows) = channels(p)
        let outPlane = self.outPlane, imageStride = self.imageStride, outChannels = g.outChannels
        let clamp = registerClamp
        let low = clamp?.low ?? -.infinity, high = clamp?.high ?? .infinity
        for lane in 0..<width {
            let j = column + lane, image = j / outPlane, at = j - image * outPlane
            for r in 0..<rows {
                let index = (image * outChannels + firstChannel + r) * outPlane + at
                var value = tile[r * tileStride + lane]
                if clamp != nil {
                    if let residual { value += residual[index] }
                    if value < low { value = low }
                    if value > high { value = high }
                }
                output[image * imageStride + (firstChannel + r) * outPlane + at] = value
            }
        }
    }

    /// Residual and activation over panel p's rows of the tile, image by image, while they are in cache.
    @inline(__always)
    func epilogue(panel p: Int) {
        if residual == nil, case .none = activation { return }
        if registerClamp != nil { return }
        let (firstChannel, rows) = channels(p)
        let outPlane = self.outPlane, outChannels = g.outChannels
        var j = first
        while j < first + count {
            let n = j / outPlane, pixel = j - n * outPlane, length = min(first + count - j, outPlane - pixel)
            for r in 0..<rows {
                let offset = (n * outChannels + firstChannel + r) * outPlane + pixel
                activation.apply(output + n * imageStride + (firstChannel + r) * outPlane + pixel, count: length, adding: 0,
                                 residual: residual.map { $0 + offset })
            }
            j += length
        }
    }
}

extension Activation {
    /// The bounds when the activation is a plain clamp (Relu, Clip), which conv kernels apply in registers.
    var clampBounds: (low: Float, high: Float)? {
        switch self {
        case .relu: return (0, .infinity)
        case .clip(let low, let high): return (low, high)
        default: return nil
        }
    }

    /// `clampBounds`, or unbounded for no activation: the bounds a kernel whose epilogue is a clamp in registers
    /// applies, nil when the activation is something else.
    var registerClampBounds: (low: Float, high: Float)? {
        if case .none = self { return (-.infinity, .infinity) }
        return clampBounds
    }
}

@inline(__always)
private func start6x16(_ s: SIMD8<Float>) -> Tile6x16 {
    (SIMD16(repeating: s[0]), SIMD16(repeating: s[1]), SIMD16(repeating: s[2]), SIMD16(repeating: s[3]), SIMD16(repeating: s[4]),
     SIMD16(repeating: s[5]))
}

@inline(__always)
private func start6x8(_ s: SIMD8<Float>) -> Tile6x8 {
    (SIMD8(repeating: s[0]), SIMD8(repeating: s[1]), SIMD8(repeating: s[2]), SIMD8(repeating: s[3]), SIMD8(repeating: s[4]),
     SIMD8(repeating: s[5]))
}

/// Stores six rows at a stride of 16 floats.
@inline(__always)
private func storeTile<V: SIMD>(_ c: (V, V, V, V, V, V), _ p: UnsafeMutablePointer<Float>) where V.Scalar == Float {
    p.store(c.0); (p + 16).store(c.1); (p + 32).store(c.2); (p + 48).store(c.3); (p + 64).store(c.4); (p + 80).store(c.5)
}

/// Six rows of accumulated columns (16 lanes for whole strips, 8 for a last strip of at most 8 columns).
typealias Tile6<V: SIMD> = (V, V, V, V, V, V) where V.Scalar == Float
/// Six rows of 16 accumulated columns.
typealias Tile6x16 = Tile6<SIMD16<Float>>
/// Six rows of 8 accumulated columns.
typealias Tile6x8 = Tile6<SIMD8<Float>>

/// `c` plus the first `rows` (1...6) rows at `r`, row i at `r + i * stride` (rows past them unchanged, unread).
@inline(__always)
func addingRows(_ c: Tile6x16, rows: Int, at r: UnsafePointer<Float>, stride: Int) -> Tile6x16 {
    var c = c
    c.0 += r.vector(SIMD16<Float>.self)
    if rows > 1 { c.1 += (r + stride).vector(SIMD16<Float>.self) }
    if rows > 2 { c.2 += (r + 2 * stride).vector(SIMD16<Float>.self) }
    if rows > 3 { c.3 += (r + 3 * stride).vector(SIMD16<Float>.self) }
    if rows > 4 { c.4 += (r + 4 * stride).vector(SIMD16<Float>.self) }
    if rows > 5 { c.5 += (r + 5 * stride).vector(SIMD16<Float>.self) }
    return c
}

/// Stores the first `rows` (1...6) rows of `c` at `o`, row r at `o + r * stride`.
@inline(__always)
func storeRows<V: SIMD>(_ c: Tile6<V>, rows: Int, at o: UnsafeMutablePointer<Float>, stride: Int) where V.Scalar == Float {
    o.store(c.0)
    if rows > 1 { (o + stride).store(c.1) }
    if rows > 2 { (o + 2 * stride).store(c.2) }
    if rows > 3 { (o + 3 * stride).store(c.3) }
    if rows > 4 { (o + 4 * stride).store(c.4) }
    if rows > 5 { (o + 5 * stride).store(c.5) }
}

/// The micro-kernel: row r = start.r + sum_k a[k * 6 + r] * b[k * 16 ..< k * 16 + V.scalarCount] (V is SIMD16, or
/// SIMD8 for the first 8 lanes of a last, narrow strip). Always inlined, so each use is specialised.
@inline(__always)
private func microKernel<V: SIMD>(_ depth: Int, _ a: UnsafePointer<Float>, _ b: UnsafePointer<Float>, _ start: Tile6<V>) -> Tile6<V>
where V.Scalar == Float {
    var (c0, c1, c2, c3, c4, c5) = start
    var ap = a, bp = b
    for _ in 0..<depth {
        // Weights stream from memory once per run (9 MB per 7x7 ResNet layer) faster than the hardware prefetcher
        // runs ahead: fetch them ~130 iterations before use (ResNet-18 batch 1: 46 -> 42 ms).
        osprey_prefetch(ap + 768)
        let v = bp.vector(V.self)
        multiplyAdd(&c0, V(repeating: ap[0]), v)
        multiplyAdd(&c1, V(repeating: ap[1]), v)
        multiplyAdd(&c2, V(repeating: ap[2]), v)
        multiplyAdd(&c3, V(repeating: ap[3]), v)
        multiplyAdd(&c4, V(repeating: ap[4]), v)
        multiplyAdd(&c5, V(repeating: ap[5]), v)
        ap += 6
        bp += stripWidth
    }
    return (c0, c1, c2, c3, c4, c5)
}

extension ConvGeometry {
    /// 1x1, stride 1, unpadded: the input planes are the gemm operand as they are.
    var isPointwise: Bool {
        var w = parts.window
        (w.dilationHeight, w.dilationWidth) = (1, 1)  // irrelevant to a 1x1 kernel
        return w == SlidingWindow(kernelHeight: 1, kernelWidth: 1)
    }
}

/// Per-image, per-channel addends ([batch][inChannels]) applied after the input scale, then a floor (Relu: 0): a
/// BatchNormalization (+ Relu) folded into the pointwise conv after it (`fuseInputAffineIntoConvs`).
public struct InputShift {
    /// [batch][inChannels] addends.
    public let add: UnsafePointer<Float>
    /// Lower bound applied after the add (-infinity: none).
    public let floor: Float

    /// Addends `add` ([batch][inChannels]) and the floor applied after them.
    public init(add: UnsafePointer<Float>, floor: Float) {
        self.add = add
        self.floor = floor
    }
}

/// Packs `count` values of one input plane run (`src`, column `first` of the tile onwards) into row `row` of the
/// 16-column strips as max(x * factor + add, floor).
@inline(__always)
private func shiftedChannel(_ src: UnsafePointer<Float>, count: Int, first q0: Int, into packed: UnsafeMutablePointer<Float>, row k: Int,
                            stripStride: Int, factor: Float, add: Float, floor: Float) {
    @inline(__always) func value(_ x: Float) -> Float { Swift.max(x * factor + add, floor) }
    let lead = min(count, (stripWidth - q0 % stripWidth) % stripWidth)
    let whole = (count - lead) / stripWidth
    var i = 0
    while i < lead {
        let q = q0 + i
        packed[(q / stripWidth) * stripStride + k * stripWidth + q % stripWidth] = value(src[i])
        i += 1
    }
    var dst = packed + ((q0 + i) / stripWidth) * stripStride + k * stripWidth
    let vf = SIMD16<Float>(repeating: factor), va = SIMD16<Float>(repeating: add), vl = SIMD16<Float>(repeating: floor)
    for _ in 0..<whole {
        // A compare and select: the standard library's pointwiseMax stayed a per-lane loop (the conv 4x slower).
        let v = (src + i).vector(SIMD16<Float>.self) * vf + va
        dst.store(v.replacing(with: vl, where: v .< vl))
        dst += stripStride
        i += stripWidth
    }
    while i < count {
        let q = q0 + i
        packed[(q / stripWidth) * stripStride + k * stripWidth + q % stripWidth] = value(src[i])
        i += 1
    }
}

/// Columns [first, first + count) of a pointwise conv's operand (input channels x pixels of all images) as strips of
/// 16 interleaved by k (strip s, channel k at packed[(s * depth + k) * 16]); lanes past `count` are zero. With
/// `scale` ([batch][inChannels]) each value is multiplied by its image's and channel's factor on the way.
///
/// Channel by channel over each image's run of columns: every input plane is read as one contiguous run (a few
/// streams the hardware prefetcher follows), where strip by strip read `depth` planes 64 bytes at a time, more
/// streams than it tracks (MobileNetV2 batch 8: the packing pass was latency-bound). Writes go to the tile in L2.
private func packPointwiseColumns(_ g: ConvGeometry, input: UnsafePointer<Float>, group: Int, first: Int, count: Int, depth: Int,
                                  packed: UnsafeMutablePointer<Float>, scale: UnsafePointer<Float>?, shift: InputShift? = nil) {
    let outPlane = g.outHeight * g.outWidth, inPlane = g.inHeight * g.inWidth
    let strips = (count + stripWidth - 1) / stripWidth
    let firstChannel = group * g.inChannelsPerGroup
    let stripStride = depth * stripWidth
    if count % stripWidth != 0 {
        let lanes = count % stripWidth, last = packed + (strips - 1) * stripStride
        for k in 0..<depth { (last + k * stripWidth + lanes).update(repeating: 0, count: stripWidth - lanes) }
    }
    var j = first
    while j < first + count {
        let n = j / outPlane, pixel = j - n * outPlane, length = min(first + count - j, outPlane - pixel)
        let q0 = j - first
        // Lanes before the run's first whole strip, then whole strips, then the rest.
        let lead = min(length, (stripWidth - q0 % stripWidth) % stripWidth)
        let whole = (length - lead) / stripWidth
        let source = input + (n * g.inChannels + firstChannel) * inPlane + pixel
        for k in 0..<depth {
            let src = source + k * inPlane
            if let shift {
                shiftedChannel(src, count: length, first: q0, into: packed, row: k, stripStride: stripStride,
                               factor: scale?[n * g.inChannels + firstChannel + k] ?? 1,
                               add: shift.add[n * g.inChannels + firstChannel + k], floor: shift.floor)
                continue
            }
            // x * 1 is x exactly, so unscaled convs keep their values.
            let factor = scale?[n * g.inChannels + firstChannel + k] ?? 1
            var i = 0
            while i < lead {
                let q = q0 + i
                packed[(q / stripWidth) * stripStride + k * stripWidth + q % stripWidth] = src[i] * factor
                i += 1
            }
            var dst = packed + ((q0 + i) / stripWidth) * stripStride + k * stripWidth
            for _ in 0..<whole {
                dst.store((src + i).vector(SIMD16<Float>.self) * SIMD16(repeating: factor))
                dst += stripStride
                i += stripWidth
            }
            while i < length {
                let q = q0 + i
                packed[(q / stripWidth) * stripStride + k * stripWidth + q % stripWidth] = src[i] * factor
                i += 1
            }
        }
        j += length
    }
}

/// The input of every image copied once with its zero padding: plane [rows][width] per (image, channel), plus slack
/// around the whole buffer so that masked-off vector lanes may read past either end.
struct PaddedInput {
    /// Rows of a padded plane (H + top + bottom).
    let rows: Int
    /// Columns of a padded plane (W + left + right).
    let width: Int
    /// Floats before the first plane (and after the last) that vector gathers may touch.
    let slack: Int
    /// Planes (images * channels).
    let planes: Int
    /// Top and left padding.
    let top: Int, left: Int
    /// Rows and columns of an input plane.
    let sourceRows: Int, sourceWidth: Int

    init(_ g: ConvGeometry) {
        rows = g.inHeight + g.padTop + g.padBottom
        width = g.inWidth + g.padLeft + g.padRight
        slack = 16 * max(2, g.strideWidth) + 32
        planes = g.batch * g.inChannels
        top = g.padTop
        left = g.padLeft
        sourceRows = g.inHeight
        sourceWidth = g.inWidth
    }

    /// Floats of the buffer, slack included.
    var floats: Int { planes * rows * width + 2 * slack }

    /// Copies NCHW `input` into `buffer` (floats long): zero borders, planes back to back after the slack.
    func fill(from input: UnsafePointer<Float>, into buffer: UnsafeMutablePointer<Float>) {
        let plane = rows * width
        let w = width, r = rows, top = top, left = left, slack = slack, sourceWidth = sourceWidth, sourceRows = sourceRows
        parallelRanges(planes, minimumChunk: max(1, 16_384 / max(1, plane))) { range in
            for p in range {
                let dst = buffer + slack + p * plane, src = input + p * sourceWidth * sourceRows
                dst.update(repeating: 0, count: top * w)
                for y in 0..<sourceRows {
                    let row = dst + (top + y) * w
                    if left > 0 { row.update(repeating: 0, count: left) }
                    (row + left).update(from: src + y * sourceWidth, count: sourceWidth)
                    if w - left - sourceWidth > 0 { (row + left + sourceWidth).update(repeating: 0, count: w - left - sourceWidth) }
                }
                (dst + (top + sourceRows) * w).update(repeating: 0, count: (r - top - sourceRows) * w)
            }
        }
    }
}

/// Columns [first, first + count) of one group's im2col matrix gathered from the padded input as strips of 16
/// interleaved by k. Each strip is split once into runs of lanes that come from one output row; a run is then one
/// (strided) vector load per k, blended into the strip under its lane mask.
private func gatherColumns(_ g: ConvGeometry, layout: PaddedInput, padded: UnsafePointer<Float>, group: Int, first: Int, count: Int,
                           depth: Int, packed: UnsafeMutablePointer<Float>) {
    let ow = g.outWidth, outPlane = g.outHeight * ow
    let kh = g.kernelHeight, kw = g.kernelWidth, sh = g.strideHeight, sw = g.strideWidth
    let plane = layout.rows * layout.width
    let strips = (count + stripWidth - 1) / stripWidth
    // Runs of every strip: start offset (of lane 0) in the padded buffer and the lanes it fills.
    var runStarts: [Int] = [], runMasks: [SIMDMask<SIMD16<Int32>>] = [], stripRuns: [Range<Int>] = []
    let lanes = SIMD16<Int32>(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
    for s in 0..<strips {
        let firstRun = runStarts.count
        let width = min(stripWidth, count - s * stripWidth)
        var lane = 0
        while lane < width {
            let j = first + s * stripWidth + lane, n = j / outPlane, pixel = j - n * outPlane, y = pixel / ow, x = pixel - y * ow
            let length = min(width - lane, ow - x)
            let offset = (n * g.inChannels + group * g.inChannelsPerGroup) * plane + y * sh * layout.width + x * sw
            runStarts.append(offset - lane * sw)
            runMasks.append((lanes .>= Int32(lane)) .& (lanes .< Int32(lane + length)))
            lane += length
        }
        stripRuns.append(firstRun..<runStarts.count)
    }
    let tapOffsets = (0..<depth).map { k in
        let kx = k % kw, ky = (k / kw) % kh, c = k / (kw * kh)
        return c * plane + ky * g.dilationHeight * layout.width + kx * g.dilationWidth
    }
    // The load specialised per stride outside the loops (a runtime stride kept the generic lane-by-lane path).
    @inline(__always)
    func gather(_ load: (UnsafePointer<Float>) -> SIMD16<Float>) {
        runStarts.withUnsafeBufferPointer { starts in
            runMasks.withUnsafeBufferPointer { masks in
                tapOffsets.withUnsafeBufferPointer { taps in
                    for s in 0..<strips {
                        let strip = packed + s * stripWidth * depth
                        let runs = stripRuns[s]
                        if runs.count == 1 && masks[runs.lowerBound] == SIMDMask(repeating: true) {
                            let base = padded + starts[runs.lowerBound]
                            for k in 0..<depth { (strip + k * stripWidth).store(load(base + taps[k])) }
                        } else {
                            for k in 0..<depth {
                                var v = SIMD16<Float>()
                                for r in runs { v.replace(with: load(padded + starts[r] + taps[k]), where: masks[r]) }
                                (strip + k * stripWidth).store(v)
                            }
                        }
                    }
                }
            }
        }
    }
    switch sw {
    case 1: gather { $0.vector(SIMD16<Float>.self) }
    case 2: gather { loadEvenLanes16($0) }
    default: gather { loadStrided16($0, stride: sw) }
    }
}
