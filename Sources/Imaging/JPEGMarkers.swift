/// What Osprey needs from a JPEG's marker segments before the image data: EXIF orientation and the Adobe
/// APP14 marker (whose presence means CMYK is stored inverted, Photoshop's convention).
struct JPEGMarkers: Equatable {
    /// EXIF orientation 1...8 (1 when absent or unreadable).
    var orientation = 1
    /// True when an Adobe APP14 segment is present.
    var adobe = false
    /// Offset of the first SOS marker (0 when none was reached).
    var startOfScan = 0
    /// True when an EOI marker (FF D9) follows the first SOS: the entropy-coded data is complete.
    var hasEndOfImage = false

    /// Scans segments from SOI up to the first SOS; malformed segments end the scan (the decoder reports them).
    static func scan(_ bytes: UnsafeRawBufferPointer) -> JPEGMarkers {
        var result = JPEGMarkers()
        var foundOrientation = false
        var i = 2
        while i + 4 <= bytes.count {
            guard bytes[i] == 0xFF else { break }
            let marker = bytes[i + 1]
            if marker == 0xFF { i += 1; continue }  // fill byte
            if marker == 0xD8 || marker == 0x01 || (0xD0...0xD7).contains(marker) { i += 2; continue }
            if marker == 0xDA { result.startOfScan = i; break }
            if marker == 0xD9 { break }
            let length = Int(bytes[i + 2]) << 8 | Int(bytes[i + 3])
            guard length >= 2, i + 2 + length <= bytes.count else { break }
            let payload = UnsafeRawBufferPointer(rebasing: bytes[(i + 4)..<(i + 2 + length)])
            if marker == 0xE1 && !foundOrientation, let o = exifOrientation(payload) {
                result.orientation = o
                foundOrientation = true
            } else if marker == 0xEE && payload.count >= 5 && payload.prefix(5).elementsEqual("Adobe".utf8) {
                result.adobe = true
            }
            i += 2 + length
        }
        if result.startOfScan > 0 {
            // Inside entropy-coded data 0xFF is always followed by 0x00 or a restart marker, so the last FF D9
            // after SOS is the real end marker; search backwards because trailing bytes after EOI are common.
            var j = bytes.count - 2
            while j > result.startOfScan {
                if bytes[j] == 0xFF && bytes[j + 1] == 0xD9 { result.hasEndOfImage = true; break }
                j -= 1
            }
        }
        return result
    }

    /// The orientation tag (0x0112) of IFD0 in an APP1 `Exif\0\0` payload, or nil when absent or invalid.
    static func exifOrientation(_ payload: UnsafeRawBufferPointer) -> Int? {
        let header: [UInt8] = [0x45, 0x78, 0x69, 0x66, 0, 0]
        guard payload.count >= 14, payload.prefix(6).elementsEqual(header) else { return nil }
        let tiff = UnsafeRawBufferPointer(rebasing: payload[6...])
        let little: Bool
        switch (tiff[0], tiff[1]) {
        case (0x49, 0x49): little = true
        case (0x4D, 0x4D): little = false
        default: return nil
        }
        func u16(_ at: Int) -> Int? {
            guard at >= 0, at + 2 <= tiff.count else { return nil }
            return little ? Int(tiff[at]) | Int(tiff[at + 1]) << 8 : Int(tiff[at]) << 8 | Int(tiff[at + 1])
        }
        func u32(_ at: Int) -> Int? {
            guard let a = u16(at), let b = u16(at + 2) else { return nil }
            return little ? a | b << 16 : a << 16 | b
        }
        guard u16(2) == 42, let ifd = u32(4), let entries = u16(ifd) else { return nil }
        for e in 0..<entries {
            let entry = ifd + 2 + e * 12
            guard let tag = u16(entry) else { return nil }
            if tag == 0x0112 {
                guard let type = u16(entry + 2) else { return nil }
                // SHORT is the specified type; tolerate LONG written by some tools.
                let value: Int?
                switch type {
                case 3: value = u16(entry + 8)
                case 4: value = u32(entry + 8)
                default: value = nil
                }
                if let v = value, (1...8).contains(v) { return v }
                return nil
            }
        }
        return nil
    }
}
