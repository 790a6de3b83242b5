/// The concrete sizes of one 2-D pooling call on NCHW data (1-D pooling uses height 1).
@dynamicMemberLookup
public struct PoolGeometry: ComposedGeometry, Sendable, Hashable {
    /// N * C planes pooled independently.
    public var planes: Int
    /// Input height.
    public var inHeight: Int
    /// Input width.
    public var inWidth: Int
    /// Output height (computed by the caller: it depends on ceil_mode and auto_pad).
    public var outHeight: Int
    /// Output width.
    public var outWidth: Int
    /// Window size, strides, dilations (MaxPool only) and pads.
    public var window: SlidingWindow
    /// The window, whose fields read as the geometry's own (`g.kernelHeight`).
    public var parts: SlidingWindow { get { window } set { window = newValue } }

    /// A geometry value.
    public init(planes: Int, inHeight: Int, inWidth: Int, outHeight: Int, outWidth: Int, window: SlidingWindow) {
        (self.planes, self.inHeight, self.inWidth, self.outHeight, self.outWidth) = (planes, inHeight, inWidth, outHeight, outWidth)
        self.window = window
    }
}

/// MaxPool over each plane; windows that fall wholly in padding yield -infinity, as ONNX specifies.
///
/// Each plane is copied into a scratch plane bordered with -infinity (covering ceil_mode overhang) so every output
/// row is a run of vector maxima; planes are split across the compute pool.
public func maxPool2D(_ g: PoolGeometry, input: UnsafePointer<Float>, output: UnsafeMutablePointer<Float>) {
    if rowMaxPoolFits(g) {
        rowMaxPool(g, input: input, output: output)
        return
    }
    if separablePoolFits(g) {
        separablePool(g, MaxFold.self, input: input, output: output)
        return
    }
    if let layout = flatLayout(g) {
        flatPool(g, layout, MaxFold.self, input: input, output: output) { _, flat, out in
            out.update(from: flat, count: g.outWidth)
        }
        return
    }
    pooledPlanes(g, fill: -.infinity, input: input, output: output) { padded, paddedWidth, out in
        windowRows(g, padded: padded, paddedWidth: paddedWidth, output: out, MaxFold.self)
    }
}

/// AveragePool over each plane; `countIncludePad` divides by the window clipped to the padded input, else by the valid cells.
///
/// Sums come from a zero-bordered scratch plane; the divisor factors into a row count times a column count.
public func averagePool2D(_ g: PoolGeometry, countIncludePad: Bool, input: UnsafePointer<Float>, output: UnsafeMutablePointer<Float>) {
    let columnCounts = (0..<g.outWidth).map { x in
        windowCount(start: x * g.strideWidth - g.padLeft, kernel: g.kernelWidth, dilation: g.dilationWidth,
                    size: g.inWidth, padEnd: g.padRight, includePad: countIncludePad)
    }
    let rowCounts = (0..<g.outHeight).map { y in
        windowCount(start: y * g.strideHeight - g.padTop, kernel: g.kernelHeight, dilation: g.dilationHeight,
                    size: g.inHeight, padEnd: g.padBottom, includePad: countIncludePad)
    }
    if separablePoolFits(g) {
        separablePool(g, SumFold.self, input: input, output: output, divisors: (rowCounts, columnCounts))
        return
    }
    if let layout = flatLayout(g) {
        flatPool(g, layout, SumFold.self, input: input, output: output) { y, flat, out in
            for x in 0..<g.outWidth {
                let divisor = rowCounts[y] * columnCounts[x]
                out[x] = divisor > 0 ? flat[x] / Float(divisor) : 0
            }
        }
        return
    }
    pooledPlanes(g, fill: 0, input: input, output: output) { padded, paddedWidth, out in
        windowRows(g, padded: padded, paddedWidth: paddedWidth, output: out, SumFold.self)
        for y in 0..<g.outHeight {
            let row = out + y * g.outWidth
            for x in 0..<g.outWidth {
                let divisor = rowCounts[y] * columnCounts[x]
                row[x] = divisor > 0 ? row[x] / Float(divisor) : 0
            }
        }
    }
}

/// The flat vector layout for equal strides 1 or 2 (every common pool), nil otherwise.
private func flatLayout(_ g: PoolGeometry) -> FlatWindowLayout? {
    FlatWindowLayout(inHeight: g.inHeight, inWidth: g.inWidth, outHeight: g.outHeight, outWidth: g.outWidth, window: g.window)
}

/// Folds every window of each plane with `combine` in 16-lane steps over the flat layout, then hands each output
/// row's flat values to `finish(y, flatRow, outputRow)`. Planes are split across the compute pool.
@inline(__always)
private func flatPool<Fold: WindowFold>(_ g: PoolGeometry, _ layout: FlatWindowLayout, _: Fold.Type, input: UnsafePointer<Float>,
                                        output: UnsafeMutablePointer<Float>,
                                        _ finish: (Int, UnsafeMutablePointer<Float>, UnsafeMutablePointer<Float>) -> Void) {
    guard g.planes > 0 else { return }
    let inPlane = g.inHeight * g.inWidth, outPlane = g.outHeight * g.outWidth
    parallelRanges(g.planes, minimumChunk: max(1, 4096 / max(1, inPlane))) { range in
        let scratch = allocateFloats(layout.scratchCount)
        defer { scratch.deallocate() }
        layout.prepare(scratch, fill: Fold.identity)
        let flat = layout.flat(scratch)
        layout.bases(scratch).withUnsafeBufferPointer { bases in
            for plane in range {
                layout.load(input + plane * inPlane, into: scratch)
                var j = 0
                while j < layout.flatCount {
                    var acc = (bases[0] + j).vector(FloatVector.self)
                    for t in 1..<bases.count { acc = Fold.combine(acc, (bases[t] + j).vector(FloatVector.self)) }
                    (flat + j).store(acc)
                    j += FloatVector.scalarCount
                }
                let out = output + plane * outPlane
                for y in 0..<g.outHeight { finish(y, flat + y * layout.rowWidth, out + y * g.outWidth) }
            }
        }
    }
}

/// Cells of one window axis counted by AveragePool: valid cells, or cells within the padded extent.
private func windowCount(start: Int, kernel: Int, dilation: Int, size: Int, padEnd: Int, includePad: Bool) -> Int {
    if includePad {
        let end = min(start + (kernel - 1) * dilation + 1, size + padEnd)
        return (end - start + dilation - 1) / dilation
    }
    var count = 0
    for k in 0..<kernel where (0..<size).contains(start + k * dilation) { count += 1 }
    return count
}

/// Runs `body` on each plane after copying it into a scratch plane bordered with `fill` that covers every window.
private func pooledPlanes(_ g: PoolGeometry, fill: Float, input: UnsafePointer<Float>, output: UnsafeMutablePointer<Float>,
                          _ body: (UnsafePointer<Float>, Int, UnsafeMutablePointer<Float>) -> Void) {
    guard g.planes > 0, g.outHeight > 0, g.outWidth > 0 else { return }
    let paddedHeight = max(g.padTop + g.inHeight, (g.outHeight - 1) * g.strideHeight + (g.kernelHeight - 1) * g.dilationHeight + 1)
    let paddedWidth = max(g.padLeft + g.inWidth, (g.outWidth - 1) * g.strideWidth + (g.kernelWidth - 1) * g.dilationWidth + 1)
    let inPlane = g.inHeight * g.inWidth, outPlane = g.outHeight * g.outWidth
    // Rows and columns of the input that some window reads (pads may be negative-free but windows may stop early).
    let copyHeight = min(g.inHeight, paddedHeight - g.padTop), copyWidth = min(g.inWidth, paddedWidth - g.padLeft)
    parallelRanges(g.planes, minimumChunk: max(1, 4096 / max(1, inPlane))) { range in
        let scratchCount = paddedCount(paddedHeight * paddedWidth)
        let scratch = allocateFloats(scratchCount)
        defer { scratch.deallocate() }
        scratch.initialize(repeating: fill, count: scratchCount)
        for plane in range {
            let src = input + plane * inPlane
            for y in 0..<copyHeight {
                (scratch + (g.padTop + y) * paddedWidth + g.padLeft).update(from: src + y * g.inWidth, count: copyWidth)
            }
            body(UnsafePointer(scratch), paddedWidth, output + plane * outPlane)
        }
    }
}

/// Folds every window of a padded plane into the output rows, 16 then 4 outputs at a time (strides other than 1 or 2).
@inline(__always)
private func windowRows<Fold: WindowFold>(_ g: PoolGeometry, padded: UnsafePointer<Float>, paddedWidth: Int,
                                          output: UnsafeMutablePointer<Float>, _: Fold.Type) {
    let kh = g.kernelHeight, kw = g.kernelWidth, sw = g.strideWidth, dw = g.dilationWidth
    for y in 0..<g.outHeight {
        let top = padded + y * g.strideHeight * paddedWidth
        let out = output + y * g.outWidth
        var x = 0
        while x + 16 <= g.outWidth {
            var acc = SIMD16<Float>(repeating: Fold.identity)
            for ky in 0..<kh {
                let row = top + ky * g.dilationHeight * paddedWidth + x * sw
                for kx in 0..<kw { acc = Fold.combine(acc, loadStrided16(row + kx * dw, stride: sw)) }
            }
            (out + x).store(acc)
            x += 16
        }
        while x < g.outWidth {
            var acc = Fold.identity
            for ky in 0..<kh {
                let row = top + ky * g.dilationHeight * paddedWidth + x * sw
                for kx in 0..<kw { acc = Fold.combine(acc, row[kx * dw]) }
            }
            out[x] = acc
            x += 1
        }
    }
}

/// How window and plane reductions combine values; a type parameter so the folds specialise into the loops
/// (closures captured by a parallel region stay indirect calls).
protocol WindowFold {
    /// The value that changes nothing (and fills the padding).
    static var identity: Float { get }
    /// Lane-wise combination.
    static func combine(_ a: FloatVector, _ b: FloatVector) -> FloatVector
    /// Scalar combination.
    static func combine(_ a: Float, _ b: Float) -> Float
}

/// Maximum; padding is -infinity.
enum MaxFold: WindowFold {
    static var identity: Float { -.infinity }
    @inline(__always) static func combine(_ a: FloatVector, _ b: FloatVector) -> FloatVector { a.replacing(with: b, where: b .> a) }
    @inline(__always) static func combine(_ a: Float, _ b: Float) -> Float { Swift.max(a, b) }
}

/// Sum; padding is 0.
enum SumFold: WindowFold {
    static var identity: Float { 0 }
    @inline(__always) static func combine(_ a: FloatVector, _ b: FloatVector) -> FloatVector { a + b }
    @inline(__always) static func combine(_ a: Float, _ b: Float) -> Float { a + b }
}

/// Mean of each of `planes` planes of `planeSize` floats (GlobalAveragePool on NCHW: planes = N * C).
public func globalAveragePool(planes: Int, planeSize: Int, input: UnsafePointer<Float>, output: UnsafeMutablePointer<Float>) {
    reducePlanes(planes: planes, planeSize: planeSize, input: input, output: output, SumFold.self) { $0.sum() / Float(planeSize) }
}

/// Maximum of each of `planes` planes of `planeSize` floats (GlobalMaxPool on NCHW: planes = N * C).
public func globalMaxPool(planes: Int, planeSize: Int, input: UnsafePointer<Float>, output: UnsafeMutablePointer<Float>) {
    reducePlanes(planes: planes, planeSize: planeSize, input: input, output: output, MaxFold.self) { $0.max() }
}

/// Folds each plane into 16 lanes, then the lanes into one value with `finish`.
@inline(__always)
private func reducePlanes<Fold: WindowFold>(planes: Int, planeSize: Int, input: UnsafePointer<Float>, output: UnsafeMutablePointer<Float>,
                                            _: Fold.Type, _ finish: (SIMD16<Float>) -> Float) {
    parallelRanges(planes, minimumChunk: max(1, 16_384 / max(1, planeSize))) { range in
        for p in range {
            let src = input + p * planeSize
            var acc = SIMD16<Float>(repeating: Fold.identity)
            var i = 0
            while i + 16 <= planeSize { acc = Fold.combine(acc, src.advanced(by: i).vector(SIMD16<Float>.self)); i += 16 }
            var tail = Fold.identity
            while i < planeSize { tail = Fold.combine(tail, src[i]); i += 1 }
            acc[0] = Fold.combine(acc[0], tail)
            output[p] = finish(acc)
        }
    }
}
