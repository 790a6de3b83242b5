import Tensor

/// Reads axes given either as an attribute (older opsets) or as input `index` (newer opsets).
func axesParameter(_ ctx: OpContext, _ inputs: KernelInputs, attribute: [Int]?, inputIndex: Int, fromOpset: Int) -> [Int]? {
    if ctx.opset >= fromOpset { return inputs[inputIndex]?.ints }
    return attribute
}

/// Concatenates same-dtype tensors along `axis` (any fixed-size dtype).
func concatenate(_ parts: [Tensor], axis: Int, _ ctx: OpContext) throws -> Tensor {
    let first = parts[0]
    var shape = first.shape
    shape[axis] = 0
    for p in parts {
        guard p.dtype == first.dtype, p.rank == first.rank,
              (0..<p.rank).allSatisfy({ $0 == axis || p.shape[$0] == first.shape[$0] }) else {
            throw ctx.error(.executionFailed, "cannot concatenate \(p) with \(first) on axis \(axis)")
        }
        shape[axis] += p.shape[axis]
    }
    // From the pool: a fresh multi-megabyte buffer per run cost its page faults (detector FPN concat 1.9 ms).
    var out = first.dtype == .string ? Tensor(uninitialized: first.dtype, shape: shape) : Tensor.pooled(first.dtype, shape: shape)
    let outer = shape[..<axis].reduce(1, *)
    let inner = shape[(axis + 1)...].reduce(1, *) * first.dtype.byteSize
    let rowBytes = shape[axis] * inner
    out.withUnsafeMutableBytes { dst in
        var column = 0
        for p in parts {
            let chunk = p.shape[axis] * inner
            if chunk > 0 {
                p.withUnsafeBytes { src in
                    for o in 0..<outer {
                        (dst.baseAddress! + o * rowBytes + column).copyMemory(from: src.baseAddress! + o * chunk, byteCount: chunk)
                    }
                }
            }
            column += chunk
        }
    }
    return out
}

/// Computes the output shape of Reshape.
func reshapeTarget(_ input: [Int], _ requested: [Int], allowZero: Bool, _ ctx: OpContext) throws -> [Int] {
    var shape = requested
    var inferred: Int?
    for (i, d) in requested.enumerated() {
        if d == 0 && !allowZero {
            guard i < input.count else { throw ctx.error(.executionFailed, "shape \(requested) copies dim \(i) but input is \(input)") }
            shape[i] = input[i]
        } else if d == -1 {
            guard inferred == nil else { throw ctx.error(.executionFailed, "shape \(requested) has more than one -1") }
            inferred = i
        } else if d < -1 {
            throw ctx.error(.executionFailed, "shape \(requested) has a negative dimension")
        }
    }
    let total = Tensor.elementCount(input)
    if let i = inferred {
        let known = shape.enumerated().filter { $0.offset != i }.map(\.element).reduce(1, *)
        guard known > 0 && total % known == 0 else { throw ctx.error(.executionFailed, "cannot reshape \(input) to \(requested)") }
        shape[i] = total / known
    }
    guard Tensor.elementCount(shape) == total else {
        throw ctx.error(.executionFailed, "cannot reshape \(input) (\(total) elements) to \(requested)")
    }
    return shape
}

/// Start/end/step of one sliced axis after ONNX clamping; returns (start, count, step).
func sliceRange(start: Int, end: Int, step rawStep: Int, dim: Int) -> (Int, Int) {
    // A step longer than the axis takes at most one element; clamping keeps `e - s + step` and `-step` from overflowing.
    let step = min(max(rawStep, -(dim + 1)), dim + 1)
    var s = start < 0 ? start + dim : start
    var e = end < 0 ? end + dim : end
    if step > 0 {
        s = min(max(s, 0), dim)
        e = min(max(e, 0), dim)
        return (s, e > s ? (e - s + step - 1) / step : 0)
    }
    s = min(max(s, -1), dim - 1)
    e = min(max(e, -1), dim - 1)
    return (s, s > e ? (s - e + (-step) - 1) / (-step) : 0)
}

/// The fill value of Pad/ConstantOfShape encoded as `dtype` bytes.
func scalarBytes(_ value: Double, _ dtype: DType, _ ctx: OpContext) throws -> [UInt8] {
    let one = try castTensor(Tensor(scalar: value), to: dtype, ctx)
    return one.withUnsafeBytes { Array($0) }
}

let shapeOperators: OperatorTable = [
    "Identity": { _ in PreparedKernel { inputs in [inputs.take(0)!] } },
    "Dropout": { ctx in
        let wantsMask = ctx.node.outputs.count > 1 && !ctx.node.outputs[1].isEmpty
        return PreparedKernel { inputs in
            if let mode = inputs[2], mode.count > 0, mode.doubleValue(at: 0) != 0 {
                throw ctx.error(.unsupportedAttribute, "training_mode=true is not supported (inference only)")
            }
            let x = try inputs.required(0, ctx)
            guard wantsMask else { return [x] }
            // Before opset 10 the mask has the input's dtype; since then it is bool.
            var mask = Tensor(dtype: .bool, shape: x.shape)
            mask.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 1) }
            return [x, ctx.opset < 10 ? try castTensor(mask, to: x.dtype, ctx) : mask]
        }
    },
    "Constant": { ctx in
        let value: Tensor
        if let t = try ctx.tensor("value") { value = t }
        else if ctx.has("value_float") { value = Tensor(scalar: try ctx.float("value_float", 0)) }
        else if let f = try ctx.floats("value_floats") { value = Tensor(shape: [f.count], scalars: f) }
        else if ctx.has("value_int") { value = Tensor(scalar: Int64(try ctx.int("value_int", 0))) }
        else if let v = try ctx.ints("value_ints") { value = Tensor.int64(v) }
        else if case .string(let s)? = ctx.node.attributes["value_string"] { value = Tensor(shape: [], strings: [s]) }
        else if case .strings(let s)? = ctx.node.attributes["value_strings"] { value = Tensor(shape: [s.count], strings: s) }
        else if ctx.has("sparse_value") { throw ctx.unsupported("sparse_value", "") }
        else { throw ctx.error(.invalidModel, "Constant has no value attribute") }
        return PreparedKernel { _ in [value] }
    },
    "ConstantOfShape": { ctx in
        let fill = try ctx.tensor("value") ?? Tensor(scalar: Float(0))
        guard fill.dtype != .string, fill.count == 1 else { throw ctx.unsupported("value", "(must be one numeric element)") }
        let bytes = fill.withUnsafeBytes { Array($0) }
        return PreparedKernel { inputs in
            let shape = try ctx.checkedShape(try inputs.required(0, ctx).ints)
            var out = Tensor(uninitialized: fill.dtype, shape: shape)
            out.withUnsafeMutableBytes { (raw: UnsafeMutableRawBufferPointer) -> Void in
                let size = bytes.count
                for i in 0..<(raw.count / max(size, 1)) {
                    for b in 0..<size { raw[i * size + b] = bytes[b] }
                }
            }
            return [out]
        }
    },
    "Shape": { ctx in
        let start = try ctx.int("start", 0), end = ctx.has("end") ? try ctx.int("end", 0) : Int.max
        return PreparedKernel { inputs in [shapeTensor(try inputs.required(0, ctx).shape, start: start, end: end)] }
    },
    "Size": { ctx in PreparedKernel { inputs in [Tensor(scalar: Int64(try inputs.required(0, ctx).count))] } },
    "Reshape": { ctx in
        let allowZero = try ctx.int("allowzero", 0) == 1
        let attrShape = try ctx.ints("shape")
        return PreparedKernel { inputs in
            guard let x = inputs.take(0) else { throw ctx.error(.invalidModel, "missing data input") }
            guard let requested = inputs[1]?.ints ?? attrShape else { throw ctx.error(.invalidModel, "missing shape") }
            return [x.reshaped(try reshapeTarget(x.shape, requested, allowZero: allowZero, ctx))]
        }
    },
    "Flatten": { ctx in
        let axisAttr = try ctx.int("axis", 1)
        return PreparedKernel { inputs in
            guard let x = inputs.take(0) else { throw ctx.error(.invalidModel, "missing input") }
            let axis = axisAttr < 0 ? axisAttr + x.rank : axisAttr
            guard axis >= 0 && axis <= x.rank else { throw ctx.error(.executionFailed, "axis \(axisAttr) out of range for rank \(x.rank)") }
            let outer = x.shape[..<axis].reduce(1, *)
            return [x.reshaped([outer, x.shape[axis...].reduce(1, *)])]
        }
    },
    "Transpose": { ctx in
        let permAttr = try ctx.ints("perm")
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            let perm = permAttr ?? Array((0..<x.rank).reversed())
            guard perm.count == x.rank, Set(perm) == Set(0..<x.rank) else {
                throw ctx.error(.executionFailed, "perm \(perm) does not match rank \(x.rank)")
            }
            let strides = x.strides
            let shape = perm.map { x.shape[$0] }
            if x.dtype.byteSize == 4, x.count > 0, let m = transposeAsMatrices(shape: x.shape, perm: perm) {
                var out = Tensor.pooled(x.dtype, shape: shape)
                x.withUnsafeBytes { src in out.withUnsafeMutableBytes { dst in
                    blockedTranspose(src.baseAddress!.assumingMemoryBound(to: UInt32.self), dst.baseAddress!.assumingMemoryBound(to: UInt32.self),
                                     outer: m.outer, rows: m.rows, columns: m.columns)
                } }
                return [out]
            }
            if x.dtype.byteSize == 4, x.count > 0, let b = transposeAsBlockMatrices(shape: x.shape, perm: perm) {
                var out = Tensor.pooled(x.dtype, shape: shape)
                x.withUnsafeBytes { src in out.withUnsafeMutableBytes { dst in
                    blockPermute(src.baseAddress!, dst.baseAddress!, outer: b.outer, rows: b.rows, columns: b.columns, block: b.block)
                } }
                return [out]
            }
            return [stridedCopy(x, shape: shape, strides: perm.map { strides[$0] }, offset: 0)]
        }
    },
    "Concat": { ctx in
        let axisAttr = try ctx.int("axis", Int.min)
        guard axisAttr != Int.min else { throw ctx.error(.invalidModel, "attribute 'axis' is required") }
        return PreparedKernel { inputs in
            let parts = inputs.values.compactMap { $0 }
            guard let first = parts.first else { throw ctx.error(.invalidModel, "no inputs") }
            return [try concatenate(parts, axis: try ctx.axis(axisAttr, rank: first.rank), ctx)]
        }
    },
    "Split": { ctx in
        let axisAttr = try ctx.int("axis", 0)
        let splitAttr = try ctx.ints("split")
        let numOutputs = ctx.node.outputs.count
        let numOutputsAttr = try ctx.int("num_outputs", 0)
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            let axis = try ctx.axis(axisAttr, rank: x.rank)
            let dim = x.shape[axis]
            var sizes: [Int]
            if let s = (ctx.opset >= 13 ? inputs[1]?.ints : splitAttr) {
                sizes = s
            } else if numOutputsAttr > 0 {
                let chunk = (dim + numOutputsAttr - 1) / numOutputsAttr
                sizes = (0..<numOutputsAttr).map { min(chunk, max(0, dim - $0 * chunk)) }
            } else {
                guard dim % numOutputs == 0 else { throw ctx.error(.executionFailed, "dim \(dim) does not split evenly into \(numOutputs)") }
                sizes = Array(repeating: dim / numOutputs, count: numOutputs)
            }
            guard sizes.allSatisfy({ $0 >= 0 }), sizes.reduce(0, +) == dim, sizes.count == numOutputs else {
                throw ctx.error(.executionFailed, "split \(sizes) does not match dim \(dim) with \(numOutputs) outputs")
            }
            var outputs: [Tensor] = []
            var offset = 0
            let strides = x.strides
            for size in sizes {
                var shape = x.shape
                shape[axis] = size
                outputs.append(stridedCopy(x, shape: shape, strides: strides, offset: offset * strides[axis]))
                offset += size
            }
            return outputs
        }
    },
    "Slice": { ctx in
        let attrStarts = try ctx.ints("starts"), attrEnds = try ctx.ints("ends"), attrAxes = try ctx.ints("axes")
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            let starts: [Int], ends: [Int], axesIn: [Int]?, steps: [Int]?
            if ctx.opset >= 10 {
                starts = try inputs.required(1, ctx).ints
                ends = try inputs.required(2, ctx).ints
                axesIn = inputs[3]?.ints
                steps = inputs[4]?.ints
            } else {
                guard let s = attrStarts, let e = attrEnds else { throw ctx.error(.invalidModel, "starts/ends attributes are required") }
                starts = s; ends = e; axesIn = attrAxes; steps = nil
            }
            let axes = try (axesIn ?? Array(0..<starts.count)).map { try ctx.axis($0, rank: x.rank) }
            guard starts.count == ends.count, axes.count == starts.count, (steps?.count ?? starts.count) == starts.count else {
                throw ctx.error(.executionFailed, "starts/ends/axes/steps lengths differ")
            }
            var shape = x.shape
            let base = x.strides
            var strides = base
            var offset = 0
            for (k, axis) in axes.enumerated() {
                let step = steps?[k] ?? 1
                guard step != 0 else { throw ctx.error(.executionFailed, "step must not be 0") }
                let (start, count) = sliceRange(start: starts[k], end: ends[k], step: step, dim: x.shape[axis])
                shape[axis] = count
                strides[axis] = count > 1 ? base[axis] * step : base[axis]  // a step past the axis would overflow
                if count > 0 { offset += start * base[axis] }
            }
            if let view = contiguousView(x, shape: shape, strides: strides, offset: offset) { return [view] }
            if let window = inputs.placement, let placed = sliceIntoWindow(x, shape: shape, strides: strides, offset: offset, window: window) {
                return [placed]
            }
            return [stridedCopy(x, shape: shape, strides: strides, offset: offset)]
        }
    },
    "Squeeze": { ctx in
        let attrAxes = try ctx.ints("axes")
        return PreparedKernel { inputs in
            guard let x = inputs.take(0) else { throw ctx.error(.invalidModel, "missing input") }
            let given = axesParameter(ctx, inputs, attribute: attrAxes, inputIndex: 1, fromOpset: 13)
            let axes = try Set((given ?? x.shape.indices.filter { x.shape[$0] == 1 }).map { try ctx.axis($0, rank: x.rank) })
            for a in axes where x.shape[a] != 1 { throw ctx.error(.executionFailed, "cannot squeeze axis \(a) of size \(x.shape[a]) in \(x.shape)") }
            return [x.reshaped(x.shape.indices.filter { !axes.contains($0) }.map { x.shape[$0] })]
        }
    },
    "Unsqueeze": { ctx in
        let attrAxes = try ctx.ints("axes")
        return PreparedKernel { inputs in
            guard let x = inputs.take(0) else { throw ctx.error(.invalidModel, "missing input") }
            guard let given = axesParameter(ctx, inputs, attribute: attrAxes, inputIndex: 1, fromOpset: 13) else {
                throw ctx.error(.invalidModel, "axes are required")
            }
            let rank = x.rank + given.count
            let axes = try Set(given.map { try ctx.axis($0, rank: rank) })
            guard axes.count == given.count else { throw ctx.error(.executionFailed, "repeated axes \(given)") }
            var shape: [Int] = []
            var source = x.shape.makeIterator()
            for i in 0..<rank { shape.append(axes.contains(i) ? 1 : source.next()!) }
            return [x.reshaped(shape)]
        }
    },
    "Expand": { ctx in PreparedKernel { inputs in
        let x = try inputs.required(0, ctx)
        let requested = try inputs.required(1, ctx).ints
        guard let broadcast = broadcastShape(x.shape, requested) else {
            throw ctx.error(.executionFailed, "cannot expand \(x.shape) to \(requested)")
        }
        let shape = try ctx.checkedShape(broadcast)
        if shape == x.shape { return [x] }
        return [stridedCopy(x, shape: shape, strides: broadcastStrides(x.shape, to: shape), offset: 0)]
    } },
    "Tile": { ctx in PreparedKernel { inputs in
        let x = try inputs.required(0, ctx)
        let repeats = try inputs.required(1, ctx).ints
        guard repeats.count == x.rank, repeats.allSatisfy({ $0 >= 0 }) else {
            throw ctx.error(.executionFailed, "repeats \(repeats) do not match rank \(x.rank)")
        }
        let strides = x.strides
        var viewShape: [Int] = [], viewStrides: [Int] = []
        for i in 0..<x.rank {
            viewShape += [repeats[i], x.shape[i]]
            viewStrides += [0, strides[i]]
        }
        _ = try ctx.checkedShape(viewShape)
        let tiled = stridedCopy(x, shape: viewShape, strides: viewStrides, offset: 0)
        return [tiled.reshaped((0..<x.rank).map { x.shape[$0] * repeats[$0] })]
    } },
    "Range": { ctx in PreparedKernel { inputs in
        let startT = try inputs.required(0, ctx)
        let start = startT.doubleValue(at: 0), limit = try inputs.required(1, ctx).doubleValue(at: 0)
        let delta = try inputs.required(2, ctx).doubleValue(at: 0)
        guard delta != 0 else { throw ctx.error(.executionFailed, "delta must not be 0") }
        let steps = ((limit - start) / delta).rounded(.up)
        guard steps.isFinite, steps <= Double(maxDataDrivenElements) else { throw ctx.error(.executionFailed, "range(\(start), \(limit), \(delta)) is too long") }
        let n = max(Int(steps), 0)
        let values = Tensor(shape: [n], scalars: (0..<n).map { start + Double($0) * delta })
        if startT.dtype == .float32 {
            // float32 accumulates in float32, as onnxruntime does.
            return [Tensor(shape: [n], scalars: (0..<n).map { Float(start) + Float($0) * Float(delta) })]
        }
        return [try castTensor(values, to: startT.dtype, ctx)]
    } },
    "Gather": { ctx in
        let axisAttr = try ctx.int("axis", 0)
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx), indicesT = try inputs.required(1, ctx)
            let axis = try ctx.axis(axisAttr, rank: x.rank)
            let dim = x.shape[axis]
            let indices = try indicesT.ints.map { i -> Int in
                let j = i < 0 ? i + dim : i
                guard j >= 0 && j < dim else { throw ctx.error(.executionFailed, "index \(i) out of range for axis \(axis) of size \(dim)") }
                return j
            }
            let shape = Array(x.shape[..<axis]) + indicesT.shape + Array(x.shape[(axis + 1)...])
            let outer = x.shape[..<axis].reduce(1, *)
            if x.dtype == .string {
                // Strings live out of line: gather the elements themselves.
                let run = x.shape[(axis + 1)...].reduce(1, *)
                var picked: [[UInt8]] = []
                picked.reserveCapacity(outer * indices.count * run)
                for o in 0..<outer {
                    for j in indices { picked += x.strings[((o * dim + j) * run)..<((o * dim + j + 1) * run)] }
                }
                return [Tensor(shape: shape, strings: picked)]
            }
            let inner = x.shape[(axis + 1)...].reduce(1, *) * x.dtype.byteSize
            var out = Tensor(uninitialized: x.dtype, shape: shape)
            if inner > 0 && !indices.isEmpty {
                x.withUnsafeBytes { src in out.withUnsafeMutableBytes { dst in
                    var d = dst.baseAddress!
                    for o in 0..<outer {
                        let row = src.baseAddress! + o * dim * inner
                        for j in indices {
                            d.copyMemory(from: row + j * inner, byteCount: inner)
                            d += inner
                        }
                    }
                } }
            }
            return [out]
        }
    },
    "GatherElements": { ctx in
        let axisAttr = try ctx.int("axis", 0)
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx), indicesT = try inputs.required(1, ctx)
            let axis = try ctx.axis(axisAttr, rank: x.rank)
            guard indicesT.rank == x.rank else { throw ctx.error(.executionFailed, "indices rank \(indicesT.rank) != data rank \(x.rank)") }
            let indices = indicesT.ints
            let size = x.dtype.byteSize
            let xs = x.strides, os = indicesT.strides
            let dim = x.shape[axis]
            var out = Tensor(uninitialized: x.dtype, shape: indicesT.shape)
            try x.withUnsafeBytes { src in try out.withUnsafeMutableBytes { dst in
                for flat in 0..<indices.count {
                    var rem = flat, offset = 0
                    for a in 0..<x.rank {
                        var c = rem / os[a]
                        rem %= os[a]
                        if a == axis {
                            c = indices[flat] < 0 ? indices[flat] + dim : indices[flat]
                            guard c >= 0 && c < dim else { throw ctx.error(.executionFailed, "index \(indices[flat]) out of range for axis size \(dim)") }
                        }
                        offset += c * xs[a]
                    }
                    (dst.baseAddress! + flat * size).copyMemory(from: src.baseAddress! + offset * size, byteCount: size)
                }
            } }
            return [out]
        }
    },
    "Pad": { ctx in
        let attrPads = try ctx.ints("pads") ?? ctx.ints("paddings")
        let attrValue = try ctx.float("value", 0)
        let mode = try ctx.string("mode", "constant")
        guard ["constant", "reflect", "edge", "wrap"].contains(mode) else { throw ctx.unsupported("mode", "'\(mode)'") }
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            var pads: [Int]
            var value = Double(attrValue)
            if ctx.opset >= 11 {
                let given = try inputs.required(1, ctx).ints
                if let v = inputs[2], v.count > 0 { value = v.doubleValue(at: 0) }
                if let axesT = inputs[3] {
                    let axes = try axesT.ints.map { try ctx.axis($0, rank: x.rank) }
                    guard given.count == 2 * axes.count else { throw ctx.error(.executionFailed, "pads \(given) do not match axes \(axes)") }
                    pads = Array(repeating: 0, count: 2 * x.rank)
                    for (k, a) in axes.enumerated() { pads[a] = given[k]; pads[a + x.rank] = given[k + axes.count] }
                } else { pads = given }
            } else {
                guard let p = attrPads else { throw ctx.error(.invalidModel, "attribute 'pads' is required") }
                pads = p
            }
            guard pads.count == 2 * x.rank else { throw ctx.error(.executionFailed, "pads \(pads) need \(2 * x.rank) values for rank \(x.rank)") }
            return [try padTensor(x, pads: pads, mode: mode, value: value, ctx)]
        }
    },
]

/// Pads (or crops, with negative pads) in constant, reflect, edge or wrap mode; any fixed-size dtype.
func padTensor(_ x: Tensor, pads: [Int], mode: String, value: Double, _ ctx: OpContext) throws -> Tensor {
    let rank = x.rank
    // Pads come from data: add without trapping on overflow, then bound the result.
    let shape = try (0..<rank).map { a -> Int in
        let (grown, o1) = x.shape[a].addingReportingOverflow(pads[a])
        let (total, o2) = grown.addingReportingOverflow(pads[a + rank])
        guard !o1, !o2, total >= 0 else { throw ctx.error(.executionFailed, "pads \(pads) do not fit the input \(x.shape)") }
        return total
    }
    _ = try ctx.checkedShape(shape)
    // Source index for each output position of each axis (-1 = fill value).
    var maps: [[Int]] = []
    for a in 0..<rank {
        let dim = x.shape[a], begin = pads[a]
        var map = [Int](repeating: -1, count: shape[a])
        for o in 0..<shape[a] {
            var i = o - begin
            if i < 0 || i >= dim {
                switch mode {
                case "edge": guard dim > 0 else { throw ctx.error(.executionFailed, "edge padding of an empty axis") }
                    i = min(max(i, 0), dim - 1)
                case "reflect":
                    if dim == 1 { i = 0 } else {
                        let period = 2 * (dim - 1)
                        i = ((i % period) + period) % period
                        if i >= dim { i = period - i }
                    }
                case "wrap": guard dim > 0 else { throw ctx.error(.executionFailed, "wrap padding of an empty axis") }
                    i = ((i % dim) + dim) % dim
                default: i = -1
                }
            }
            map[o] = i
        }
        maps.append(map)
    }
    let size = x.dtype.byteSize
    let fill = try scalarBytes(value, x.dtype, ctx)
    var out = Tensor(uninitialized: x.dtype, shape: shape)
    let count = out.count
    if count == 0 { return out }
    let xs = x.strides
    x.withUnsafeBytes { src in out.withUnsafeMutableBytes { dst in
        var index = [Int](repeating: 0, count: rank)
        let innerMap = maps[rank - 1]
        let inner = shape[rank - 1]
        var flat = 0
        while flat < count {
            var base = 0
            var outside = false
            for a in 0..<(rank - 1) {
                let s = maps[a][index[a]]
                if s < 0 { outside = true; break }
                base += s * xs[a]
            }
            for o in 0..<inner {
                let s = innerMap[o]
                let d = dst.baseAddress! + (flat + o) * size
                if outside || s < 0 {
                    for b in 0..<size { d.storeBytes(of: fill[b], toByteOffset: b, as: UInt8.self) }
                } else {
                    d.copyMemory(from: src.baseAddress! + (base + s) * size, byteCount: size)
                }
            }
            flat += inner
            var a = rank - 2
            while a >= 0 {
                index[a] += 1
                if index[a] < shape[a] { break }
                index[a] = 0
                a -= 1
            }
        }
    } }
    return out
}

/// `source`'s elements at `offset` with `strides` over `shape` as a view of its storage when they are one contiguous
/// run covering at least half of it (a channel split at batch 1: ShuffleNet's halves), else nil. A small part of a
/// large tensor is copied instead, so that the large one can be freed.
func contiguousView(_ source: Tensor, shape: [Int], strides: [Int], offset: Int) -> Tensor? {
    guard source.dtype != .string, source.container == nil, Tensor.elementCount(shape) * 2 >= source.count else { return nil }
    let dense = Tensor.contiguousStrides(shape)
    guard shape.indices.allSatisfy({ shape[$0] <= 1 || strides[$0] == dense[$0] }) else { return nil }
    return Tensor(dtype: source.dtype, shape: shape, storage: source.storage, byteOffset: source.byteOffset + offset * source.dtype.byteSize)
}

/// A slice written straight into a strided Concat window (one row per image at batch > 1), when each image of the
/// slice is one contiguous run of `source` (a channel half of NCHW, as ShuffleNet splits): the run is copied once into
/// its row instead of into a fresh tensor that the Concat placement then copies again. Returns the window's stand-in.
func sliceIntoWindow(_ source: Tensor, shape: [Int], strides: [Int], offset: Int, window: OutputPlacement) -> Tensor? {
    guard !window.isContiguous, source.dtype != .string, source.container == nil, shape.count > 1, window.rows == shape[0] else { return nil }
    let size = source.dtype.byteSize, count = Tensor.elementCount(shape)
    guard count > 0, window.byteCount == count * size else { return nil }
    let inner = Array(shape.dropFirst()), dense = Tensor.contiguousStrides(inner)
    guard inner.indices.allSatisfy({ inner[$0] <= 1 || strides[$0 + 1] == dense[$0] }) else { return nil }
    let rowBytes = count / shape[0] * size
    source.withUnsafeBytes { src in
        guard let base = src.baseAddress else { return }
        let destination = window.storage.pointer + window.byteOffset
        for n in 0..<shape[0] {
            (destination + n * window.rowStride).copyMemory(from: base + (offset + n * strides[0]) * size, byteCount: rowBytes)
        }
    }
    return window.tensor(source.dtype, shape: shape)
}

/// `Shape`'s output: the dims from `start` to `end` (negative ones count from the end; both clamped to the rank).
func shapeTensor(_ shape: [Int], start: Int, end: Int) -> Tensor {
    let r = shape.count
    let s = min(max(start < 0 ? start + r : start, 0), r)
    let e = min(max(end < 0 ? end + r : end, 0), r)
    return Tensor.int64(e > s ? Array(shape[s..<e]) : [])
}
