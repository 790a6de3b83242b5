import CKernelShim

/// MaxPool straight from the NCHW planes with the AVX-512F row kernel (`osprey_maxpool_rows_f32`): no scratch line,
/// the window folded in registers, one masked store per 16 outputs. Small planes (SqueezeNet's 55-, 27- and 13-column
/// pools) paid the separable path's per-row overhead several times over. `maxPool2DReference` is the twin.

/// Whether the row kernel runs `g` here: the CPU has its AVX-512F body, dilations are 1, the column stride is 1
/// (kernel width <= 16) or 2 (kernel width <= 4), rows of at most 1024 outputs.
func rowMaxPoolFits(_ g: PoolGeometry) -> Bool {
    osprey_float_avx512() != 0 && g.dilationHeight == 1 && g.dilationWidth == 1
        && ((g.strideWidth == 1 && g.kernelWidth <= 16) || (g.strideWidth == 2 && g.kernelWidth <= 4)) && g.outWidth <= 1024
        && g.strideHeight >= 1 && g.kernelHeight >= 1 && g.kernelWidth >= 1 && g.planes > 0 && g.outHeight > 0 && g.outWidth > 0
        && g.inHeight > 0 && g.inWidth > 0
        && [g.inHeight, g.inWidth, g.outHeight, g.outWidth, g.kernelHeight, g.kernelWidth, g.strideHeight, g.padTop, g.padLeft]
            .allSatisfy { $0 <= Int(Int32.max) / 4 }
}

/// MaxPool of `g` (`rowMaxPoolFits`) with the output rows of all planes split across the compute pool.
func rowMaxPool(_ g: PoolGeometry, input: UnsafePointer<Float>, output: UnsafeMutablePointer<Float>) {
    let rows = g.planes * g.outHeight
    // About 8k input floats read per chunk keeps the parallel region's cost small against the work.
    parallelRanges(rows, minimumChunk: max(1, 8192 / max(1, g.kernelHeight * g.inWidth))) { range in
        osprey_maxpool_rows_f32(input, output, range.lowerBound, range.count, Int32(g.inHeight), Int32(g.inWidth),
                                Int32(g.outHeight), Int32(g.outWidth), Int32(g.kernelHeight), Int32(g.kernelWidth),
                                Int32(g.strideHeight), Int32(g.strideWidth), Int32(g.padTop), Int32(g.padLeft))
    }
}
