/// MaxPool and AveragePool without dilation as two 1-D passes per output row: the fold of the window's input rows
/// (clipped to the input) into a line bordered with the fold's identity, then the fold of each window's columns of it.
///
/// The stem pools of ResNet, DenseNet, ShuffleNet and SqueezeNet (3x3 stride 2 over 112x112 planes) and DenseNet's
/// 2x2 transitions read each input row once or 1.5 times this way; the flat layout copied every plane into parity
/// planes first, then read every tap per output vector (4x onnxruntime's time on SqueezeNet's ceil-mode pools).
/// `maxPool2DReference` and `averagePool2DReference` are the twins.

/// Whether `separablePool` handles `g`: unit dilations and a column stride of 1 or 2 (any row stride).
func separablePoolFits(_ g: PoolGeometry) -> Bool {
    g.dilationHeight == 1 && g.dilationWidth == 1 && (g.strideWidth == 1 || g.strideWidth == 2) && g.strideHeight >= 1
        && g.kernelHeight >= 1 && g.kernelWidth >= 1 && g.outHeight > 0 && g.outWidth > 0 && g.inHeight > 0 && g.inWidth > 0
}

/// Folds every window of each plane of `g` (`separablePoolFits`) into the output; with `divisors` (AveragePool: cells
/// counted per output row and per output column) each sum is divided by their product, 0 where that is 0. Output
/// rows of all planes are split across the compute pool.
@inline(__always)
func separablePool<Fold: WindowFold>(_ g: PoolGeometry, _: Fold.Type, input: UnsafePointer<Float>, output: UnsafeMutablePointer<Float>,
                                     divisors: (rows: [Int], columns: [Int])? = nil) {
    guard g.planes > 0, separablePoolFits(g) else { return }
    let kh = g.kernelHeight, kw = g.kernelWidth, sw = g.strideWidth, outW = g.outWidth, outH = g.outHeight, inW = g.inWidth
    let vectorWidth = (outW + 15) & ~15
    // The line: padLeft identity cells, the input rows' column folds, then the identity for every column a window (or
    // a full vector of windows) reaches past the input (ceil_mode overhang, right pad).
    let lineCount = max(g.padLeft + inW, sw * vectorWidth + kw + 32) + 16
    let inPlane = g.inHeight * inW, outPlane = outH * outW
    parallelRanges(g.planes * outH, minimumChunk: max(1, 8192 / max(1, kh * inW))) { range in
        // Scratch: the line, one vector for a row's last partial outputs, and the column counts as floats.
        let line = allocateFloats(lineCount + 16 + vectorWidth)
        defer { line.deallocate() }
        line.initialize(repeating: Fold.identity, count: lineCount)
        let tail = line + lineCount, columnCounts = tail + 16, interior = line + g.padLeft
        if let divisors {
            for x in 0..<vectorWidth { columnCounts[x] = x < outW ? Float(divisors.columns[x]) : 1 }
        }
        var plane = range.lowerBound / outH, y = range.lowerBound - plane * outH
        for _ in range {
            let out = output + plane * outPlane + y * outW
            let top = y * g.strideHeight - g.padTop
            let first = max(0, top), end = min(g.inHeight, top + kh)
            if first < end {
                foldRows(input + plane * inPlane + first * inW, rows: end - first, width: inW, into: interior, Fold.self)
            } else {
                // A window wholly in the padding: its row is all identity (-infinity for MaxPool, as ONNX specifies).
                interior.update(repeating: Fold.identity, count: inW)
            }
            let rowCount = FloatVector(repeating: divisors.map { Float($0.rows[y]) } ?? 1)
            var x = 0
            while x < outW {
                var acc = FloatVector(repeating: Fold.identity)
                if sw == 2 {
                    var j = 0
                    while j < kw {
                        // Columns 2x + j and 2x + j + 1 of 16 windows: the even and odd lanes of one 32-float load.
                        let v = (line + 2 * x + j).vector(SIMD32<Float>.self)
                        acc = Fold.combine(acc, v.evenHalf)
                        if j + 1 < kw { acc = Fold.combine(acc, v.oddHalf) }
                        j += 2
                    }
                } else {
                    for j in 0..<kw { acc = Fold.combine(acc, (line + x + j).vector(FloatVector.self)) }
                }
                if divisors != nil {
                    // Exact division by the cell count, as the reference divides (no reciprocal).
                    let divisor = (columnCounts + x).vector(FloatVector.self) * rowCount
                    acc = (acc / divisor).replacing(with: 0, where: divisor .== 0)
                }
                if x + 16 <= outW {
                    (out + x).store(acc)
                } else {
                    tail.store(acc)
                    for i in 0..<(outW - x) { out[x + i] = tail[i] }
                }
                x += 16
            }
            y += 1
            if y == outH { y = 0; plane += 1 }
        }
    }
}

/// `into[x]` = the fold of `rows` (>= 1) rows of `width` floats, `width` floats apart, starting at `source`.
@inline(__always)
private func foldRows<Fold: WindowFold>(_ source: UnsafePointer<Float>, rows: Int, width: Int, into: UnsafeMutablePointer<Float>,
                                        _: Fold.Type) {
    var x = 0
    while x + 16 <= width {
        var acc = (source + x).vector(FloatVector.self)
        for r in 1..<max(1, rows) { acc = Fold.combine(acc, (source + r * width + x).vector(FloatVector.self)) }
        (into + x).store(acc)
        x += 16
    }
    guard x < width else { return }
    if width >= 16 {
        // The last 1-15 columns (planes of 111, 55, 27 columns) as the row's last 16, again: in bounds, no scalar tail.
        x = width - 16
        var acc = (source + x).vector(FloatVector.self)
        for r in 1..<max(1, rows) { acc = Fold.combine(acc, (source + r * width + x).vector(FloatVector.self)) }
        (into + x).store(acc)
        return
    }
    while x < width {
        var acc = source[x]
        for r in 1..<max(1, rows) { acc = Fold.combine(acc, source[r * width + x]) }
        into[x] = acc
        x += 1
    }
}
