import Tensor

/// CenterCropPad (opset 18): each listed axis cropped or zero-padded to its target length around the centre (the
/// smaller half of the difference before, the rest after), as the ONNX reference implementation does.
let centerCropPadOperators: OperatorTable = [
    "CenterCropPad": { ctx in
        let axesAttribute = try ctx.ints("axes")
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx), targets = try inputs.required(1, ctx).ints
            guard x.dtype != .string else { throw ctx.error(.unsupportedDType, "string input is not supported") }
            let axes = try (axesAttribute ?? Array(0..<x.rank)).map { try ctx.axis($0, rank: x.rank) }
            guard axes.count == targets.count, Set(axes).count == axes.count, targets.allSatisfy({ $0 >= 0 }) else {
                throw ctx.error(.executionFailed, "shape \(targets) does not give one non-negative length per axis of \(axes)")
            }
            var shape = x.shape
            // Per axis: where output index 0 reads in the input (negative: that many padded places first).
            var shift = [Int](repeating: 0, count: x.rank)
            for (axis, target) in zip(axes, targets) {
                let size = x.shape[axis]
                shift[axis] = target <= size ? (size - target) / 2 : -((target - size) / 2)
                shape[axis] = target
            }
            let width = x.dtype.byteSize
            var out = Tensor(dtype: x.dtype, shape: shape)  // zeros: the padding
            let count = shape.reduce(1, *)
            guard count > 0 else { return [out] }
            let inStrides = Tensor.contiguousStrides(x.shape)
            x.withUnsafeBytes { src in out.withUnsafeMutableBytes { dst in
                var index = [Int](repeating: 0, count: shape.count)
                for flat in 0..<count {
                    var from = 0, inside = true
                    for axis in 0..<shape.count {
                        let i = index[axis] + shift[axis]
                        if i < 0 || i >= x.shape[axis] { inside = false; break }
                        from += i * inStrides[axis]
                    }
                    if inside { (dst.baseAddress! + flat * width).copyMemory(from: src.baseAddress! + from * width, byteCount: width) }
                    advance(&index, in: shape)
                }
            } }
            return [out]
        }
    },
]
