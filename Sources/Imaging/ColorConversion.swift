/// Pixel conversions that match Pillow bit for bit (the reference most models were trained with).
enum ColorConversion {
    /// Composites interleaved RGBA onto an opaque background into RGB, with Pillow's
    /// `alpha_composite` integer arithmetic (7-bit coefficients, divide by 255 with rounding).
    static func compositeRGBA(_ rgba: UnsafePointer<UInt8>, count: Int, background: (UInt8, UInt8, UInt8),
                              into rgb: UnsafeMutablePointer<UInt8>) {
        let bg = (UInt32(background.0), UInt32(background.1), UInt32(background.2))
        for i in 0..<count {
            let s = rgba + i * 4
            let a = UInt32(s[3])
            let d = rgb + i * 3
            if a == 255 {
                d[0] = s[0]; d[1] = s[1]; d[2] = s[2]
                continue
            }
            let coef1 = a << 7
            let coef2 = 255 << 7 - coef1
            @inline(__always) func blend(_ src: UInt8, _ dst: UInt32) -> UInt8 {
                let t = UInt32(src) * coef1 + dst * coef2 + (0x80 << 7)
                return UInt8(truncatingIfNeeded: ((((t >> 8) + t) >> 8) >> 7))
            }
            d[0] = blend(s[0], bg.0)
            d[1] = blend(s[1], bg.1)
            d[2] = blend(s[2], bg.2)
        }
    }

    /// CMYK (already un-inverted: 255 = full ink) to RGB the way Pillow's `cmyk2rgb` does.
    static func cmykToRGB(_ cmyk: UnsafePointer<UInt8>, count: Int, inverted: Bool, into rgb: UnsafeMutablePointer<UInt8>) {
        let flip: UInt8 = inverted ? 255 : 0
        for i in 0..<count {
            let s = cmyk + i * 4
            let k = Int32(s[3] ^ flip)
            let nk = 255 - k
            @inline(__always) func channel(_ c: UInt8) -> UInt8 {
                let t = Int32(c ^ flip) * nk + 128
                let v = nk - (((t >> 8) + t) >> 8)
                return UInt8(clamping: v)
            }
            let d = rgb + i * 3
            d[0] = channel(s[0]); d[1] = channel(s[1]); d[2] = channel(s[2])
        }
    }

    /// ITU-R 601-2 luma, Pillow's `L` conversion: (19595 R + 38470 G + 7471 B + 0x8000) >> 16.
    static func luma(_ rgb: UnsafePointer<UInt8>, count: Int, into gray: UnsafeMutablePointer<UInt8>) {
        for i in 0..<count {
            let s = rgb + i * 3
            let v = UInt32(s[0]) &* 19595 &+ UInt32(s[1]) &* 38470 &+ UInt32(s[2]) &* 7471 &+ 0x8000
            gray[i] = UInt8(truncatingIfNeeded: v >> 16)
        }
    }
}
