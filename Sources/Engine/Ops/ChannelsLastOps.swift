import ONNX
import Tensor

/// Internal ops of channels-last regions (`ChannelsLastRegions.swift`), in the fused domain. Their tensors are
/// real NHWC values: [N, H, W, C].
let channelsLastPointwiseOp = "ChannelsLastPointwiseConv"
/// Attribute of a `channelsLastPointwiseOp` whose input and output are NCHW (squeeze-and-excitation convs on pooled values).
let channelsFirstPointwiseAttribute = "channels_first"
/// Depthwise Conv on NHWC input and output (inputs as Conv's: X, W, B, then the fused residual).
let channelsLastDepthwiseOp = "ChannelsLastDepthwiseConv"
/// Input of a `channelsLastDepthwiseOp`'s fused LayerNormalization scale (its bias is the next one), with the
/// epsilon in `channelNormEpsilonAttribute` (`ChannelsLastNormFusion.swift`).
let channelNormScaleInput = 5
/// Attribute of a `channelsLastDepthwiseOp` whose output is normalized over its channels: the epsilon.
let channelNormEpsilonAttribute = "norm_epsilon"
/// NCHW -> NHWC at a region's entry.
let toChannelsLastOp = "ToChannelsLast"
/// NHWC -> NCHW at a region's exit.
let toChannelsFirstOp = "ToChannelsFirst"
/// GlobalAveragePool of an NHWC value, giving the ordinary NCHW [N, C, 1, 1] result.
let channelsLastMeanOp = "ChannelsLastGlobalAveragePool"
/// A depthwise conv and the pointwise conv that alone reads it (`ChannelsLastSeparableFusion.swift`): inputs X, the
/// depthwise W and B, the pointwise skip, W and B; the depthwise attributes plus its epilogue code and bounds.
let channelsLastSeparableOp = "ChannelsLastSeparableConv"

/// An NHWC float32 input: its four dimensions, or an error saying what arrived.
func channelsLastInput(_ x: Tensor, channels: Int?, _ ctx: OpContext) throws -> (n: Int, h: Int, w: Int, c: Int) {
    guard x.dtype == .float32 else { throw ctx.error(.unsupportedDType, "input is \(x.dtype), expected float32") }
    guard x.rank == 4 else { throw ctx.error(.executionFailed, "input \(x.shape) is not N x H x W x C") }
    if let channels, x.shape[3] != channels {
        throw ctx.error(.executionFailed, "input has \(x.shape[3]) channels, the weights expect \(channels)")
    }
    return (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
}

/// The constant float32 bias (input 2) of `count` channels, nil when the node has none.
func constantBias(_ ctx: OpContext, count: Int, input: Int = 2) throws -> [Float]? {
    guard ctx.hasInput(input) else { return nil }
    guard let b = ctx.constants[input], b.dtype == .float32, b.count == count else {
        throw ctx.error(.invalidModel, "bias must be a constant float32 tensor of \(count) values")
    }
    return b.scalars(as: Float.self)
}

/// The depthwise conv's geometry on NHWC input `x`: pads, strides and output size from the attributes (dilation 1).
func depthwiseGeometry(_ x: Tensor, _ attrs: WindowAttributes, channels: Int, kernel: (h: Int, w: Int), inputChannels: Int? = nil,
                       _ ctx: OpContext) throws -> ChannelsLastDepthwiseGeometry {
    // An expanding block's input has its own channel count; the geometry's channels are the depthwise conv's.
    let (n, h, wd, _) = try channelsLastInput(x, channels: inputChannels ?? channels, ctx)
    let (kh, kw) = kernel
    let r = try attrs.resolve(spatial: 2, inputSpatial: [h, wd], kernel: [kh, kw], ctx)
    guard r.dilations == [1, 1] else { throw ctx.error(.unsupportedAttribute, "dilations \(r.dilations) (only 1)") }
    guard h + r.padBegin[0] + r.padEnd[0] >= kh, wd + r.padBegin[1] + r.padEnd[1] >= kw else {
        throw ctx.error(.executionFailed, "input \(x.shape) is too small for kernel \([kh, kw])")
    }
    return ChannelsLastDepthwiseGeometry(batch: n, inHeight: h, inWidth: wd, channels: channels, kernelHeight: kh, kernelWidth: kw,
                                         strideHeight: r.strides[0], strideWidth: r.strides[1], padTop: r.padBegin[0],
                                         padLeft: r.padBegin[1], outHeight: (h + r.padBegin[0] + r.padEnd[0] - kh) / r.strides[0] + 1,
                                         outWidth: (wd + r.padBegin[1] + r.padEnd[1] - kw) / r.strides[1] + 1)
}

/// The LayerNormalization fused into a depthwise step (constant float32 scale and bias of `channels` values at
/// `channelNormScaleInput` and the next input), or nil when the node has none.
func channelNorm(_ ctx: OpContext, channels: Int) throws -> ChannelNorm? {
    guard ctx.node.attributes[channelNormEpsilonAttribute] != nil else { return nil }
    guard let scale = try constantBias(ctx, count: channels, input: channelNormScaleInput),
          let shift = try constantBias(ctx, count: channels, input: channelNormScaleInput + 1) else {
        throw ctx.error(.invalidModel, "a fused channel norm needs constant scale and bias of \(channels) values")
    }
    return ChannelNorm(gamma: scale, beta: shift, epsilon: try ctx.float(channelNormEpsilonAttribute, 1e-5))
}

/// The fused residual (input 3) when it has the output's shape (added in the epilogue), or the one to add after it.
func residualOperand(_ inputs: KernelInputs, outShape: [Int], _ ctx: OpContext) throws -> (inKernel: Tensor?, late: Tensor?) {
    guard let r = inputs[fusedResidualInput] else { return (nil, nil) }
    guard r.dtype == .float32 else { throw ctx.error(.unsupportedDType, "Add operand is \(r.dtype), expected float32") }
    if r.shape == outShape { return (r, nil) }
    guard broadcastShape(outShape, r.shape) != nil else {
        throw ctx.error(.executionFailed, "cannot broadcast shapes \(outShape) and \(r.shape) in the fused Add")
    }
    return (nil, r)
}

/// `y + late` then the activation, when the residual had to broadcast.
func addLate(_ y: Tensor, _ late: Tensor?, _ activation: Activation, _ ctx: OpContext) throws -> Tensor {
    guard let late else { return y }
    var sum = try broadcastBinary(y, late, ctx) { (a: Float, b: Float) -> Float in a + b }
    sum.withUnsafeMutableBufferPointer(of: Float.self) { p in if let base = p.baseAddress { activation.apply(base, count: p.count) } }
    return sum
}

/// Pointwise weights W [M][C] (x 1 x 1) as the product's B [C][M], packed once.
func packedPointwiseWeights(_ w: Tensor) -> PackedMatrixB {
    let m = w.shape[0], c = w.shape[1]
    let wT = w.withUnsafeBufferPointer(of: Float.self) { wp in
        var t = [Float](repeating: 0, count: m * c)
        for o in 0..<m { for k in 0..<c { t[k * m + o] = wp[o * c + k] } }
        return t
    }
    return wT.withUnsafeBufferPointer { PackedMatrixB($0.baseAddress!, depth: c, columns: m) }
}

/// Channel means [N][C] as the NCHW [N, C, 1, 1] tensor GlobalAveragePool gives.
func meansTensor(_ means: [Float], batch: Int, channels: Int) -> Tensor {
    Tensor.makeFloat(shape: [batch, channels, 1, 1]) { d in means.withUnsafeBufferPointer { if let m = $0.baseAddress { d.update(from: m, count: $0.count) } } }
}

/// Runs `body` with the optional tensor's float pointer (nil when absent).
func withOptionalFloats<R>(_ t: Tensor?, _ body: (UnsafePointer<Float>?) throws -> R) rethrows -> R {
    guard let t else { return try body(nil) }
    return try t.floatPointer { try body($0) }
}

/// Runs `body` with the optional array's base pointer (nil when absent).
func withOptionalArray<R>(_ values: [Float]?, _ body: (UnsafePointer<Float>?) -> R) -> R {
    guard let values else { return body(nil) }
    return values.withUnsafeBufferPointer { body($0.baseAddress) }
}

let channelsLastOperators: OperatorTable = [
    channelsLastPointwiseOp: { ctx in
        guard let w = ctx.constants[1], w.dtype == .float32, w.rank == 4, w.shape[2] == 1, w.shape[3] == 1 else {
            throw ctx.error(.invalidModel, "weights must be constant float32 M x C x 1 x 1")
        }
        let m = w.shape[0], c = w.shape[1]
        let bias = try constantBias(ctx, count: m)
        let packed = packedPointwiseWeights(w)
        let activation = ctx.activation, fusesResidual = ctx.hasInput(fusedResidualInput)
        let fusesScale = ctx.hasInput(fusedChannelScaleInput)
        // An NCHW input (a pooled squeeze-and-excitation branch, [N, C, 1, 1]): one pixel is the same bytes in NHWC.
        let channelsFirst = try ctx.int(channelsFirstPointwiseAttribute, 0) != 0
        return PreparedKernel(kernel: { inputs in
            var x = try inputs.required(0, ctx)
            var nchwShape: [Int]?
            if channelsFirst {
                guard x.dtype == .float32, x.rank == 4 else { throw ctx.error(.executionFailed, "input \(x.dtype) \(x.shape) is not float32 N x C x H x W") }
                let (n, xc, h, wd) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
                nchwShape = [n, m, h, wd]
                if h * wd == 1 {
                    x = x.reshaped([n, 1, 1, xc])
                } else {
                    let source = x
                    x = Tensor.makeFloat(shape: [n, h, wd, xc]) { d in
                        source.floatPointer { convertLayout($0, d, batch: n, channels: xc, pixels: h * wd, toChannelsLast: true) }
                    }
                }
            }
            var other = fusesScale ? try inputs.required(fusedChannelScaleInput, ctx) : nil
            // The Mul's operands the other way round (a scale branch the planner did not recognise as pooled): input 0
            // is the [N, 1, 1, C] scale and input 4 the NCHW activations.
            if let big = other, big.dtype == .float32, big.rank == 4, x.rank == 4, x.shape[1] * x.shape[2] == 1,
               big.shape[0] == x.shape[0], big.shape[1] == x.shape[3], big.shape[2] * big.shape[3] > 1 {
                let (bn, bc, bh, bw) = (big.shape[0], big.shape[1], big.shape[2], big.shape[3])
                other = x.reshaped([bn, bc, 1, 1])
                x = Tensor.makeFloat(shape: [bn, bh, bw, bc]) { d in
                    big.floatPointer { convertLayout($0, d, batch: bn, channels: bc, pixels: bh * bw, toChannelsLast: true) }
                }
            }
            let (n, h, wd, _) = try channelsLastInput(x, channels: c, ctx)
            let outShape = [n, h, wd, m]
            // A folded squeeze-and-excitation Mul: [N, C, 1, 1] scales channels; an NCHW operand of x's size multiplies first.
            var scale: Tensor?
            if let other {
                guard other.dtype == .float32 else { throw ctx.error(.unsupportedDType, "Mul operand is \(other.dtype), expected float32") }
                if other.shape == [n, c, 1, 1] {
                    scale = other
                } else if other.shape == [n, c, h, wd] {
                    let last = Tensor.makeFloat(shape: x.shape) { d in
                        other.floatPointer { convertLayout($0, d, batch: n, channels: c, pixels: h * wd, toChannelsLast: true) }
                    }
                    x = try broadcastBinary(x, last, ctx) { (a: Float, b: Float) -> Float in a * b }
                } else {
                    throw ctx.error(.executionFailed, "Mul operand \(other.shape) is neither a channel scale nor the size of \([n, c, h, wd])")
                }
            }
            let (skip, late) = fusesResidual ? try residualOperand(inputs, outShape: outShape, ctx) : (nil, nil)
            let input = x
            let y = Tensor.makeFloat(shape: outShape) { o in
                input.floatPointer { xp in
                    withOptionalFloats(skip) { rp in
                        withOptionalFloats(scale) { sp in
                            let run = { (bp: UnsafePointer<Float>?) in
                                channelsLastPointwise(xp, batch: n, pixels: h * wd, packed, bias: bp, residual: rp, scale: sp,
                                                      activation: late == nil ? activation : .none, output: o)
                            }
                            if let bias { bias.withUnsafeBufferPointer { run($0.baseAddress) } } else { run(nil) }
                        }
                    }
                }
            }
            let result = try addLate(y, late, activation, ctx)
            guard let nchwShape else { return [result] }
            if h * wd == 1 { return [result.reshaped(nchwShape)] }
            return [Tensor.makeFloat(shape: nchwShape) { d in
                result.floatPointer { convertLayout($0, d, batch: n, channels: m, pixels: h * wd, toChannelsLast: false) }
            }]
        }, consumedInputs: ctx.hasInput(2) ? [1, 2] : [1])
    },
    channelsLastDepthwiseOp: { ctx in
        let attrs = try WindowAttributes(ctx)
        guard let w = ctx.constants[1], w.dtype == .float32, w.rank == 4, w.shape[1] == 1 else {
            throw ctx.error(.invalidModel, "weights must be constant float32 C x 1 x kH x kW")
        }
        let channels = w.shape[0], kh = w.shape[2], kw = w.shape[3]
        guard try ctx.int("group", 1) == channels else { throw ctx.error(.invalidModel, "group must equal the \(channels) channels") }
        let bias = try constantBias(ctx, count: channels)
        let weights = w.withUnsafeBufferPointer(of: Float.self) { channelsLastDepthwiseWeights($0.baseAddress!, channels: channels, taps: kh * kw) }
        let activation = ctx.activation, fusesResidual = ctx.hasInput(fusedResidualInput)
        // A second output: the squeeze-and-excitation pool of the output (`ChannelsLastSqueezeFusion.swift`).
        let pools = ctx.node.outputs.count > 1
        let norm = try channelNorm(ctx, channels: channels)
        if norm != nil && (pools || fusesResidual) { throw ctx.error(.invalidModel, "a fused channel norm takes no residual and no pool") }
        return PreparedKernel(kernel: { inputs in
            let x = try inputs.required(0, ctx)
            let g = try depthwiseGeometry(x, attrs, channels: channels, kernel: (kh, kw), ctx)
            let outShape = [g.batch, g.outHeight, g.outWidth, channels]
            let (skip, late) = fusesResidual ? try residualOperand(inputs, outShape: outShape, ctx) : (nil, nil)
            // A residual that broadcasts is added after the kernel: the means are then taken of the final tensor.
            let poolsInKernel = pools && late == nil
            var means = pools ? [Float](repeating: 0, count: g.batch * channels) : []
            let y = Tensor.makeFloat(shape: outShape) { o in
                x.floatPointer { xp in
                    withOptionalFloats(skip) { rp in
                        weights.withUnsafeBufferPointer { wp in
                            withOptionalArray(bias) { bp in
                                guard poolsInKernel else {
                                    channelsLastDepthwise(g, input: xp, weights: wp.baseAddress!, bias: bp, residual: rp,
                                                          activation: late == nil ? activation : .none, output: o, norm: norm)
                                    return
                                }
                                means.withUnsafeMutableBufferPointer { mp in
                                    guard let m = mp.baseAddress else { return }
                                    channelsLastDepthwiseWithMeans(g, input: xp, weights: wp.baseAddress!, bias: bp, residual: rp,
                                                                   activation: activation, output: o, means: m)
                                }
                            }
                        }
                    }
                }
            }
            let result = try addLate(y, late, activation, ctx)
            guard pools else { return [result] }
            if !poolsInKernel {
                result.floatPointer { p in
                    means.withUnsafeMutableBufferPointer { mp in
                        guard let m = mp.baseAddress else { return }
                        channelsLastChannelMeans(p, batch: g.batch, pixels: g.outHeight * g.outWidth, channels: channels, out: m)
                    }
                }
            }
            return [result, meansTensor(means, batch: g.batch, channels: channels)]
        }, consumedInputs: Set([1, 2, channelNormScaleInput, channelNormScaleInput + 1].filter { ctx.hasInput($0) }))
    },
    channelsLastSeparableOp: { ctx in
        let attrs = try WindowAttributes(ctx)
        guard let w = ctx.constants[1], w.dtype == .float32, w.rank == 4, w.shape[1] == 1,
              let pw = ctx.constants[separablePointwiseWeightsInput], pw.dtype == .float32, pw.rank == 4, pw.shape[1] == w.shape[0],
              pw.shape[2] == 1, pw.shape[3] == 1 else {
            throw ctx.error(.invalidModel, "weights must be constant float32 C x 1 x kH x kW and M x C x 1 x 1")
        }
        let channels = w.shape[0], kh = w.shape[2], kw = w.shape[3], m = pw.shape[0]
        let dwBias = try constantBias(ctx, count: channels)
        let pwBias = try constantBias(ctx, count: m, input: 5)
        let dwEpilogue = try fusedEpilogue(ctx, "depthwise")
        let weights = w.withUnsafeBufferPointer(of: Float.self) { channelsLastDepthwiseWeights($0.baseAddress!, channels: channels, taps: kh * kw) }
        let packed = packedPointwiseWeights(pw)
        let activation = ctx.activation, fusesResidual = ctx.hasInput(fusedResidualInput)
        return PreparedKernel(kernel: { inputs in
            let x = try inputs.required(0, ctx)
            let g = try depthwiseGeometry(x, attrs, channels: channels, kernel: (kh, kw), ctx)
            let outShape = [g.batch, g.outHeight, g.outWidth, m]
            let (skip, late) = fusesResidual ? try residualOperand(inputs, outShape: outShape, ctx) : (nil, nil)
            let y = Tensor.makeFloat(shape: outShape) { o in
                x.floatPointer { xp in
                    withOptionalFloats(skip) { rp in
                        weights.withUnsafeBufferPointer { wp in
                            withOptionalArray(dwBias) { db in
                                withOptionalArray(pwBias) { pb in
                                    channelsLastSeparable(g, input: xp, depthwiseWeights: wp.baseAddress!, depthwiseBias: db,
                                                          depthwiseEpilogue: dwEpilogue, pointwise: packed, pointwiseBias: pb,
                                                          residual: rp, activation: late == nil ? activation : .none, output: o)
                                }
                            }
                        }
                    }
                }
            }
            return [try addLate(y, late, activation, ctx)]
        }, consumedInputs: Set([1, 2, separablePointwiseWeightsInput, 5].filter { ctx.hasInput($0) }))
    },
    toChannelsLastOp: { ctx in PreparedKernel { inputs in
        let x = try inputs.required(0, ctx)
        guard x.dtype == .float32, x.rank == 4 else { throw ctx.error(.executionFailed, "input \(x.dtype) \(x.shape) is not float32 N x C x H x W") }
        let (n, c, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
        return [Tensor.makeFloat(shape: [n, h, w, c]) { d in
            x.floatPointer { convertLayout($0, d, batch: n, channels: c, pixels: h * w, toChannelsLast: true) }
        }]
    } },
    toChannelsFirstOp: { ctx in PreparedKernel { inputs in
        let x = try inputs.required(0, ctx)
        let (n, h, w, c) = try channelsLastInput(x, channels: nil, ctx)
        return [Tensor.makeFloat(shape: [n, c, h, w], placement: inputs.placement) { d in
            x.floatPointer { convertLayout($0, d, batch: n, channels: c, pixels: h * w, toChannelsLast: false) }
        }]
    } },
    channelsLastMeanOp: { ctx in PreparedKernel { inputs in
        let x = try inputs.required(0, ctx)
        let (n, h, w, c) = try channelsLastInput(x, channels: nil, ctx)
        guard h * w > 0 else { throw ctx.error(.executionFailed, "input \(x.shape) has no pixels") }
        return [Tensor.makeFloat(shape: [n, c, 1, 1]) { d in
            x.floatPointer { channelsLastChannelMeans($0, batch: n, pixels: h * w, channels: c, out: d) }
        }]
    } },
]

/// Stores a fused step's epilogue as `<prefix>_epilogue` (the kernel's code) and `<prefix>_bounds` (low, high).
func setFusedEpilogue(_ epilogue: DepthwisePlaneEpilogue, _ prefix: String, in attributes: inout [String: Attribute]) {
    attributes[prefix + "_epilogue"] = .int(Int64(epilogue.code))
    attributes[prefix + "_bounds"] = .floats([epilogue.low, epilogue.high])
}

/// Reads what `setFusedEpilogue` stored (no attributes: no activation).
func fusedEpilogue(_ ctx: OpContext, _ prefix: String) throws -> (code: Int32, low: Float, high: Float) {
    let bounds = try ctx.floats(prefix + "_bounds") ?? [-.infinity, .infinity]
    guard bounds.count == 2 else { throw ctx.error(.invalidModel, "\(prefix)_bounds must be two floats") }
    return (Int32(try ctx.int(prefix + "_epilogue", 0)), bounds[0], bounds[1])
}
