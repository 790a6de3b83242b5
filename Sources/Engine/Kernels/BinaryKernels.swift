/// The four float32 arithmetic operators of the broadcasting fast path (Add, Sub, Mul, Div).
public enum FloatBinaryOperation: Sendable {
    case add, subtract, multiply, divide
}

/// One arithmetic operator on lanes and on single values, as a type so that each loop is specialised for it
/// (a closure in the inner loop stayed an indirect call per element).
protocol BinaryLanes {
    static func lanes(_ a: FloatVector, _ b: FloatVector) -> FloatVector
    static func scalar(_ a: Float, _ b: Float) -> Float
}

private enum AddLanes: BinaryLanes {
    @_transparent static func lanes(_ a: FloatVector, _ b: FloatVector) -> FloatVector { a + b }
    @_transparent static func scalar(_ a: Float, _ b: Float) -> Float { a + b }
}

private enum SubtractLanes: BinaryLanes {
    @_transparent static func lanes(_ a: FloatVector, _ b: FloatVector) -> FloatVector { a - b }
    @_transparent static func scalar(_ a: Float, _ b: Float) -> Float { a - b }
}

private enum MultiplyLanes: BinaryLanes {
    @_transparent static func lanes(_ a: FloatVector, _ b: FloatVector) -> FloatVector { a * b }
    @_transparent static func scalar(_ a: Float, _ b: Float) -> Float { a * b }
}

private enum DivideLanes: BinaryLanes {
    @_transparent static func lanes(_ a: FloatVector, _ b: FloatVector) -> FloatVector { a / b }
    @_transparent static func scalar(_ a: Float, _ b: Float) -> Float { a / b }
}

/// z = x op y with numpy broadcasting: `shape` is the output's, `xStrides`/`yStrides` the operands' element strides
/// viewed at that shape (0 on broadcast axes, as `broadcastStrides` gives). z is contiguous and may be x or y when
/// that operand has the output's shape (each element is read before it is written).
///
/// Axes are coalesced first, so the shape classes exporters produce become one kind of run each: same shape (one
/// run), scalar, per-channel NCHW (runs of a plane against one value), trailing axis (runs against one row). Large
/// outputs are split across the compute threads (`parallel: false` from inside a parallel region).
public func floatBinary(_ op: FloatBinaryOperation, _ x: UnsafePointer<Float>, strides xStrides: [Int], _ y: UnsafePointer<Float>,
                        strides yStrides: [Int], into z: UnsafeMutablePointer<Float>, shape: [Int], parallel: Bool = true) {
    switch op {
    case .add: floatBinary(AddLanes.self, x, xStrides, y, yStrides, z, shape, parallel)
    case .subtract: floatBinary(SubtractLanes.self, x, xStrides, y, yStrides, z, shape, parallel)
    case .multiply: floatBinary(MultiplyLanes.self, x, xStrides, y, yStrides, z, shape, parallel)
    case .divide: floatBinary(DivideLanes.self, x, xStrides, y, yStrides, z, shape, parallel)
    }
}

/// Below this many output elements a second thread costs more than it saves.
private let parallelBinaryMinimum = 65_536

private func floatBinary<Op: BinaryLanes>(_: Op.Type, _ x: UnsafePointer<Float>, _ xStrides: [Int], _ y: UnsafePointer<Float>,
                                          _ yStrides: [Int], _ z: UnsafeMutablePointer<Float>, _ shape: [Int], _ parallel: Bool) {
    let total = shape.reduce(1, *)
    guard total > 0 else { return }
    let (s, st) = coalesce(shape: shape, strides: [xStrides, yStrides])
    let rank = s.count, inner = s[rank - 1]
    let sx = st[0][rank - 1], sy = st[1][rank - 1]
    let outer = total / inner
    let split = parallel && total >= parallelBinaryMinimum && EngineThreads.threads > 1
    if outer == 1 {
        // One run (same shape, or a scalar operand): split it into vector-aligned pieces.
        let run = { (range: Range<Int>) in
            let start = range.lowerBound * 16, end = min(inner, range.upperBound * 16)
            binaryRun(Op.self, x + start * sx, sx, y + start * sy, sy, z + start, end - start)
        }
        let blocks = (inner + 15) / 16
        if split { parallelRanges(blocks, minimumChunk: 1024, run) } else { run(0..<blocks) }
        return
    }
    let body = { (range: Range<Int>) in
        // The outer multi-index of the first run, then incremented run by run (no division per run).
        var index = [Int](repeating: 0, count: rank)
        var rest = range.lowerBound
        var ox = 0, oy = 0
        for axis in stride(from: rank - 2, through: 0, by: -1) {
            index[axis] = rest % s[axis]
            rest /= s[axis]
            ox += index[axis] * st[0][axis]
            oy += index[axis] * st[1][axis]
        }
        for r in range {
            binaryRun(Op.self, x + ox, sx, y + oy, sy, z + r * inner, inner)
            var axis = rank - 2
            while axis >= 0 {
                index[axis] += 1
                ox += st[0][axis]
                oy += st[1][axis]
                if index[axis] < s[axis] { break }
                ox -= st[0][axis] * s[axis]
                oy -= st[1][axis] * s[axis]
                index[axis] = 0
                axis -= 1
            }
        }
    }
    if split { parallelRanges(outer, minimumChunk: max(1, 8192 / inner), body) } else { body(0..<outer) }
}

/// z[i] = x[i * sx] op y[i * sy] for i < n, with the unit-stride and broadcast (stride 0) cases vectorised.
@inline(__always)
private func binaryRun<Op: BinaryLanes>(_: Op.Type, _ x: UnsafePointer<Float>, _ sx: Int, _ y: UnsafePointer<Float>, _ sy: Int,
                                        _ z: UnsafeMutablePointer<Float>, _ n: Int) {
    let width = FloatVector.scalarCount
    var i = 0
    if sx == 1 && sy == 1 {
        while i + width <= n {
            (z + i).store(Op.lanes((x + i).vector(FloatVector.self), (y + i).vector(FloatVector.self)))
            i += width
        }
        while i < n { z[i] = Op.scalar(x[i], y[i]); i += 1 }
    } else if sx == 1 && sy == 0 {
        let v = y[0], b = FloatVector(repeating: v)
        while i + width <= n {
            (z + i).store(Op.lanes((x + i).vector(FloatVector.self), b))
            i += width
        }
        while i < n { z[i] = Op.scalar(x[i], v); i += 1 }
    } else if sx == 0 && sy == 1 {
        let v = x[0], a = FloatVector(repeating: v)
        while i + width <= n {
            (z + i).store(Op.lanes(a, (y + i).vector(FloatVector.self)))
            i += width
        }
        while i < n { z[i] = Op.scalar(v, y[i]); i += 1 }
    } else {
        for k in 0..<n { z[k] = Op.scalar(x[k * sx], y[k * sy]) }
    }
}

/// Merges adjacent axes that every operand walks contiguously (or all skip), so inner loops run long.
func coalesce(shape: [Int], strides: [[Int]]) -> (shape: [Int], strides: [[Int]]) {
    var outShape: [Int] = []
    var outStrides: [[Int]] = Array(repeating: [], count: strides.count)
    for axis in 0..<shape.count where shape[axis] != 1 {
        if let last = outShape.last,
           strides.indices.allSatisfy({ strides[$0][axis] * shape[axis] == outStrides[$0].last! }) {
            _ = last
            outShape[outShape.count - 1] *= shape[axis]
            for k in strides.indices { outStrides[k][outStrides[k].count - 1] = strides[k][axis] }
        } else {
            outShape.append(shape[axis])
            for k in strides.indices { outStrides[k].append(strides[k][axis]) }
        }
    }
    if outShape.isEmpty { return ([1], strides.map { _ in [0] }) }
    return (outShape, outStrides)
}
