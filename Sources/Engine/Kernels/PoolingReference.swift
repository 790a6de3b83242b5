/// MaxPool over each plane, one output at a time (the twin `maxPool2D` is tested against); windows that fall wholly in padding yield -infinity, as ONNX specifies.
public func maxPool2DReference(_ g: PoolGeometry, input: UnsafePointer<Float>, output: UnsafeMutablePointer<Float>) {
    for p in 0..<g.planes {
        let src = input + p * g.inHeight * g.inWidth
        let dst = output + p * g.outHeight * g.outWidth
        for y in 0..<g.outHeight {
            for x in 0..<g.outWidth {
                var best = -Float.infinity
                g.window.forEachTap(y: y, x: x, inHeight: g.inHeight, inWidth: g.inWidth) { _, iy, ix in
                    best = max(best, src[iy * g.inWidth + ix])
                }
                dst[y * g.outWidth + x] = best
            }
        }
    }
}

/// AveragePool over each plane, one output at a time (the twin `averagePool2D` is tested against); `countIncludePad` divides by the window clipped to the padded input, else by the valid cells.
public func averagePool2DReference(_ g: PoolGeometry, countIncludePad: Bool, input: UnsafePointer<Float>, output: UnsafeMutablePointer<Float>) {
    for p in 0..<g.planes {
        let src = input + p * g.inHeight * g.inWidth
        let dst = output + p * g.outHeight * g.outWidth
        for y in 0..<g.outHeight {
            for x in 0..<g.outWidth {
                var sum: Float = 0
                var valid = 0
                let y0 = y * g.strideHeight - g.padTop, x0 = x * g.strideWidth - g.padLeft
                g.window.forEachTap(y: y, x: x, inHeight: g.inHeight, inWidth: g.inWidth) { _, iy, ix in
                    sum += src[iy * g.inWidth + ix]
                    valid += 1
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

/// Mean of each of `planes` planes of `planeSize` floats, plainly summed (the twin of `globalAveragePool`).
public func globalAveragePoolReference(planes: Int, planeSize: Int, input: UnsafePointer<Float>, output: UnsafeMutablePointer<Float>) {
    for p in 0..<planes {
        var sum: Float = 0
        for i in 0..<planeSize { sum += input[p * planeSize + i] }
        output[p] = sum / Float(planeSize)
    }
}

/// Maximum of each of `planes` planes of `planeSize` floats (the twin of `globalMaxPool`).
public func globalMaxPoolReference(planes: Int, planeSize: Int, input: UnsafePointer<Float>, output: UnsafeMutablePointer<Float>) {
    for p in 0..<planes {
        var best = -Float.infinity
        for i in 0..<planeSize { best = max(best, input[p * planeSize + i]) }
        output[p] = best
    }
}
