/// Unfolds one group of one NCHW image into the gemm operand: col [cg*kh*kw, outRows.count*outW] with rows
/// `rowStride` apart. Row (c, ky, kx), column (y - outRows.lowerBound, x) holds
/// input[c][y*sh - pt + ky*dh][x*sw - pl + kx*dw], or 0 in the padding.
func im2col(_ g: ConvGeometry, image: UnsafePointer<Float>, firstChannel: Int, columns: UnsafeMutablePointer<Float>,
            outRows: Range<Int>? = nil, rowStride: Int? = nil) {
    let outRows = outRows ?? 0..<g.outHeight
    let ow = g.outWidth, kh = g.kernelHeight, kw = g.kernelWidth
    let rows = g.inChannelsPerGroup * kh * kw
    let plane = g.inHeight * g.inWidth
    let rowStride = rowStride ?? outRows.count * ow
    parallelRanges(rows, minimumChunk: max(1, 16_384 / max(1, outRows.count * ow))) { range in
        for row in range {
            let kx = row % kw, ky = (row / kw) % kh, c = row / (kw * kh)
            let src = image + (firstChannel + c) * plane
            let dst = columns + row * rowStride
            // Output columns whose input column falls inside the image, the same for every output row.
            let offsetX = kx * g.dilationWidth - g.padLeft
            let xLo = min(ow, offsetX >= 0 ? 0 : (-offsetX + g.strideWidth - 1) / g.strideWidth)
            let xHi = max(xLo, min(ow, offsetX > g.inWidth - 1 ? 0 : (g.inWidth - 1 - offsetX) / g.strideWidth + 1))
            for y in outRows {
                let out = dst + (y - outRows.lowerBound) * ow
                let iy = y * g.strideHeight - g.padTop + ky * g.dilationHeight
                if iy < 0 || iy >= g.inHeight {
                    out.update(repeating: 0, count: ow)
                    continue
                }
                if xLo > 0 { out.update(repeating: 0, count: xLo) }
                let srcRow = src + iy * g.inWidth
                copyStrided(from: srcRow + xLo * g.strideWidth + offsetX, stride: g.strideWidth,
                            readable: g.inWidth - (xLo * g.strideWidth + offsetX), to: out + xLo, count: xHi - xLo)
                if xHi < ow { (out + xHi).update(repeating: 0, count: ow - xHi) }
            }
        }
    }
}

/// dst[i] = src[i * stride] for i < count; vector loads are used only while they stay within `readable` floats of src.
@inline(__always)
func copyStrided(from src: UnsafePointer<Float>, stride: Int, readable: Int, to dst: UnsafeMutablePointer<Float>, count: Int) {
    if stride == 1 {
        dst.update(from: src, count: count)
        return
    }
    var i = 0
    if stride == 2 {
        while i + 16 <= count && 2 * (i + 16) <= readable {
            (dst + i).store(loadStrided16(src + 2 * i, stride: 2))
            i += 16
        }
    }
    while i < count {
        dst[i] = src[i * stride]
        i += 1
    }
}
