import Tensor

/// Numpy-style broadcast of two shapes, or nil when they are incompatible.
func broadcastShape(_ a: [Int], _ b: [Int]) -> [Int]? {
    let rank = max(a.count, b.count)
    var out = [Int](repeating: 1, count: rank)
    for i in 0..<rank {
        let da = i < rank - a.count ? 1 : a[i - (rank - a.count)]
        let db = i < rank - b.count ? 1 : b[i - (rank - b.count)]
        if da == db || db == 1 { out[i] = da } else if da == 1 { out[i] = db } else { return nil }
    }
    return out
}

/// Element strides of `shape` viewed as broadcast to `target` (0 on broadcast axes).
func broadcastStrides(_ shape: [Int], to target: [Int]) -> [Int] {
    let lead = target.count - shape.count
    let own = Tensor.contiguousStrides(shape)
    return (0..<target.count).map { i in
        i < lead ? 0 : (shape[i - lead] == 1 && target[i] != 1 ? 0 : own[i - lead])
    }
}

/// Calls `body(offsets, innerCount, innerStrides)` for each innermost run of an N-D walk over `shape`,
/// where `offsets[k]` is operand k's element offset at the run start.
@inline(__always)
func forEachRun(shape: [Int], strides: [[Int]], _ body: ([Int], Int, [Int]) -> Void) {
    let (s, st) = coalesce(shape: shape, strides: strides)
    let rank = s.count
    let inner = s[rank - 1]
    let innerStrides = st.map { $0[rank - 1] }
    var index = [Int](repeating: 0, count: rank)
    var offsets = [Int](repeating: 0, count: st.count)
    let outer = s.dropLast().reduce(1, *)
    if Tensor.elementCount(shape) == 0 { return }
    for _ in 0..<outer {
        body(offsets, inner, innerStrides)
        var axis = rank - 2
        while axis >= 0 {
            index[axis] += 1
            for k in offsets.indices { offsets[k] += st[k][axis] }
            if index[axis] < s[axis] { break }
            for k in offsets.indices { offsets[k] -= st[k][axis] * s[axis] }
            index[axis] = 0
            axis -= 1
        }
    }
}

/// Copies a strided view (element strides, possibly 0 or negative) of `source` into a new contiguous tensor.
func stridedCopy(_ source: Tensor, shape: [Int], strides: [Int], offset: Int) -> Tensor {
    let size = source.dtype.byteSize
    var out = Tensor.pooled(source.dtype, shape: shape)
    if out.count == 0 { return out }
    source.withUnsafeBytes { src in
        out.withUnsafeMutableBytes { dst in
            let s = src.baseAddress!, d = dst.baseAddress!
            let dstStrides = Tensor.contiguousStrides(shape)
            forEachRun(shape: shape, strides: [strides, dstStrides]) { off, n, inner in
                let si = inner[0]
                var sp = offset + off[0]
                let dp = off[1]
                switch size {
                case 4:
                    let sf = s.assumingMemoryBound(to: UInt32.self), df = d.assumingMemoryBound(to: UInt32.self) + dp
                    if si == 1 { (df).update(from: sf + sp, count: n); return }
                    for i in 0..<n { df[i] = sf[sp]; sp += si }
                case 8:
                    let sf = s.assumingMemoryBound(to: UInt64.self), df = d.assumingMemoryBound(to: UInt64.self) + dp
                    for i in 0..<n { df[i] = sf[sp]; sp += si }
                case 2:
                    let sf = s.assumingMemoryBound(to: UInt16.self), df = d.assumingMemoryBound(to: UInt16.self) + dp
                    for i in 0..<n { df[i] = sf[sp]; sp += si }
                default:
                    let sf = s.assumingMemoryBound(to: UInt8.self), df = d.assumingMemoryBound(to: UInt8.self) + dp
                    for i in 0..<n { df[i] = sf[sp]; sp += si }
                }
            }
        }
    }
    return out
}

/// Elementwise `op(a, b)` with numpy broadcasting into a new tensor of `R`.
@inline(__always)
func broadcastBinary<A: TensorScalar, B: TensorScalar, R: TensorScalar>(
    _ a: Tensor, _ b: Tensor, _ ctx: OpContext, _ op: (A, B) -> R
) throws -> Tensor {
    guard let shape = broadcastShape(a.shape, b.shape) else {
        throw ctx.error(.executionFailed, "cannot broadcast shapes \(a.shape) and \(b.shape)")
    }
    var out = Tensor.pooled(R.dtype, shape: shape)
    if out.count == 0 { return out }
    a.withUnsafeBufferPointer(of: A.self) { pa in
        b.withUnsafeBufferPointer(of: B.self) { pb in
            out.withUnsafeMutableBufferPointer(of: R.self) { po in
                let x = pa.baseAddress!, y = pb.baseAddress!, z = po.baseAddress!
                if a.shape == b.shape {
                    for i in 0..<po.count { z[i] = op(x[i], y[i]) }
                } else if pb.count == 1 && pa.count == po.count {
                    let v = y[0]
                    for i in 0..<po.count { z[i] = op(x[i], v) }
                } else if pa.count == 1 && pb.count == po.count {
                    let v = x[0]
                    for i in 0..<po.count { z[i] = op(v, y[i]) }
                } else {
                    let sa = broadcastStrides(a.shape, to: shape), sb = broadcastStrides(b.shape, to: shape)
                    forEachRun(shape: shape, strides: [sa, sb, Tensor.contiguousStrides(shape)]) { off, n, inner in
                        let ia = inner[0], ib = inner[1]
                        let xa = x + off[0], yb = y + off[1], zo = z + off[2]
                        if ia == 1 && ib == 1 {
                            for i in 0..<n { zo[i] = op(xa[i], yb[i]) }
                        } else if ia == 1 && ib == 0 {
                            let v = yb[0]
                            for i in 0..<n { zo[i] = op(xa[i], v) }
                        } else if ia == 0 && ib == 1 {
                            let v = xa[0]
                            for i in 0..<n { zo[i] = op(v, yb[i]) }
                        } else {
                            for i in 0..<n { zo[i] = op(xa[i * ia], yb[i * ib]) }
                        }
                    }
                }
            }
        }
    }
    return out
}

/// Elementwise `op` over a float32 tensor, in place when the caller handed over the only reference.
@inline(__always)
func mapFloats(_ input: Tensor, _ op: (Float) -> Float) -> Tensor {
    var t = input
    t.withUnsafeMutableBufferPointer(of: Float.self) { p in
        for i in 0..<p.count { p[i] = op(p[i]) }
    }
    return t
}

/// `mapFloats` on input `index`, moved out of `inputs` first so a last reference is written in place.
@inline(__always)
func mapFloats(taking index: Int, from inputs: inout KernelInputs, _ op: (Float) -> Float) -> Tensor {
    var t = inputs.take(index)!
    t.withUnsafeMutableBufferPointer(of: Float.self) { p in
        for i in 0..<p.count { p[i] = op(p[i]) }
    }
    return t
}

/// Elementwise `op` into a new tensor of another type.
@inline(__always)
func mapElements<A: TensorScalar, R: TensorScalar>(_ input: Tensor, _ op: (A) -> R) -> Tensor {
    var out = Tensor.pooled(R.dtype, shape: input.shape)
    input.withUnsafeBufferPointer(of: A.self) { src in
        out.withUnsafeMutableBufferPointer(of: R.self) { dst in
            for i in 0..<src.count { dst[i] = op(src[i]) }
        }
    }
    return out
}

/// Steps a row-major multi-index to the next element of `shape` (the last axis fastest; wraps to zeros at the end).
@inline(__always) func advance(_ index: inout [Int], in shape: [Int]) {
    var axis = shape.count - 1
    while axis >= 0 {
        index[axis] += 1
        if index[axis] < shape[axis] { return }
        index[axis] = 0
        axis -= 1
    }
}
