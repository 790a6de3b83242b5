import Tensor

/// Resizes, crops or pads, converts channels, normalises and lays out `image` as one model input:
/// a tensor of `config.outputShape` and `config.dtype`.
public func preprocess(_ image: RGBImage, config: PreprocessConfig) throws -> Tensor {
    try config.validate()
    var tensor = Tensor(uninitialized: config.dtype, shape: config.outputShape)
    try tensor.withUnsafeMutableBytes { try preprocess(image, config: config, into: $0) }
    return tensor
}

/// Like `preprocess(_:config:)` but writes straight into `destination` (exactly `config.outputByteCount`
/// bytes, e.g. one row of a batch tensor), so batching needs no extra copy.
public func preprocess(_ image: RGBImage, config: PreprocessConfig, into destination: UnsafeMutableRawBufferPointer) throws {
    try config.validate()
    guard destination.count == config.outputByteCount else {
        throw ImagingError.invalidConfig("destination: expected \(config.outputByteCount) bytes, got \(destination.count)")
    }
    guard image.width > 0, image.height > 0 else { throw ImagingError.corrupt("image has zero size") }
    Preprocessor(config: config, sourceWidth: image.width, sourceHeight: image.height).run(image, into: destination)
}

/// Decodes `bytes` (PNG or JPEG) and preprocesses it, letting JPEG decoding scale down in the IDCT first.
public func decodeAndPreprocess(_ bytes: [UInt8], config: PreprocessConfig,
                                maxPixels: Int = DecodeOptions.defaultMaxPixels,
                                maxBytes: Int = DecodeOptions.defaultMaxBytes) throws -> Tensor {
    try config.validate()
    var tensor = Tensor(uninitialized: config.dtype, shape: config.outputShape)
    try bytes.withUnsafeBytes { source in
        try tensor.withUnsafeMutableBytes { try decodeAndPreprocess(source, config: config, maxPixels: maxPixels, maxBytes: maxBytes, into: $0) }
    }
    return tensor
}

/// Decodes `bytes` and writes the preprocessed image into `destination` (`config.outputByteCount` bytes,
/// e.g. one row of a batch tensor).
public func decodeAndPreprocess(_ bytes: UnsafeRawBufferPointer, config: PreprocessConfig,
                                maxPixels: Int = DecodeOptions.defaultMaxPixels,
                                maxBytes: Int = DecodeOptions.defaultMaxBytes,
                                into destination: UnsafeMutableRawBufferPointer) throws {
    try config.validate()
    var options = DecodeOptions(maxPixels: maxPixels, background: (config.background[0], config.background[1], config.background[2]),
                                sizeHint: config)
    options.maxBytes = maxBytes
    try preprocess(try ImageDecoder.decode(bytes, options: options), config: config, into: destination)
}

/// One preprocessing run: geometry and taps for a given source size, then two separable passes.
struct Preprocessor {
    let config: PreprocessConfig
    let geometry: ResizeGeometry
    let horizontal: ResampleWeights
    let vertical: ResampleWeights

    init(config: PreprocessConfig, sourceWidth: Int, sourceHeight: Int) {
        self.config = config
        let g = ResizeGeometry(sourceWidth: sourceWidth, sourceHeight: sourceHeight, config: config)
        geometry = g
        let kernel: ResampleWeights.Kernel
        switch config.interpolation {
        case .bilinear: kernel = .triangle
        case .area: kernel = .box
        case .nearest: kernel = .nearest
        }
        horizontal = ResampleWeights(inSize: sourceWidth, outSize: g.resizedWidth, first: g.cropX, count: g.regionWidth,
                                     kernel: kernel, antialias: config.antialias)
        vertical = ResampleWeights(inSize: sourceHeight, outSize: g.resizedHeight, first: g.cropY, count: g.regionHeight,
                                   kernel: kernel, antialias: config.antialias)
    }

    func run(_ image: RGBImage, into destination: UnsafeMutableRawBufferPointer) {
        let c = config.channels
        image.pixels.withUnsafeBufferPointer { rgb in
            if c == 1 {
                // Luma first, like Pillow's convert("L") before resize: a third of the resampling work.
                let count = image.width * image.height
                let gray = UnsafeMutablePointer<UInt8>.allocate(capacity: count)
                defer { gray.deallocate() }
                ColorConversion.luma(rgb.baseAddress!, count: count, into: gray)
                resample(source: gray, width: image.width, channels: 1, into: destination)
            } else {
                resample(source: rgb.baseAddress!, width: image.width, channels: 3, into: destination)
            }
        }
    }

    /// Horizontal pass over the needed source rows into floats, then per output row a vertical pass and the write.
    private func resample(source: UnsafePointer<UInt8>, width: Int, channels c: Int, into destination: UnsafeMutableRawBufferPointer) {
        let rows = vertical.inputRange
        let outW = geometry.regionWidth
        let rowFloats = outW * c
        let temp = UnsafeMutablePointer<Float>.allocate(capacity: max(rows.count * rowFloats, 1))
        defer { temp.deallocate() }
        horizontalPass(source: source, width: width, channels: c, rows: rows, into: temp)

        let line = UnsafeMutablePointer<Float>.allocate(capacity: max(rowFloats, 1))
        defer { line.deallocate() }
        fillPadding(destination)
        let (gain, offset) = affine()
        for y in 0..<geometry.regionHeight {
            line.initialize(repeating: 0, count: rowFloats)
            let start = vertical.starts[y] - rows.lowerBound
            let wBase = y * vertical.maxTaps
            for k in 0..<vertical.counts[y] {
                let w = vertical.weights[wBase + k]
                let src = temp + (start + k) * rowFloats
                for i in 0..<rowFloats { line[i] += w * src[i] }
            }
            write(line: line, row: y, channels: c, gain: gain, offset: offset, into: destination)
        }
    }

    private func horizontalPass(source: UnsafePointer<UInt8>, width: Int, channels c: Int, rows: Range<Int>,
                                into temp: UnsafeMutablePointer<Float>) {
        let outW = geometry.regionWidth
        let taps = horizontal.maxTaps
        let wide = UnsafeMutablePointer<SIMD4<Float>>.allocate(capacity: c == 3 ? width : 1)
        defer { wide.deallocate() }
        horizontal.weights.withUnsafeBufferPointer { weights in
        horizontal.starts.withUnsafeBufferPointer { starts in
        horizontal.counts.withUnsafeBufferPointer { counts in
            for (r, y) in rows.enumerated() {
                let src = source + y * width * c
                let dst = temp + r * outW * c
                if c == 3 {
                    // Widen the row to one SIMD4 per pixel once, so each tap is a single vector multiply-add.
                    for x in 0..<width {
                        wide[x] = SIMD4<Float>(Float(src[x * 3]), Float(src[x * 3 + 1]), Float(src[x * 3 + 2]), 0)
                    }
                    for x in 0..<outW {
                        var acc = SIMD4<Float>()
                        let p = wide + starts[x]
                        let wp = weights.baseAddress! + x * taps
                        for k in 0..<counts[x] { acc += wp[k] * p[k] }
                        dst[x * 3] = acc[0]; dst[x * 3 + 1] = acc[1]; dst[x * 3 + 2] = acc[2]
                    }
                } else {
                    for x in 0..<outW {
                        var a: Float = 0
                        let p = src + starts[x]
                        let wp = weights.baseAddress! + x * taps
                        for k in 0..<counts[x] { a += wp[k] * Float(p[k]) }
                        dst[x] = a
                    }
                }
            }
        }}}
    }

    /// Per output channel: value = pixel * gain + offset, i.e. (pixel * scale - mean) / std.
    private func affine() -> (gain: [Float], offset: [Float]) {
        let c = config.channels
        var gain = [Float](), offset = [Float]()
        for ch in 0..<c {
            let mean = config.mean.count == 1 ? config.mean[0] : config.mean[ch]
            let std = config.std.count == 1 ? config.std[0] : config.std[ch]
            gain.append(config.scale / std)
            offset.append(-mean / std)
        }
        return (gain, offset)
    }

    private func fillPadding(_ destination: UnsafeMutableRawBufferPointer) {
        guard geometry.regionWidth < config.width || geometry.regionHeight < config.height else { return }
        let pad = Float(config.padValue)
        let plane = config.width * config.height
        if config.dtype == .uint8 {
            destination.initializeMemory(as: UInt8.self, repeating: config.padValue)
            return
        }
        let (gain, offset) = affine()
        let out = destination.bindMemory(to: Float.self)
        for ch in 0..<config.channels {
            let v = pad * gain[ch] + offset[ch]
            if config.layout == .nchw {
                for i in 0..<plane { out[ch * plane + i] = v }
            } else {
                for i in 0..<plane { out[i * config.channels + ch] = v }
            }
        }
    }

    /// Writes one resampled row (interleaved source channels) into the output with channel order, layout and dtype.
    private func write(line: UnsafeMutablePointer<Float>, row y: Int, channels c: Int, gain: [Float], offset: [Float],
                       into destination: UnsafeMutableRawBufferPointer) {
        let W = config.width, H = config.height
        let oy = geometry.placeY + y, ox = geometry.placeX
        let n = geometry.regionWidth
        let bgr = config.channelOrder == .bgr
        for ch in 0..<c {
            let srcCh = bgr ? 2 - ch : ch
            let base: Int, step: Int
            if config.layout == .nchw { base = (ch * H + oy) * W + ox; step = 1 }
            else { base = (oy * W + ox) * c + ch; step = c }
            if config.dtype == .uint8 {
                let out = destination.bindMemory(to: UInt8.self).baseAddress! + base
                for x in 0..<n {
                    let v = line[x * c + srcCh]
                    out[x * step] = UInt8(min(max(v, 0), 255).rounded())
                }
            } else {
                let out = destination.bindMemory(to: Float.self).baseAddress! + base
                let g = gain[ch], o = offset[ch]
                for x in 0..<n { out[x * step] = line[x * c + srcCh] * g + o }
            }
        }
    }
}
