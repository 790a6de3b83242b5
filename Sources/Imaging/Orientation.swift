/// Applies an EXIF orientation (1...8) so the image is upright, matching Pillow's `ImageOps.exif_transpose`.
enum Orientation {
    /// True when the orientation swaps width and height (5...8).
    static func swapsAxes(_ orientation: Int) -> Bool { orientation >= 5 && orientation <= 8 }

    /// The upright image; orientation 1 (or anything unknown) returns the input unchanged.
    static func apply(_ orientation: Int, to image: RGBImage) -> RGBImage {
        guard (2...8).contains(orientation) else { return image }
        let w = image.width, h = image.height
        let outW = swapsAxes(orientation) ? h : w
        let outH = swapsAxes(orientation) ? w : h
        // Source coordinate of output pixel (x, y) is affine: (sx, sy) = (x0 + xdx*x + xdy*y, y0 + ydx*x + ydy*y).
        let (x0, xdx, xdy, y0, ydx, ydy): (Int, Int, Int, Int, Int, Int)
        switch orientation {
        case 2: (x0, xdx, xdy, y0, ydx, ydy) = (w - 1, -1, 0, 0, 0, 1)          // mirror horizontally
        case 3: (x0, xdx, xdy, y0, ydx, ydy) = (w - 1, -1, 0, h - 1, 0, -1)     // rotate 180
        case 4: (x0, xdx, xdy, y0, ydx, ydy) = (0, 1, 0, h - 1, 0, -1)          // mirror vertically
        case 5: (x0, xdx, xdy, y0, ydx, ydy) = (0, 0, 1, 0, 1, 0)               // transpose
        case 6: (x0, xdx, xdy, y0, ydx, ydy) = (0, 0, 1, h - 1, -1, 0)          // rotate 90 clockwise
        case 7: (x0, xdx, xdy, y0, ydx, ydy) = (w - 1, 0, -1, h - 1, -1, 0)     // transverse
        default: (x0, xdx, xdy, y0, ydx, ydy) = (w - 1, 0, -1, 0, 1, 0)         // 8: rotate 90 counter-clockwise
        }
        // In byte offsets: one output step in x or y moves the source pointer by a constant.
        let stepX = (ydx * w + xdx) * 3, stepY = (ydy * w + xdy) * 3
        let pixels = [UInt8](unsafeUninitializedCapacity: w * h * 3) { out, initialized in
            image.pixels.withUnsafeBufferPointer { src in
                let base = src.baseAddress!, dst = out.baseAddress!
                for y in 0..<outH {
                    var s = (y0 * w + x0) * 3 + y * stepY
                    var d = y * outW * 3
                    for _ in 0..<outW {
                        dst[d] = base[s]; dst[d + 1] = base[s + 1]; dst[d + 2] = base[s + 2]
                        s += stepX
                        d += 3
                    }
                }
            }
            initialized = w * h * 3
        }
        return RGBImage(width: outW, height: outH, pixels: pixels)
    }
}
