import Foundation
import Tensor

/// LpPool (opsets 1-18): the p-norm of each window, (sum |x|^p)^(1/p), padding counting as zero, over 1-3 spatial
/// axes with strides, pads or auto_pad, dilations and ceil_mode (opset 18).
let lpPoolOperators: OperatorTable = [
    "LpPool": { ctx in
        let attrs = try WindowAttributes(ctx)
        guard let kernel = attrs.kernelShape else { throw ctx.error(.invalidModel, "attribute 'kernel_shape' is required") }
        guard (1...3).contains(kernel.count) else { throw ctx.unsupported("kernel_shape", "\(kernel) (1-D, 2-D and 3-D pooling only)") }
        let ceil = try ctx.int("ceil_mode", 0) == 1
        let p = try ctx.float("p", 2)
        guard p > 0 else { throw ctx.error(.invalidModel, "p must be positive, got \(p)") }
        return PreparedKernel { inputs in
            var x = try inputs.required(0, ctx)
            let original = x.dtype
            if original != .float32 { x = try castTensor(x, to: .float32, ctx) }
            guard x.rank == kernel.count + 2 else { throw ctx.error(.executionFailed, "input \(x.shape) does not match kernel_shape \(kernel)") }
            let spatial = Array(x.shape[2...])
            let r = try attrs.resolve(spatial: kernel.count, inputSpatial: spatial, kernel: kernel, ctx)
            let outSpatial = pooledSpatial(attrs, r, input: spatial, kernel: kernel, ceil: ceil)
            let planes = x.shape[0] * x.shape[1], inPlane = spatial.reduce(1, *), outPlane = outSpatial.reduce(1, *)
            let window = kernel.reduce(1, *)
            let taps = WindowTaps(from: outSpatial, to: spatial, kernel: kernel, strides: r.strides, dilations: r.dilations, padBegin: r.padBegin)
            let out = Tensor.makeFloat(shape: Array(x.shape[..<2]) + outSpatial) { dst in
                x.floatPointer { src in
                    for plane in 0..<planes {
                        for o in 0..<outPlane {
                            var sum: Double = 0
                            for k in 0..<window {
                                guard let offset = taps.offset(o, tap: k) else { continue }
                                let v = Double(Swift.abs(src[plane * inPlane + offset]))
                                sum += p == 2 ? v * v : (p == 1 ? v : Foundation.pow(v, Double(p)))
                            }
                            dst[plane * outPlane + o] = Float(p == 2 ? sum.squareRoot() : (p == 1 ? sum : Foundation.pow(sum, 1 / Double(p))))
                        }
                    }
                }
            }
            return [original == .float32 ? out : try castTensor(out, to: original, ctx)]
        }
    },
]
