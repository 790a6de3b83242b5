/// The concrete sizes of one 2-D pooling call on NCHW data (1-D pooling uses height 1).
public struct PoolGeometry: Sendable, Hashable {
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
    /// Window height.
    public var kernelHeight: Int
    /// Window width.
    public var kernelWidth: Int
    /// Vertical stride.
    public var strideHeight: Int
    /// Horizontal stride.
    public var strideWidth: Int
    /// Vertical dilation (MaxPool only).
    public var dilationHeight: Int
    /// Horizontal dilation (MaxPool only).
    public var dilationWidth: Int
    /// Padding above.
    public var padTop: Int
    /// Padding left.
    public var padLeft: Int
    /// Padding below (counted by `countIncludePad`).
    public var padBottom: Int
    /// Padding right (counted by `countIncludePad`).
    public var padRight: Int

    /// A geometry value.
    public init(planes: Int, inHeight: Int, inWidth: Int, outHeight: Int, outWidth: Int, kernelHeight: Int, kernelWidth: Int,
                strideHeight: Int = 1, strideWidth: Int = 1, dilationHeight: Int = 1, dilationWidth: Int = 1,
                padTop: Int = 0, padLeft: Int = 0, padBottom: Int = 0, padRight: Int = 0) {
        self.planes = planes
        self.inHeight = inHeight
        self.inWidth = inWidth
        self.outHeight = outHeight
        self.outWidth = outWidth
        self.kernelHeight = kernelHeight
        self.kernelWidth = kernelWidth
        self.strideHeight = strideHeight
        self.strideWidth = strideWidth
        self.dilationHeight = dilationHeight
        self.dilationWidth = dilationWidth
        self.padTop = padTop
        self.padLeft = padLeft
        self.padBottom = padBottom
        self.padRight = padRight
    }
}

/// MaxPool over each plane; windows that fall wholly in padding yield -infinity, as ONNX specifies.
public func maxPool2D(_ g: PoolGeometry, input: UnsafePointer<Float>, output: UnsafeMutablePointer<Float>) {
    for p in 0..<g.planes {
        let src = input + p * g.inHeight * g.inWidth
        let dst = output + p * g.outHeight * g.outWidth
        for y in 0..<g.outHeight {
            for x in 0..<g.outWidth {
                var best = -Float.infinity
                for ky in 0..<g.kernelHeight {
                    let iy = y * g.strideHeight - g.padTop + ky * g.dilationHeight
                    if iy < 0 || iy >= g.inHeight { continue }
                    for kx in 0..<g.kernelWidth {
                        let ix = x * g.strideWidth - g.padLeft + kx * g.dilationWidth
                        if ix < 0 || ix >= g.inWidth { continue }
                        best = max(best, src[iy * g.inWidth + ix])
                    }
                }
                dst[y * g.outWidth + x] = best
            }
        }
    }
}

/// AveragePool over each plane; `countIncludePad` divides by the window clipped to the padded input, else by the valid cells.
public func averagePool2D(_ g: PoolGeometry, countIncludePad: Bool, input: UnsafePointer<Float>, output: UnsafeMutablePointer<Float>) {
    for p in 0..<g.planes {
        let src = input + p * g.inHeight * g.inWidth
        let dst = output + p * g.outHeight * g.outWidth
        for y in 0..<g.outHeight {
            for x in 0..<g.outWidth {
                var sum: Float = 0
                var valid = 0
                let y0 = y * g.strideHeight - g.padTop, x0 = x * g.strideWidth - g.padLeft
                for ky in 0..<g.kernelHeight {
                    let iy = y0 + ky * g.dilationHeight
                    if iy < 0 || iy >= g.inHeight { continue }
                    for kx in 0..<g.kernelWidth {
                        let ix = x0 + kx * g.dilationWidth
                        if ix < 0 || ix >= g.inWidth { continue }
                        sum += src[iy * g.inWidth + ix]
                        valid += 1
                    }
                }
                var divisor = valid
                if countIncludePad {
                    // Window clipped to the padded extent (ceil_mode windows may run past the padding).
                    let yEnd = min(y0 + (g.kernelHeight - 1) * g.dilationHeight + 1, g.inHeight + g.padBottom)
                    let xEnd = min(x0 + (g.kernelWidth - 1) * g.dilationWidth + 1, g.inWidth + g.padRight)
                    divisor = ((yEnd - y0 + g.dilationHeight - 1) / g.dilationHeight) * ((xEnd - x0 + g.dilationWidth - 1) / g.dilationWidth)
                }
                dst[y * g.outWidth + x] = divisor > 0 ? sum / Float(divisor) : 0
            }
        }
    }
}
