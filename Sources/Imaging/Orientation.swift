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
        // Source coordinate of output pixel (x, y).
        let map: (Int, Int) -> (Int, Int)
        switch orientation {
        case 2: map = { x, y in (w - 1 - x, y) }                 // mirror horizontally
        case 3: map = { x, y in (w - 1 - x, h - 1 - y) }         // rotate 180
        case 4: map = { x, y in (x, h - 1 - y) }                 // mirror vertically
        case 5: map = { x, y in (y, x) }                         // transpose
        case 6: map = { x, y in (y, h - 1 - x) }                 // rotate 90 clockwise
        case 7: map = { x, y in (w - 1 - y, h - 1 - x) }         // transverse
        default: map = { x, y in (w - 1 - y, x) }                // 8: rotate 90 counter-clockwise
        }
        let pixels = [UInt8](unsafeUninitializedCapacity: w * h * 3) { out, initialized in
            image.pixels.withUnsafeBufferPointer { src in
                for y in 0..<outH {
                    for x in 0..<outW {
                        let (sx, sy) = map(x, y)
                        let s = (sy * w + sx) * 3, d = (y * outW + x) * 3
                        out[d] = src[s]; out[d + 1] = src[s + 1]; out[d + 2] = src[s + 2]
                    }
                }
            }
            initialized = w * h * 3
        }
        return RGBImage(width: outW, height: outH, pixels: pixels)
    }
}
