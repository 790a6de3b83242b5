import Tensor

/// Per-axis begin/end padding of a convolution or pooling window (auto_pad resolves here).
func windowPads(input: Int, kernel: Int, stride: Int, dilation: Int, autoPad: String, explicit: (Int, Int), _ ctx: OpContext) throws -> (Int, Int) {
    switch autoPad {
    case "NOTSET", "": return explicit
    case "VALID": return (0, 0)
    case "SAME_UPPER", "SAME_LOWER":
        let out = (input + stride - 1) / stride
        let total = max(0, (out - 1) * stride + (kernel - 1) * dilation + 1 - input)
        return autoPad == "SAME_UPPER" ? (total / 2, total - total / 2) : (total - total / 2, total / 2)
    default: throw ctx.unsupported("auto_pad", "'\(autoPad)'")
    }
}

/// Attributes shared by Conv, ConvTranspose and the pools.
struct WindowAttributes: Sendable {
    var autoPad: String
    var kernelShape: [Int]?
    var strides: [Int]?
    var pads: [Int]?
    var dilations: [Int]?

    init(_ ctx: OpContext) throws {
        autoPad = try ctx.string("auto_pad", "NOTSET")
        kernelShape = try ctx.ints("kernel_shape")
        strides = try ctx.ints("strides")
        pads = try ctx.ints("pads")
        dilations = try ctx.ints("dilations")
        guard ["NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER", ""].contains(autoPad) else { throw ctx.unsupported("auto_pad", "'\(autoPad)'") }
    }

    /// Resolves the per-spatial-axis values (length `spatial`) for an input of `inputSpatial`.
    func resolve(spatial: Int, inputSpatial: [Int], kernel: [Int], _ ctx: OpContext) throws
        -> (strides: [Int], dilations: [Int], padBegin: [Int], padEnd: [Int]) {
        let s = strides ?? Array(repeating: 1, count: spatial)
        let d = dilations ?? Array(repeating: 1, count: spatial)
        let p = pads ?? Array(repeating: 0, count: 2 * spatial)
        guard s.count == spatial, d.count == spatial, p.count == 2 * spatial, kernel.count == spatial else {
            throw ctx.error(.invalidModel, "strides \(s), dilations \(d), pads \(p), kernel \(kernel) do not match \(spatial) spatial axes")
        }
        guard s.allSatisfy({ $0 > 0 }), d.allSatisfy({ $0 > 0 }), kernel.allSatisfy({ $0 > 0 }), p.allSatisfy({ $0 >= 0 }) else {
            throw ctx.error(.invalidModel, "strides, dilations and kernel sizes must be positive and pads non-negative (strides \(s), dilations \(d), kernel \(kernel), pads \(p))")
        }
        var begin: [Int] = [], end: [Int] = []
        for i in 0..<spatial {
            let (b, e) = try windowPads(input: inputSpatial[i], kernel: kernel[i], stride: s[i], dilation: d[i], autoPad: autoPad,
                                        explicit: (p[i], p[i + spatial]), ctx)
            begin.append(b); end.append(e)
        }
        return (s, d, begin, end)
    }
}

extension SlidingWindow {
    /// The window of a 1-D or 2-D `kernel` with its resolved strides, dilations and pads (1-D: one row high).
    init(kernel: [Int], strides: [Int], dilations: [Int], padBegin: [Int], padEnd: [Int]) {
        let twoD = kernel.count == 2
        self.init(kernelHeight: twoD ? kernel[0] : 1, kernelWidth: kernel.last!, strideHeight: twoD ? strides[0] : 1,
                  strideWidth: strides.last!, dilationHeight: twoD ? dilations[0] : 1, dilationWidth: dilations.last!,
                  padTop: twoD ? padBegin[0] : 0, padLeft: padBegin.last!, padBottom: twoD ? padEnd[0] : 0, padRight: padEnd.last!)
    }
}

/// Whether `s` is [N, C, 1, 1] for `x` [N, C, H, W]: a per-image, per-channel factor of a squeeze-and-excitation Mul.
private func isChannelScale(_ s: Tensor, of x: Tensor) -> Bool {
    x.rank == 4 && s.rank == 4 && s.shape == [x.shape[0], x.shape[1], 1, 1]
}

/// x * y through the elementwise Mul's own kernel: what the unfused Mul would have produced.
private func multiplied(_ x: Tensor, _ y: Tensor, _ ctx: OpContext) throws -> Tensor {
    var pair = KernelInputs(values: [x, y])
    guard let product = try floatArithmetic(.multiply, &pair, ctx) else { throw ctx.error(.unsupportedDType, "Mul needs float32 operands") }
    return product
}

let convOperators: OperatorTable = [
    "Conv": { ctx in
        let attrs = try WindowAttributes(ctx)
        let groups = try ctx.int("group", 1)
        guard groups >= 1 else { throw ctx.error(.invalidModel, "group must be at least 1, got \(groups)") }
        let activation = ctx.activation
        // With a fused residual Add the activation follows the Add: packed without it, and given to the epilogue with
        // the skip when the skip has the output's shape; when the conv output has to broadcast up to a larger skip,
        // the Add and the activation run afterwards.
        let fusesResidual = ctx.hasInput(fusedResidualInput)
        let packedActivation: Activation = fusesResidual ? .none : activation
        var packed: PackedConvolution?
        var consumed: Set<Int> = []
        if let w = ctx.constants[1], w.rank != 5, !ctx.hasInput(2) || ctx.constants[2] != nil {
            guard w.dtype == .float32 else { throw ctx.error(.unsupportedDType, "weights are \(w.dtype), expected float32") }
            guard w.rank == 3 || w.rank == 4 else { throw ctx.error(.unsupportedAttribute, "only 1-D and 2-D convolutions are supported (weights \(w.shape))") }
            let kh = w.rank == 4 ? w.shape[2] : 1, kw = w.shape[w.rank - 1]
            // PackedConvolution's preconditions: check them here so a bad group count is a model error, not a trap.
            guard w.shape[0] % groups == 0, groups <= max(w.shape[0], 1) else {
                throw ctx.error(.invalidModel, "\(w.shape[0]) output channels do not divide into \(groups) groups")
            }
            let bias = ctx.hasInput(2) ? ctx.constants[2] : nil
            if let b = bias, b.dtype != .float32 || b.count != w.shape[0] { throw ctx.error(.invalidModel, "bias \(b) does not match \(w.shape[0]) output channels") }
            // Strides and dilations are fixed attributes: unit ones let a dense 3x3 conv keep Winograd filters too.
            let unitStride = (attrs.strides ?? []).allSatisfy { $0 == 1 } && (attrs.dilations ?? []).allSatisfy { $0 == 1 }
            packed = w.withUnsafeBufferPointer(of: Float.self) { wp in
                if let b = bias {
                    return b.withUnsafeBufferPointer(of: Float.self) { bp in
                        PackedConvolution(weights: wp, bias: bp, outChannels: w.shape[0], inChannels: w.shape[1] * groups,
                                          kernelHeight: kh, kernelWidth: kw, groups: groups, activation: packedActivation,
                                          unitStride: unitStride)
                    }
                }
                return PackedConvolution(weights: wp, bias: nil, outChannels: w.shape[0], inChannels: w.shape[1] * groups,
                                         kernelHeight: kh, kernelWidth: kw, groups: groups, activation: packedActivation,
                                         unitStride: unitStride)
            }
            consumed = ctx.hasInput(2) ? [1, 2] : [1]
        }
        let weightShape = ctx.constants[1]?.shape
        let prepared = packed
        if fusesResidual && packed == nil { throw ctx.error(.invalidModel, "a fused residual Add needs constant 1-D or 2-D weights") }
        let fusesScale = ctx.hasInput(fusedChannelScaleInput)
        // A folded BatchNormalization (+ Relu) before a pointwise conv (see `fuseInputAffineIntoConvs`).
        var inputAffine: (mul: [Float], add: [Float], floor: Float)?
        if ctx.hasInput(fusedInputAffineInput) {
            guard let mul = ctx.constants[fusedInputAffineInput], let add = ctx.constants[fusedInputAffineInput + 1],
                  mul.dtype == .float32, add.dtype == .float32, mul.count == add.count else {
                throw ctx.error(.invalidModel, "a folded BatchNormalization needs constant float32 multipliers and addends")
            }
            inputAffine = (mul.scalars(as: Float.self), add.scalars(as: Float.self), try ctx.float(fusedInputFloorAttribute, -.infinity))
            consumed.formUnion([fusedInputAffineInput, fusedInputAffineInput + 1])
        }
        let affine = inputAffine
        return PreparedKernel(kernel: { inputs in
            var x = try inputs.required(0, ctx)
            guard x.dtype == .float32 else { throw ctx.error(.unsupportedDType, "input is \(x.dtype), expected float32") }
            // A fused Mul (see `fuseChannelScaleIntoConvs`): one operand may scale the other's channels, else multiply now.
            var channelScale: Tensor?
            if fusesScale {
                let other = try inputs.required(fusedChannelScaleInput, ctx)
                guard other.dtype == .float32 else { throw ctx.error(.unsupportedDType, "Mul operand is \(other.dtype), expected float32") }
                if isChannelScale(other, of: x) {
                    channelScale = other
                } else if isChannelScale(x, of: other) {
                    (x, channelScale) = (other, x)
                } else {
                    x = try multiplied(x, other, ctx)
                }
            }
            let wShape = try weightShape ?? inputs.required(1, ctx).shape
            if x.rank == 5 && wShape.count == 5 {
                // 3-D convolution: direct reference loops (rare in served models).
                let w = try inputs.required(1, ctx)
                guard x.shape[1] == w.shape[1] * groups, w.shape[0] % groups == 0 else {
                    throw ctx.error(.executionFailed, "input \(x.shape) does not match weights \(w.shape) with group \(groups)")
                }
                let kernel = Array(w.shape[2...])
                let r = try attrs.resolve(spatial: 3, inputSpatial: Array(x.shape[2...]), kernel: kernel, ctx)
                var outSp: [Int] = []
                for a in 0..<3 {
                    let extent: Int = x.shape[2 + a] + r.padBegin[a] + r.padEnd[a] - r.dilations[a] * (kernel[a] - 1) - 1
                    outSp.append(extent / r.strides[a] + 1)
                }
                guard outSp.allSatisfy({ $0 > 0 }) else { throw ctx.error(.executionFailed, "input \(x.shape) is too small for kernel \(kernel)") }
                return [convolutionND(x, w, inputs[2], strides: r.strides, dilations: r.dilations, padBegin: r.padBegin, outSpatial: outSp,
                                      groups: groups, activation: activation)]
            }
            guard x.rank == wShape.count, x.rank == 3 || x.rank == 4 else {
                throw ctx.error(.executionFailed, "input \(x.shape) does not match weights \(wShape) (1-D and 2-D convolutions only)")
            }
            guard x.shape[1] == wShape[1] * groups else {
                throw ctx.error(.executionFailed, "input has \(x.shape[1]) channels, weights \(wShape) with group \(groups) expect \(wShape[1] * groups)")
            }
            let twoD = x.rank == 4
            let inSpatial = twoD ? [x.shape[2], x.shape[3]] : [x.shape[2]]
            let kernel = twoD ? [wShape[2], wShape[3]] : [wShape[2]]
            if let ks = attrs.kernelShape, ks != kernel { throw ctx.error(.invalidModel, "kernel_shape \(ks) disagrees with weights \(wShape)") }
            let r = try attrs.resolve(spatial: kernel.count, inputSpatial: inSpatial, kernel: kernel, ctx)
            let g = ConvGeometry(batch: x.shape[0], inChannels: x.shape[1], inHeight: twoD ? inSpatial[0] : 1, inWidth: inSpatial.last!,
                                 outChannels: wShape[0], window: SlidingWindow(kernel: kernel, strides: r.strides, dilations: r.dilations,
                                                                               padBegin: r.padBegin, padEnd: r.padEnd), groups: groups)
            guard g.outHeight > 0, g.outWidth > 0 else { throw ctx.error(.executionFailed, "input \(x.shape) is too small for kernel \(kernel)") }
            let outShape = twoD ? [g.batch, g.outChannels, g.outHeight, g.outWidth] : [g.batch, g.outChannels, g.outWidth]
            if let s = channelScale, !(prepared?.scalesInputChannels(g) ?? false) {
                x = try multiplied(x, s, ctx)
                channelScale = nil
            }
            // The folded normalization: as the pointwise packing's per-channel scale and shift, else one pass first.
            var shift: Tensor?
            if let affine {
                guard x.rank == 4, x.shape[1] == affine.mul.count else {
                    throw ctx.error(.executionFailed, "input \(x.shape) does not match the \(affine.mul.count) normalized channels")
                }
                if channelScale == nil, prepared?.scalesInputChannels(g) ?? false {
                    let repeats = g.batch
                    channelScale = Tensor(shape: [repeats * affine.mul.count], scalars: Array((0..<repeats).map { _ in affine.mul }.joined()))
                    shift = Tensor(shape: [repeats * affine.add.count], scalars: Array((0..<repeats).map { _ in affine.add }.joined()))
                } else {
                    x = scaleShiftChannels(x, mul: affine.mul, add: affine.add,
                                           activation: affine.floor == 0 ? .relu : affine.floor == -.infinity ? .none : .clip(min: affine.floor, max: .infinity))
                }
            }
            let scale = channelScale
            // A fused residual Add: the skip is added in the epilogue when it broadcasts into the conv output.
            var skip: Tensor?
            var lateSkip: Tensor?
            if fusesResidual, let r = inputs[fusedResidualInput] {
                guard r.dtype == .float32 else { throw ctx.error(.unsupportedDType, "Add operand is \(r.dtype), expected float32") }
                guard let sum = broadcastShape(outShape, r.shape) else {
                    throw ctx.error(.executionFailed, "cannot broadcast shapes \(outShape) and \(r.shape) in the fused Add")
                }
                if r.shape == outShape {
                    skip = r
                } else if sum == outShape {
                    skip = stridedCopy(r, shape: outShape, strides: broadcastStrides(r.shape, to: outShape), offset: 0)
                } else {
                    lateSkip = r
                }
            }
            // The skip, when it has the output's shape: residual and activation both in the kernel's epilogue.
            func runPacked(_ p: PackedConvolution, _ xp: UnsafePointer<Float>, _ o: UnsafeMutablePointer<Float>, imageStride: Int?) {
                func run(_ sp: UnsafePointer<Float>?, _ shifted: InputShift?) {
                    if let skip {
                        skip.floatPointer {
                            p.run(g, input: xp, output: o, residual: $0, activation: activation, outputImageStride: imageStride, inputChannelScale: sp,
                                  inputShift: shifted)
                        }
                    } else {
                        p.run(g, input: xp, output: o, outputImageStride: imageStride, inputChannelScale: sp, inputShift: shifted)
                    }
                }
                if let scale {
                    scale.floatPointer { sp in
                        if let shift, let affine {
                            shift.floatPointer { run(sp, InputShift(add: $0, floor: affine.floor)) }
                        } else {
                            run(sp, nil)
                        }
                    }
                } else {
                    run(nil, nil)
                }
            }
            // A strided window of a Concat buffer at batch > 1: the kernel writes each image at the buffer's row stride.
            if let window = inputs.placement, !window.isContiguous, lateSkip == nil, let p = prepared, p.writesStridedOutput(g),
               window.rows == g.batch, window.byteCount == Tensor.elementCount(outShape) * MemoryLayout<Float>.stride,
               window.rowStride % MemoryLayout<Float>.stride == 0 {
                let o = (window.storage.pointer + window.byteOffset).assumingMemoryBound(to: Float.self)
                x.floatPointer { xp in runPacked(p, xp, o, imageStride: window.rowStride / MemoryLayout<Float>.stride) }
                return [window.tensor(.float32, shape: outShape)]
            }
            let out = try Tensor.makeFloat(shape: outShape, placement: inputs.placement) { o in
                try x.floatPointer { xp in
                    if let p = prepared {
                        runPacked(p, xp, o, imageStride: nil)
                    } else {
                        let w = try inputs.required(1, ctx)
                        let b = inputs[2]
                        try w.floatPointer { wp in
                            if let b {
                                guard b.count == g.outChannels else { throw ctx.error(.executionFailed, "bias \(b.shape) does not match \(g.outChannels) channels") }
                                b.floatPointer { bp in convolutionReference(g, input: xp, weights: wp, bias: bp, activation: activation, output: o) }
                            } else {
                                convolutionReference(g, input: xp, weights: wp, bias: nil, activation: activation, output: o)
                            }
                        }
                    }
                }
            }
            guard let lateSkip else { return [out] }
            var sum = try broadcastBinary(out, lateSkip, ctx) { (a: Float, b: Float) in a + b }
            sum.withUnsafeMutableBufferPointer(of: Float.self) { p in if let base = p.baseAddress { activation.apply(base, count: p.count) } }
            return [sum]
        }, consumedInputs: consumed)
    },
    "ConvTranspose": { ctx in
        let attrs = try WindowAttributes(ctx)
        let groups = try ctx.int("group", 1)
        guard groups >= 1 else { throw ctx.error(.invalidModel, "group must be at least 1, got \(groups)") }
        let outputPadding = try ctx.ints("output_padding")
        let outputShape = try ctx.ints("output_shape")
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx), w = try inputs.required(1, ctx)
            guard x.dtype == .float32, w.dtype == .float32 else { throw ctx.error(.unsupportedDType, "ConvTranspose needs float32, got \(x.dtype)") }
            guard x.rank == w.rank, (3...5).contains(x.rank) else {
                throw ctx.error(.unsupportedAttribute, "only 1-D and 2-D transposed convolutions are supported (input \(x.shape), weights \(w.shape))")
            }
            guard x.shape[1] == w.shape[0], w.shape[0] % groups == 0 else {
                throw ctx.error(.executionFailed, "input channels \(x.shape[1]) do not match weights \(w.shape)")
            }
            let spatial = x.rank - 2
            let inSp = Array(x.shape[2...]), kernel = Array(w.shape[2...])
            let strides = attrs.strides ?? Array(repeating: 1, count: spatial)
            let dil = attrs.dilations ?? Array(repeating: 1, count: spatial)
            let outPad = outputPadding ?? Array(repeating: 0, count: spatial)
            var pads = attrs.pads ?? Array(repeating: 0, count: 2 * spatial)
            guard strides.count == spatial, dil.count == spatial, outPad.count == spatial, pads.count == 2 * spatial else {
                throw ctx.error(.invalidModel, "strides/dilations/output_padding/pads do not match \(spatial) spatial axes")
            }
            var outSp = [Int](repeating: 0, count: spatial)
            for i in 0..<spatial {
                let full = strides[i] * (inSp[i] - 1) + outPad[i] + (kernel[i] - 1) * dil[i] + 1
                var target: Int?
                if let os = outputShape { target = os.count == spatial ? os[i] : os[os.count - spatial + i] }
                else if attrs.autoPad == "SAME_UPPER" || attrs.autoPad == "SAME_LOWER" { target = inSp[i] * strides[i] }
                if let t = target {
                    // The total may be negative (the output then extends past the scattered input); halves round down.
                    let total = full - t
                    let half = Int((Double(total) / 2).rounded(.down))
                    if attrs.autoPad == "SAME_UPPER" { pads[i] = half; pads[i + spatial] = total - half }
                    else { pads[i] = total - half; pads[i + spatial] = half }
                    outSp[i] = t
                } else {
                    if attrs.autoPad == "VALID" { pads[i] = 0; pads[i + spatial] = 0 }
                    outSp[i] = full - pads[i] - pads[i + spatial]
                }
                guard outSp[i] > 0 else { throw ctx.error(.executionFailed, "output size \(outSp[i]) on axis \(i) is not positive") }
            }
            if spatial == 3 {
                var out = transposedConvolutionND(x, w, inputs[2], strides: strides, dilations: dil, padBegin: Array(pads[..<3]), outSpatial: outSp, groups: groups)
                if ctx.activation != .none {
                    out.withUnsafeMutableBufferPointer(of: Float.self) { p in applyActivationParallel(ctx.activation, p.baseAddress!, count: p.count) }
                }
                return [out]
            }
            let m = w.shape[1] * groups
            let bias = inputs[2]
            if let b = bias, b.dtype != .float32 || b.count != m { throw ctx.error(.executionFailed, "bias \(b.shape) does not match \(m) output channels") }
            let twoD = spatial == 2
            let g = ConvTransposeGeometry(batch: x.shape[0], inChannels: x.shape[1], inHeight: twoD ? inSp[0] : 1, inWidth: inSp.last!, outChannels: m,
                                          window: SlidingWindow(kernel: kernel, strides: strides, dilations: dil, padBegin: Array(pads[..<spatial]),
                                                                padEnd: Array(pads[spatial...])),
                                          outputPaddingHeight: twoD ? outPad[0] : 0, outputPaddingWidth: outPad.last!, groups: groups)
            let packed = w.withUnsafeBufferPointer(of: Float.self) { wp in
                guard let bias else {
                    return PackedConvolutionTranspose(weights: wp, bias: nil, inChannels: g.inChannels, outChannels: m, kernelHeight: g.kernelHeight,
                                                      kernelWidth: g.kernelWidth, groups: groups, activation: ctx.activation)
                }
                return bias.withUnsafeBufferPointer(of: Float.self) { bp in
                    PackedConvolutionTranspose(weights: wp, bias: bp, inChannels: g.inChannels, outChannels: m, kernelHeight: g.kernelHeight,
                                               kernelWidth: g.kernelWidth, groups: groups, activation: ctx.activation)
                }
            }
            let workspace = allocateFloats(packed.workspaceCount(for: g))
            defer { workspace.deallocate() }
            let out = Tensor.makeFloat(shape: [x.shape[0], m] + outSp) { o in
                x.floatPointer { packed.run(g, input: $0, output: o, workspace: workspace) }
            }
            return [out]
        }
    },
]

/// Direct N-D convolution (NC + spatial), the path for 3-D models; bias optional, activation applied last.
func convolutionND(_ x: Tensor, _ w: Tensor, _ bias: Tensor?, strides: [Int], dilations: [Int], padBegin: [Int], outSpatial: [Int],
                   groups: Int, activation: Activation) -> Tensor {
    let (n, c, m) = (x.shape[0], x.shape[1], w.shape[0])
    let spatial = Array(x.shape[2...]), kernel = Array(w.shape[2...])
    let cg = c / groups, mg = m / groups
    let inPlane = spatial.reduce(1, *), outPlane = outSpatial.reduce(1, *), window = kernel.reduce(1, *)
    let taps = WindowTaps(from: outSpatial, to: spatial, kernel: kernel, strides: strides, dilations: dilations, padBegin: padBegin)
    let b = bias?.scalars(as: Float.self)
    return Tensor.makeFloat(shape: [n, m] + outSpatial) { dst in
        x.floatPointer { xp in w.floatPointer { wp in
            for batch in 0..<n {
                for oc in 0..<m {
                    let group = oc / mg
                    for o in 0..<outPlane {
                        var sum = b?[oc] ?? 0
                        for k in 0..<window {
                            guard let offset = taps.offset(o, tap: k) else { continue }
                            for ic in 0..<cg {
                                sum += xp[(batch * c + group * cg + ic) * inPlane + offset] * wp[(oc * cg + ic) * window + k]
                            }
                        }
                        dst[(batch * m + oc) * outPlane + o] = activation(sum)
                    }
                }
            }
        } }
    }
}

/// Direct N-D transposed convolution by scattering each input element through the kernel.
func transposedConvolutionND(_ x: Tensor, _ w: Tensor, _ bias: Tensor?, strides: [Int], dilations: [Int], padBegin: [Int],
                             outSpatial: [Int], groups: Int) -> Tensor {
    let (n, c) = (x.shape[0], x.shape[1])
    let mg = w.shape[1], m = mg * groups, cg = c / groups
    let spatial = Array(x.shape[2...]), kernel = Array(w.shape[2...])
    let inPlane = spatial.reduce(1, *), outPlane = outSpatial.reduce(1, *), window = kernel.reduce(1, *)
    let taps = WindowTaps(from: spatial, to: outSpatial, kernel: kernel, strides: strides, dilations: dilations, padBegin: padBegin)
    let b = bias?.scalars(as: Float.self)
    return Tensor.makeFloat(shape: [n, m] + outSpatial) { dst in
        for batch in 0..<n { for oc in 0..<m { for o in 0..<outPlane { dst[(batch * m + oc) * outPlane + o] = b?[oc] ?? 0 } } }
        x.floatPointer { xp in w.floatPointer { wp in
            for batch in 0..<n {
                for ic in 0..<c {
                    let group = ic / cg
                    for i in 0..<inPlane {
                        let v = xp[(batch * c + ic) * inPlane + i]
                        for k in 0..<window {
                            guard let offset = taps.offset(i, tap: k) else { continue }
                            for mm in 0..<mg {
                                dst[(batch * m + group * mg + mm) * outPlane + offset] += v * wp[(ic * mg + mm) * window + k]
                            }
                        }
                    }
                }
            }
        } }
    }
}
