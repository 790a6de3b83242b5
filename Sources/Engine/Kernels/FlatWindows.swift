/// Scratch layout that turns a 2-D sliding window (kernel kh x kw, equal strides 1 or 2, dilations, pads) over one
/// plane into a 1-D filter with contiguous 16-lane loads, shared by the depthwise convolution and the pools.
///
/// The plane is copied into a bordered scratch plane P (pads filled with the caller's value; P also covers windows that
/// run past the pads, as ceil_mode pools do). At stride 1, output (y, x) tap (ky, kx) reads P[(y*PW + x) + ky*dh*PW + kx*dw]:
/// a flat index j = y*PW + x plus a per-tap offset. At stride 2, P is split into its four (row, column) parity planes of
/// width SW, and tap (ky, kx) reads parity plane (ky*dh % 2, kx*dw % 2) at j + (ky*dh / 2)*SW + kx*dw / 2 with j = y*SW + x.
/// Either way the flat outputs j < flatCount are computed in full vectors and columns x >= outWidth are dropped.
struct FlatWindowLayout {
    let inHeight: Int, inWidth: Int, padTop: Int, padLeft: Int
    let outHeight: Int, outWidth: Int
    let stride: Int
    let paddedWidth: Int
    let phaseHeight: Int, phaseWidth: Int, phaseStride: Int
    /// Distance between output rows in the flat result.
    let rowWidth: Int
    /// Flat outputs computed, a multiple of 16.
    let flatCount: Int
    /// Floats of P (with room for every over-read).
    let paddedCount: Int
    /// Floats of the parity planes (0 at stride 1).
    let phaseCount: Int
    /// Per tap (ky * kw + kx): floats from the start of scratch to where the tap reads for j = 0.
    let tapOffsets: [Int]

    /// nil unless the strides are equal and 1 or 2.
    init?(inHeight: Int, inWidth: Int, outHeight: Int, outWidth: Int, window w: SlidingWindow) {
        let (kernelHeight, kernelWidth, dilationHeight, dilationWidth) = (w.kernelHeight, w.kernelWidth, w.dilationHeight, w.dilationWidth)
        let (strideHeight, padTop, padLeft, padBottom, padRight) = (w.strideHeight, w.padTop, w.padLeft, w.padBottom, w.padRight)
        guard strideHeight == w.strideWidth, strideHeight == 1 || strideHeight == 2, outHeight > 0, outWidth > 0 else { return nil }
        self.inHeight = inHeight
        self.inWidth = inWidth
        self.padTop = padTop
        self.padLeft = padLeft
        self.outHeight = outHeight
        self.outWidth = outWidth
        stride = strideHeight
        let paddedHeight = max(padTop + inHeight + padBottom, (outHeight - 1) * stride + (kernelHeight - 1) * dilationHeight + 1)
        paddedWidth = max(padLeft + inWidth + padRight, (outWidth - 1) * stride + (kernelWidth - 1) * dilationWidth + 1)
        phaseHeight = (paddedHeight + 1) / 2
        phaseWidth = (paddedWidth + 1) / 2
        phaseStride = (phaseHeight + 1) * phaseWidth + vectorReadSlack
        rowWidth = stride == 2 ? phaseWidth : paddedWidth
        flatCount = (outHeight * rowWidth + 15) & ~15
        paddedCount = (2 * phaseHeight + 2) * paddedWidth + flatCount + 2 * vectorReadSlack
        phaseCount = stride == 2 ? 4 * phaseStride : 0
        var offsets: [Int] = []
        for ky in 0..<kernelHeight {
            for kx in 0..<kernelWidth {
                let r = ky * dilationHeight, c = kx * dilationWidth
                offsets.append(stride == 2
                    ? paddedCount + ((r % 2) * 2 + c % 2) * phaseStride + (r / 2) * phaseWidth + c / 2
                    : r * paddedWidth + c)
            }
        }
        tapOffsets = offsets
    }

    /// Floats of scratch one thread needs: P, the parity planes and the flat result.
    var scratchCount: Int { paddedCount + phaseCount + flatCount }

    /// Fills the planes the filter reads with the border value (once per scratch; `load` rewrites only the interior):
    /// P at stride 1, only the parity planes at stride 2 (P is never written nor read there, and filling it doubled
    /// the fill).
    func prepare(_ scratch: UnsafeMutablePointer<Float>, fill: Float) {
        if stride == 2 {
            (scratch + paddedCount).initialize(repeating: fill, count: phaseCount)
        } else {
            scratch.initialize(repeating: fill, count: paddedCount)
        }
    }

    /// Where the flat result lives in scratch.
    func flat(_ scratch: UnsafeMutablePointer<Float>) -> UnsafeMutablePointer<Float> { scratch + paddedCount + phaseCount }

    /// Copies one input plane into P, or at stride 2 straight into its parity planes (the filter reads only those).
    ///
    /// Only interior positions are written, so the borders `prepare` filled stay valid for every plane.
    func load(_ plane: UnsafePointer<Float>, into scratch: UnsafeMutablePointer<Float>) {
        guard stride == 2 else {
            // Vector copies inline: a memmove call per row of 7-56 floats cost as much as the copy. Rows of 56, 28 and
            // 14 floats (MobileNet planes) end in 8- and 4-float steps rather than up to 14 scalar copies.
            for y in 0..<inHeight {
                let dst = scratch + (padTop + y) * paddedWidth + padLeft, src = plane + y * inWidth
                var x = 0
                while x + 16 <= inWidth { (dst + x).store((src + x).vector(SIMD16<Float>.self)); x += 16 }
                if x + 8 <= inWidth { (dst + x).store((src + x).vector(SIMD8<Float>.self)); x += 8 }
                if x + 4 <= inWidth { (dst + x).store((src + x).vector(SIMD4<Float>.self)); x += 4 }
                while x < inWidth { dst[x] = src[x]; x += 1 }
            }
            return
        }
        // Input column x sits at padded column x + padLeft: parity plane (x + padLeft) % 2, index (x + padLeft) / 2.
        let phases = scratch + paddedCount
        let evens = (inWidth + 1) / 2, odds = inWidth / 2
        for y in 0..<inHeight {
            let r = padTop + y
            let row = phases + (r % 2) * 2 * phaseStride + (r / 2) * phaseWidth
            let evenTarget = row + (padLeft % 2) * phaseStride + padLeft / 2
            let oddTarget = row + ((padLeft + 1) % 2) * phaseStride + (padLeft + 1) / 2
            let src = plane + y * inWidth
            var k = 0
            while 2 * k + 32 <= inWidth {
                let v = (src + 2 * k).vector(SIMD32<Float>.self)
                (evenTarget + k).store(v.evenHalf)
                (oddTarget + k).store(v.oddHalf)
                k += 16
            }
            // Narrow planes (28 and 14 columns in MobileNet-style stride-2 layers) would otherwise split scalar.
            while 2 * k + 16 <= inWidth {
                let v = (src + 2 * k).vector(SIMD16<Float>.self)
                (evenTarget + k).store(v.evenHalf)
                (oddTarget + k).store(v.oddHalf)
                k += 8
            }
            for i in k..<evens { evenTarget[i] = src[2 * i] }
            for i in k..<odds { oddTarget[i] = src[2 * i + 1] }
        }
    }

    /// Tap read pointers for j = 0.
    func bases(_ scratch: UnsafeMutablePointer<Float>) -> [UnsafePointer<Float>] {
        tapOffsets.map { UnsafePointer(scratch + $0) }
    }
}

/// The flat result's 16-lane chunks as output positions: chunk i's lanes that are outputs (rows inside the plane,
/// columns inside the width) as `masks[i]`, and where the first of them lands in the compact output plane. The plane's
/// rows are contiguous, so a chunk's output lanes, packed in order, are the outputs that follow `destinations[i]`.
struct FlatChunks {
    /// Bit l of masks[i]: flat output 16i + l is an output.
    let masks: [UInt16]
    /// Outputs in the chunks before chunk i.
    let destinations: [Int]

    init(_ layout: FlatWindowLayout) {
        // Row by row, a run of bits per chunk the row touches (built per call: a division per lane cost 0.7% of RegNetY).
        var masks = [UInt16](repeating: 0, count: layout.flatCount / 16)
        for y in 0..<layout.outHeight {
            var j = y * layout.rowWidth
            let end = j + layout.outWidth
            while j < end {
                let chunk = j / 16, low = j % 16, high = min(16, end - chunk * 16)
                masks[chunk] |= UInt16(truncatingIfNeeded: (1 << high) - (1 << low))
                j = chunk * 16 + high
            }
        }
        var destinations = [Int](repeating: 0, count: masks.count)
        var written = 0
        for chunk in masks.indices {
            destinations[chunk] = written
            written += masks[chunk].nonzeroBitCount
        }
        self.masks = masks
        self.destinations = destinations
    }
}
