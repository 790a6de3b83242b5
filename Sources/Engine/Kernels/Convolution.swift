import Infrastructure

/// Convolution weights prepared once at compile time, run many times with any batch and spatial size.
///
/// Depthwise convs (one input channel per group) use a vectorised direct kernel on OIHW filters; every other conv
/// packs its weights into micro-kernel panels once and runs as `denseConvolution`. Bias, an optional residual and
/// the activation are applied as the results are stored. `convolutionReference` is the twin both are tested against.
public final class PackedConvolution: @unchecked Sendable {
    /// Channels, groups and kernel the weights were packed for.
    let shape: PackedShape
    /// Epilogue applied after the bias.
    public let activation: Activation
    /// OIHW depthwise filters [M, kh*kw], or nil when the weights live in `panels` (one copy either way).
    private let filters: UnsafeMutablePointer<Float>?
    private let panels: ConvWeightPanels?
    /// The same weights in 4-row panels for `groupedConvolution`, when the groups are small enough for it.
    private let groupedPanels: ConvWeightPanels?
    /// The 3x3 filters in the Winograd domain as well, when the conv always runs at stride and dilation 1: built on
    /// the first call that runs there, since they are 4x the weights and a layer that only sees small planes
    /// (ResNet-18's 7x7 stage at batch 1: 113 MB) never needs them.
    private let winograd: LazyWinogradFilters?
    private let bias: UnsafeMutablePointer<Float>?

    /// Packs OIHW `weights` (count outChannels * inChannels/groups * kh * kw) and an optional per-output-channel bias;
    /// `unitStride` (every call at stride and dilation 1) lets a dense 3x3 conv also keep Winograd-domain filters.
    public init(weights: UnsafeBufferPointer<Float>, bias: UnsafeBufferPointer<Float>?, outChannels: Int, inChannels: Int,
                kernelHeight: Int, kernelWidth: Int, groups: Int, activation: Activation, unitStride: Bool = false) {
        shape = PackedShape(outChannels: outChannels, inChannels: inChannels, kernelHeight: kernelHeight, kernelWidth: kernelWidth,
                            groups: groups, weights: weights.count, bias: bias?.count)
        self.activation = activation
        let depth = inChannels / groups * kernelHeight * kernelWidth
        if inChannels / groups == 1 && groups > 1 {
            filters = copiedFloats(weights)
            panels = nil
        } else {
            filters = nil
            panels = ConvWeightPanels(weights: weights.baseAddress!, channelsPerGroup: outChannels / groups, groups: groups, depth: depth)
        }
        // Small groups keep both packings (their weights are small): the 6-row panels serve strides the flat layout lacks.
        groupedPanels = groupedFilterFits(groups: groups, inPerGroup: inChannels / groups, outPerGroup: outChannels / groups)
            ? ConvWeightPanels(weights: weights.baseAddress!, channelsPerGroup: outChannels / groups, groups: groups, depth: depth, rows: 4)
            : nil
        self.bias = bias.map(copiedFloats)
        winograd = unitStride && WinogradFilters.suits(outChannels: outChannels, inChannels: inChannels, kernelHeight: kernelHeight,
                                                       kernelWidth: kernelWidth, groups: groups)
            ? LazyWinogradFilters(outChannels: outChannels, inChannels: inChannels)
            : nil
    }

    deinit {
        filters?.deallocate()
        panels?.deallocate()
        groupedPanels?.deallocate()
        bias?.deallocate()
    }

    /// Computes the convolution of NCHW `input` into NCHW `output` (batch * outChannels * outHeight * outWidth floats).
    ///
    /// `residual`, when given, has the output's shape and is added before the activation (a fused Add + Relu);
    /// `activation`, when given, replaces the packed one (the activation after a fused Add). `outputImageStride`
    /// (floats from one output image to the next, for a window of a wider Concat buffer) needs `writesStridedOutput`;
    /// `inputChannelScale` ([batch][inChannels], each input plane multiplied by its factor) needs `scalesInputChannels`;
    /// `inputShift` (added after the scale, then floored: a folded BatchNormalization + Relu) needs the scale too.
    public func run(_ geometry: ConvGeometry, input: UnsafePointer<Float>, output: UnsafeMutablePointer<Float>,
                    residual: UnsafePointer<Float>? = nil, activation: Activation? = nil, outputImageStride: Int? = nil,
                    inputChannelScale: UnsafePointer<Float>? = nil, inputShift: InputShift? = nil) {
        let activation = activation ?? self.activation
        let g = geometry
        precondition(shape.matches(g.parts), "geometry does not match the packed convolution")
        precondition(outputImageStride == nil || writesStridedOutput(g), "this convolution writes compact images only")
        precondition(inputChannelScale == nil || scalesInputChannels(g), "this convolution takes no input scale")
        precondition(inputShift == nil || inputChannelScale != nil, "an input shift comes with an input scale")
        guard g.batch > 0, g.outHeight > 0, g.outWidth > 0 else { return }
        if let winograd, winograd.fits(g), let panels {
            winogradConvolution(g, filters: winograd.filters(panels: panels, bias: bias.map { UnsafePointer($0) }), residual: residual, activation: activation, input: input, output: output,
                                outputImageStride: outputImageStride)
        } else if let filters {
            depthwiseConvolution(g, input: input, weights: filters, bias: bias, residual: residual, activation: activation, output: output)
        } else if let groupedPanels, let layout = g.flatWindowLayout {
            groupedConvolution(g, layout: layout, weights: groupedPanels, bias: bias, residual: residual, activation: activation,
                               input: input, output: output, outputImageStride: outputImageStride)
        } else if let panels, g.isStridedPointwise {
            stridedPointwiseConvolution(g, weights: panels, bias: bias, residual: residual, activation: activation, input: input,
                                        output: output, outputImageStride: outputImageStride)
        } else if let panels {
            denseConvolution(g, weights: panels, bias: bias, residual: residual, activation: activation, input: input, output: output,
                             outputImageStride: outputImageStride, inputScale: inputChannelScale, inputShift: inputShift)
        }
    }

    /// Whether `run` can multiply `g`'s input planes by per-image, per-channel factors as it reads them (the dense
    /// pointwise kernel: it packs every input value once anyway).
    public func scalesInputChannels(_ g: ConvGeometry) -> Bool {
        guard panels != nil, filters == nil, g.isPointwise, !(winograd?.fits(g) ?? false) else { return false }
        return groupedPanels == nil || g.flatWindowLayout == nil
    }

    /// Whether `run` can write `g`'s output images at a stride of its own (every kernel but the depthwise one).
    public func writesStridedOutput(_ g: ConvGeometry) -> Bool {
        if let winograd, winograd.fits(g) { return true }
        return filters == nil
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
                        let plane = input + (n * g.inChannels + group * cg + c) * g.inHeight * g.inWidth
                        let filter = weights + (m * cg + c) * g.kernelHeight * g.kernelWidth
                        g.window.forEachTap(y: y, x: x, inHeight: g.inHeight, inWidth: g.inWidth) { tap, iy, ix in
                            sum += plane[iy * g.inWidth + ix] * filter[tap]
                        }
                    }
                    let index = ((n * g.outChannels + m) * oh + y) * ow + x
                    output[index] = activation(sum + (residual?[index] ?? 0))
                }
            }
        }
    }
}

/// Winograd-domain filters made from a conv's 6-row weight panels on first use, then kept (behind a lock: the
/// compute threads of a row-split batch may ask at once).
final class LazyWinogradFilters: @unchecked Sendable {
    /// Input and output channels of the convolution.
    let inChannels: Int, outChannels: Int
    private let lock = Lock()
    private var built: WinogradFilters?

    /// Filters for a dense 3x3 conv of these channels, not yet transformed.
    init(outChannels: Int, inChannels: Int) {
        self.outChannels = outChannels
        self.inChannels = inChannels
    }

    deinit { built?.deallocate() }

    /// Whether a call with geometry `g` should run in the Winograd domain (`WinogradFilters.fits`).
    func fits(_ g: ConvGeometry) -> Bool {
        WinogradFilters.fits(g, inChannels: inChannels, outChannels: outChannels)
    }

    /// The transformed filters, made now from `panels` (one group, 6-row panels of OIHW rows) and `bias` if this is
    /// the first call.
    func filters(panels: ConvWeightPanels, bias: UnsafePointer<Float>?) -> WinogradFilters {
        lock.withLock {
            if let built { return built }
            let depth = inChannels * 9, rows = panels.rows
            let weights = allocateFloats(outChannels * depth)
            defer { weights.deallocate() }
            for m in 0..<outChannels {
                let panel = panels.pointer + (m / rows) * depth * rows
                for k in 0..<depth { weights[m * depth + k] = panel[k * rows + m % rows] }
            }
            let made = WinogradFilters(weights: weights, bias: bias, outChannels: outChannels, inChannels: inChannels)
            built = made
            return made
        }
    }
}
