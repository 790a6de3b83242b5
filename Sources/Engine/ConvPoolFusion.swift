import ONNX
import Tensor

/// Op type of a Conv (+ clamp activation) and the MaxPool that alone reads it: the Conv's inputs and attributes, the
/// pool's attributes prefixed `pool_`, the pool's output.
let convMaxPoolOp = "ConvMaxPool"

/// Prefix of the MaxPool attributes on a `ConvMaxPool` node.
private let poolPrefix = "pool_"

extension GraphOptimizer {
    /// Fuses a stem-like Conv (constant float32 2-D weights of at most `DirectConvWeights.maximumTaps` taps, one
    /// group, unit dilations, explicit pads, no residual and a clamp or no activation) with the MaxPool that alone
    /// reads it (2-D, explicit pads, unit dilations, no Indices output), so that `convMaxPoolBands` can pool each
    /// band of conv rows while it is in cache.
    mutating func fuseConvMaxPools() {
        rewriteEachNode { $0.fuseConvMaxPool(convAt: $1) }
    }

    /// One fusion at the Conv at `index`; true when the MaxPool removed stood before it.
    private mutating func fuseConvMaxPool(convAt index: Int) -> Bool {
        let conv = nodes[index].node
        guard conv.opType == "Conv", isDefaultDomain(conv.domain), !nodes[index].residual, nodes[index].activation == .none
                || nodes[index].activation.clampBounds != nil, (2...3).contains(conv.inputs.count), conv.outputs.count == 1,
              let w = constants[conv.inputs[1]], w.dtype == .float32, w.rank == 4,
              w.shape[1] * w.shape[2] * w.shape[3] <= DirectConvWeights.maximumTaps,
              conv.inputs.count == 2 || conv.inputs[2].isEmpty || constants[conv.inputs[2]] != nil,
              plainWindow(conv.attributes), intAttribute(conv.attributes["group"]) ?? 1 == 1,
              let user = soleReader(of: conv.outputs[0]), case let pool = nodes[user].node, pool.opType == "MaxPool",
              isDefaultDomain(pool.domain), pool.inputs == [conv.outputs[0]], pool.outputs.count == 1 || pool.outputs[1].isEmpty,
              !pool.outputs[0].isEmpty, plainWindow(pool.attributes),
              case .ints(let kernel)? = pool.attributes["kernel_shape"], kernel.count == 2 else { return false }
        var attributes = conv.attributes
        for (name, value) in pool.attributes { attributes[poolPrefix + name] = value }
        nodes[index].node = Node(name: conv.name, opType: convMaxPoolOp, domain: fusedDomain, inputs: conv.inputs,
                                 outputs: [pool.outputs[0]], attributes: attributes)
        nodes.remove(at: user)
        return user < index
    }
}

/// The integer of an INT attribute.
private func intAttribute(_ a: Attribute?) -> Int? {
    if case .int(let v)? = a { return Int(v) }
    return nil
}

/// Whether a window's attributes leave pads explicit (auto_pad absent or NOTSET) and dilations 1.
private func plainWindow(_ attributes: [String: Attribute]) -> Bool {
    if case .string(let pad)? = attributes["auto_pad"], !pad.isEmpty, String(decoding: pad, as: UTF8.self) != "NOTSET" { return false }
    if let d = attributes["dilations"] {
        guard case .ints(let values) = d, values.allSatisfy({ $0 == 1 }) else { return false }
    }
    return true
}

/// The kernel of `ConvMaxPool`: `convMaxPoolBands` when it fits the call, else the Conv's and the MaxPool's own
/// kernels one after the other (the twin, and the path of CPUs without AVX-512F).
let convMaxPoolKernel: @Sendable (OpContext) throws -> PreparedKernel = { ctx in
    var convAttributes: [String: Attribute] = [:], poolAttributes: [String: Attribute] = [:]
    for (name, value) in ctx.node.attributes {
        if name.hasPrefix(poolPrefix) { poolAttributes[String(name.dropFirst(poolPrefix.count))] = value } else { convAttributes[name] = value }
    }
    let convNode = Node(name: ctx.node.name, opType: "Conv", inputs: ctx.node.inputs, outputs: ctx.node.outputs, attributes: convAttributes)
    let poolNode = Node(name: ctx.node.name, opType: "MaxPool", inputs: ctx.node.outputs, outputs: ctx.node.outputs, attributes: poolAttributes)
    let convContext = OpContext(node: convNode, opset: ctx.opset, constants: ctx.constants, activation: ctx.activation)
    let poolContext = OpContext(node: poolNode, opset: ctx.opset, constants: [:], activation: .none)
    guard let convFactory = operatorTable["Conv"], let poolFactory = operatorTable["MaxPool"] else {
        throw ctx.error(.unsupportedOperator, "Conv and MaxPool kernels are missing")
    }
    let convKernel = try convFactory(convContext), poolKernel = try poolFactory(poolContext).kernel
    let convAttrs = try WindowAttributes(convContext), poolAttrs = try WindowAttributes(poolContext)
    let ceil = try poolContext.int("ceil_mode", 0) == 1
    guard let poolKernelShape = poolAttrs.kernelShape, poolKernelShape.count == 2 else {
        throw ctx.error(.invalidModel, "the fused MaxPool needs a 2-D kernel_shape")
    }
    // The direct weights: the Conv's constants were checked by the fusion; a clamp (or no) activation.
    var direct: DirectConvWeights?
    let bounds = ctx.activation.registerClampBounds
    if let w = ctx.constants[1], w.dtype == .float32, w.rank == 4, bounds != nil, try convContext.int("group", 1) == 1,
       w.shape[1] * w.shape[2] * w.shape[3] <= DirectConvWeights.maximumTaps {
        let b = ctx.constants[2]
        if b == nil || (b!.dtype == .float32 && b!.count == w.shape[0]) {
            direct = w.withUnsafeBufferPointer(of: Float.self) { wp in
                func make(_ bp: UnsafePointer<Float>?) -> DirectConvWeights {
                    DirectConvWeights(weights: wp.baseAddress!, bias: bp, outChannels: w.shape[0], inChannels: w.shape[1],
                                      kernelHeight: w.shape[2], kernelWidth: w.shape[3])
                }
                guard let b else { return make(nil) }
                return b.withUnsafeBufferPointer(of: Float.self) { make($0.baseAddress) }
            }
        }
    }
    let weights = direct
    return PreparedKernel(kernel: { inputs in
        let x = try inputs.required(0, ctx)
        if let weights, let bounds, x.dtype == .float32, x.rank == 4, x.shape[1] == weights.inChannels {
            let kernel = [weights.kernelHeight, weights.kernelWidth], spatial = [x.shape[2], x.shape[3]]
            let r = try convAttrs.resolve(spatial: 2, inputSpatial: spatial, kernel: kernel, ctx)
            let c = ConvGeometry(batch: x.shape[0], inChannels: x.shape[1], inHeight: spatial[0], inWidth: spatial[1],
                                 outChannels: weights.outChannels, window: SlidingWindow(kernel: kernel, strides: r.strides, dilations: r.dilations,
                                                                                          padBegin: r.padBegin, padEnd: r.padEnd))
            if c.outHeight > 0 && c.outWidth > 0 {
                let convSpatial = [c.outHeight, c.outWidth]
                let q = try poolAttrs.resolve(spatial: 2, inputSpatial: convSpatial, kernel: poolKernelShape, ctx)
                let pooled = pooledSpatial(poolAttrs, q, input: convSpatial, kernel: poolKernelShape, ceil: ceil)
                let p = PoolGeometry(planes: c.batch * c.outChannels, inHeight: c.outHeight, inWidth: c.outWidth, outHeight: pooled[0],
                                     outWidth: pooled[1], window: SlidingWindow(kernel: poolKernelShape, strides: q.strides, dilations: q.dilations,
                                                                                padBegin: q.padBegin, padEnd: q.padEnd))
                if pooled.allSatisfy({ $0 > 0 }) && convMaxPoolBandsFit(c, p) {
                    let out = Tensor.makeFloat(shape: [c.batch, c.outChannels] + pooled, placement: inputs.placement) { o in
                        x.floatPointer { convMaxPoolBands(c, p, weights: weights, low: bounds.low, high: bounds.high, input: $0, output: o) }
                    }
                    return [out]
                }
            }
        }
        var convolved = KernelInputs(values: try convKernel.kernel(&inputs))
        return try poolKernel(&convolved)
    }, consumedInputs: convKernel.consumedInputs)
}
