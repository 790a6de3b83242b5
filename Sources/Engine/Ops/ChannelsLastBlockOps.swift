import Tensor
import CKernelShim

/// An expand 1x1 conv fused into the separable conv that alone reads it (`ChannelsLastBlockFusion.swift`): the
/// separable op's inputs (X, depthwise W and B, skip, project W and B), then the expand W and B at
/// `invertedResidualExpandInput` and after it; X is the expand's input. Attributes: the separable op's plus the
/// expand's epilogue code and bounds. Without project inputs (4 and 5) it is an expand + depthwise block whose
/// activation is the depthwise conv's (squeeze-and-excitation blocks: the scale needs the whole depthwise output).
let channelsLastInvertedResidualOp = "ChannelsLastInvertedResidual"
/// Input index of the expand weights in a fused inverted-residual node (its bias follows).
let invertedResidualExpandInput = 6

/// A small dense Conv (a stem: one group, dilation 1) reading NCHW input and writing NHWC output at a region's entry
/// (inputs and attributes as Conv's).
let channelsLastPatchConvOp = "ChannelsLastPatchConv"

/// Operators of fused channels-last blocks and region-entry convs, in the fused domain.
let channelsLastBlockOperators: OperatorTable = [
    channelsLastPatchConvOp: { ctx in
        let attrs = try WindowAttributes(ctx)
        guard let w = ctx.constants[1], w.dtype == .float32, w.rank == 4 else { throw ctx.error(.invalidModel, "weights must be constant float32 M x C x kH x kW") }
        guard try ctx.int("group", 1) == 1 else { throw ctx.error(.invalidModel, "group must be 1") }
        let (m, c, kh, kw) = (w.shape[0], w.shape[1], w.shape[2], w.shape[3])
        let bias = try constantBias(ctx, count: m)
        let packed = packedPointwiseWeights(w.reshaped([m, c * kh * kw, 1, 1]))
        // The direct kernel's copy (stems have small weights: 3 x 3 x 3 x 32 floats).
        let direct: DirectConvWeights? = c * kh * kw <= DirectConvWeights.maximumTaps
            ? w.withUnsafeBufferPointer(of: Float.self) { wp in
                withOptionalArray(bias) { bp in
                    DirectConvWeights(weights: wp.baseAddress!, bias: bp, outChannels: m, inChannels: c, kernelHeight: kh, kernelWidth: kw, block: 32)
                }
            }
            : nil
        let activation = ctx.activation
        return PreparedKernel(kernel: { inputs in
            let x = try inputs.required(0, ctx)
            guard x.dtype == .float32, x.rank == 4, x.shape[1] == c else {
                throw ctx.error(.executionFailed, "input \(x.dtype) \(x.shape) is not float32 N x \(c) x H x W")
            }
            let (n, h, wd) = (x.shape[0], x.shape[2], x.shape[3])
            let r = try attrs.resolve(spatial: 2, inputSpatial: [h, wd], kernel: [kh, kw], ctx)
            guard r.dilations == [1, 1] else { throw ctx.error(.unsupportedAttribute, "dilations \(r.dilations) (only 1)") }
            guard h + r.padBegin[0] + r.padEnd[0] >= kh, wd + r.padBegin[1] + r.padEnd[1] >= kw else {
                throw ctx.error(.executionFailed, "input \(x.shape) is too small for kernel \([kh, kw])")
            }
            let g = ChannelsLastDepthwiseGeometry(batch: n, inHeight: h, inWidth: wd, channels: c, kernelHeight: kh, kernelWidth: kw,
                                                  strideHeight: r.strides[0], strideWidth: r.strides[1], padTop: r.padBegin[0],
                                                  padLeft: r.padBegin[1], outHeight: (h + r.padBegin[0] + r.padEnd[0] - kh) / r.strides[0] + 1,
                                                  outWidth: (wd + r.padBegin[1] + r.padEnd[1] - kw) / r.strides[1] + 1)
            return [Tensor.makeFloat(shape: [n, g.outHeight, g.outWidth, m], placement: inputs.placement) { o in
                x.floatPointer { xp in
                    withOptionalArray(bias) { bp in
                        channelsLastPatchConv(g, input: xp, packed, bias: bp, activation: activation, output: o, direct: direct)
                    }
                }
            }]
        }, consumedInputs: ctx.hasInput(2) ? [1, 2] : [1])
    },
    channelsLastInvertedResidualOp: { ctx in
        let attrs = try WindowAttributes(ctx)
        let ex = invertedResidualExpandInput
        let projects = ctx.hasInput(separablePointwiseWeightsInput)
        let pw = projects ? ctx.constants[separablePointwiseWeightsInput] : nil
        guard let w = ctx.constants[1], w.dtype == .float32, w.rank == 4, w.shape[1] == 1,
              !projects || (pw.map { $0.dtype == .float32 && $0.rank == 4 && $0.shape[1] == w.shape[0] && $0.shape[2] == 1 && $0.shape[3] == 1 } ?? false),
              let xw = ctx.constants[ex], xw.dtype == .float32, xw.rank == 4, xw.shape[0] == w.shape[0], xw.shape[2] == 1, xw.shape[3] == 1 else {
            throw ctx.error(.invalidModel, "weights must be constant float32 E x C x 1 x 1, E x 1 x kH x kW and M x E x 1 x 1")
        }
        let channels = w.shape[0], kh = w.shape[2], kw = w.shape[3], m = pw?.shape[0] ?? channels, cin = xw.shape[1]
        let dwBias = try constantBias(ctx, count: channels)
        let pwBias = try constantBias(ctx, count: m, input: 5)
        let exBias = try constantBias(ctx, count: channels, input: ex + 1)
        let exEpilogue = try fusedEpilogue(ctx, "expand")
        // Without a project the node's own activation is the depthwise conv's, and the kernel's epilogue must have it.
        let ownEpilogue = DepthwisePlaneEpilogue(ctx.activation)
        guard projects || (ownEpilogue.complete && !ctx.hasInput(fusedResidualInput)) else {
            throw ctx.error(.invalidModel, "an expand + depthwise block takes no residual and only epilogue activations")
        }
        let dwEpilogue = projects ? try fusedEpilogue(ctx, "depthwise") : (ownEpilogue.code, ownEpilogue.low, ownEpilogue.high)
        let exActivation = try Activation(epilogueCode: exEpilogue.code, low: exEpilogue.low, high: exEpilogue.high, ctx)
        let weights = w.withUnsafeBufferPointer(of: Float.self) { channelsLastDepthwiseWeights($0.baseAddress!, channels: channels, taps: kh * kw) }
        let packed = pw.map(packedPointwiseWeights), expand = packedPointwiseWeights(xw)
        let activation = ctx.activation, fusesResidual = ctx.hasInput(fusedResidualInput)
        // A second output: the squeeze-and-excitation pool of a block without a project (`ChannelsLastSqueezeFusion.swift`).
        let pools = ctx.node.outputs.count > 1
        guard !pools || !projects else { throw ctx.error(.invalidModel, "only an expand + depthwise block gives channel means") }
        return PreparedKernel(kernel: { inputs in
            let x = try inputs.required(0, ctx)
            let g = try depthwiseGeometry(x, attrs, channels: channels, kernel: (kh, kw), inputChannels: cin, ctx)
            let outShape = [g.batch, g.outHeight, g.outWidth, m]
            let (skip, late) = fusesResidual ? try residualOperand(inputs, outShape: outShape, ctx) : (nil, nil)
            var means = pools ? [Float](repeating: 0, count: g.batch * channels) : []
            let y = Tensor.makeFloat(shape: outShape) { o in
                means.withUnsafeMutableBufferPointer { mp in
                    let meansPointer = pools ? mp.baseAddress : nil
                    x.floatPointer { xp in
                        withOptionalFloats(skip) { rp in
                            weights.withUnsafeBufferPointer { wp in
                                withOptionalArray(dwBias) { db in
                                    withOptionalArray(pwBias) { pb in
                                        withOptionalArray(exBias) { eb in
                                            channelsLastInvertedResidual(g, input: xp, expand: expand, expandBias: eb, expandActivation: exActivation,
                                                                         depthwiseWeights: wp.baseAddress!, depthwiseBias: db, depthwiseEpilogue: dwEpilogue,
                                                                         pointwise: packed, pointwiseBias: pb, residual: rp,
                                                                         activation: late == nil ? activation : .none, output: o, means: meansPointer)
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            let result = try addLate(y, late, activation, ctx)
            guard pools else { return [result] }
            return [result, meansTensor(means, batch: g.batch, channels: channels)]
        }, consumedInputs: Set([1, 2, separablePointwiseWeightsInput, 5, ex, ex + 1].filter { ctx.hasInput($0) }))
    },
]

extension Activation {
    /// The activation a depthwise-plane epilogue code and bounds stand for (the inverse of `DepthwisePlaneEpilogue`).
    init(epilogueCode code: Int32, low: Float, high: Float, _ ctx: OpContext) throws {
        switch code {
        case Int32(OSPREY_DW_SILU): self = .silu
        case Int32(OSPREY_DW_SIGMOID): self = .sigmoid
        case Int32(OSPREY_DW_HARDSWISH): self = .hardSwish
        case Int32(OSPREY_DW_CLAMP):
            if low == -.infinity && high == .infinity { self = .none } else if low == 0 && high == .infinity { self = .relu } else {
                self = .clip(min: low, max: high)
            }
        default: throw ctx.error(.invalidModel, "unknown epilogue code \(code)")
        }
    }
}
