import CKernelShim
import Testing
@testable import Engine
import TestSupport

/// Runs the packed convolution and its reference twin on the same random data and compares them. With `imageGap`
/// the output images are written `imageGap` floats apart beyond their size (a window of a wider Concat buffer): the
/// gaps must stay untouched. `unitStride` packs Winograd filters too. `inputScale` multiplies each input plane by a
/// per-image, per-channel factor in the kernel, against the reference on the scaled input.
private func checkConvolution(_ g: ConvGeometry, activation: Activation, withBias: Bool, withResidual: Bool, imageGap: Int? = nil,
                              unitStride: Bool = false, inputScale: Bool = false, inputFloor: Float? = nil, rng: inout SeededGenerator,
                              sourceLocation: SourceLocation = #_sourceLocation) {
    let input = rng.floats(g.batch * g.inChannels * g.inHeight * g.inWidth)
    let plane = g.inHeight * g.inWidth
    let scale = inputScale ? rng.floats(g.batch * g.inChannels) : nil
    // With `inputFloor`, a per-image, per-channel addend too, then the floor (a folded BatchNormalization + Relu).
    let shift = inputFloor == nil ? nil : rng.floats(g.batch * g.inChannels)
    var scaledInput = scale.map { s in input.indices.map { input[$0] * s[$0 / plane] } } ?? input
    if let shift, let inputFloor { scaledInput = scaledInput.indices.map { max(scaledInput[$0] + shift[$0 / plane], inputFloor) } }
    let weights = rng.floats(g.outChannels * g.inChannelsPerGroup * g.kernelHeight * g.kernelWidth)
    let bias = withBias ? rng.floats(g.outChannels) : nil
    let image = g.outChannels * g.outHeight * g.outWidth, outCount = g.batch * image
    let residual = withResidual ? rng.floats(outCount) : nil
    let expected = convolutionReferenceOutput(g, input: scaledInput, weights: weights, bias: bias, residual: residual, activation: activation)
    let stride = image + (imageGap ?? 0)
    var actual = [Float](repeating: .nan, count: g.batch * stride)
    let packed = weights.withUnsafeBufferPointer { w in
        PackedConvolution(weights: w, bias: bias?.withUnsafeBufferPointer { $0 }, outChannels: g.outChannels, inChannels: g.inChannels,
                          kernelHeight: g.kernelHeight, kernelWidth: g.kernelWidth, groups: g.groups, activation: activation,
                          unitStride: unitStride)
    }
    #expect(!inputScale || packed.scalesInputChannels(g), "\(g): no kernel takes the input scale", sourceLocation: sourceLocation)
    input.withUnsafeBufferPointer { i in
        (residual ?? []).withUnsafeBufferPointer { r in
            (scale ?? []).withUnsafeBufferPointer { sp in
                (shift ?? []).withUnsafeBufferPointer { hp in
                    actual.withUnsafeMutableBufferPointer { o in
                        packed.run(g, input: i.baseAddress!, output: o.baseAddress!, residual: residual == nil ? nil : r.baseAddress,
                                   outputImageStride: imageGap == nil ? nil : stride, inputChannelScale: scale == nil ? nil : sp.baseAddress,
                                   inputShift: shift == nil ? nil : InputShift(add: hp.baseAddress!, floor: inputFloor ?? 0))
                    }
                }
            }
        }
    }
    let images = (0..<g.batch).flatMap { actual[($0 * stride)..<($0 * stride + image)] }
    expectClose(images, expected, "\(g) \(activation) bias \(withBias) residual \(withResidual)", sourceLocation: sourceLocation)
    let gaps = (0..<g.batch).flatMap { actual[($0 * stride + image)..<(($0 + 1) * stride)] }
    let untouched = gaps.allSatisfy { $0.isNaN }
    #expect(untouched, "\(g): a write between the output images", sourceLocation: sourceLocation)
}

@Suite struct KernelConvolutionTests {
    /// Stride-2 depthwise 3x3 over rows of 14-47 columns (MobileNet's 28 and 14): every branch of the parity split.
    @Test func depthwiseStrideTwoNarrowRowsMatchReference() {
        var rng = SeededGenerator(seed: 78)
        for width in [14, 15, 16, 17, 20, 28, 31, 33, 47] {
            let g = ConvGeometry(batch: 1, inChannels: 3, inHeight: 7, inWidth: width, outChannels: 3, window: SlidingWindow(kernelHeight: 3, kernelWidth: 3,
                                 strideHeight: 2, strideWidth: 2, padTop: 1, padLeft: width % 2, padBottom: 1, padRight: 1), groups: 3)
            checkConvolution(g, activation: .clip(min: 0, max: 6), withBias: true, withResidual: false, rng: &rng)
        }
    }

    /// Depthwise with strides (2, 1) and (3, 1), as text recognisers use: the vectorised unit-width-stride row filter.
    @Test func depthwiseWithUnitWidthStrideMatchesReference() {
        var rng = SeededGenerator(seed: 77)
        for (kernel, strideHeight, dilation, width) in [(3, 2, 1, 40), (5, 2, 1, 37), (5, 3, 2, 16), (3, 2, 1, 5), (1, 2, 1, 33)] {
            let pad = kernel / 2 * dilation
            let g = ConvGeometry(batch: 2, inChannels: 3, inHeight: 9, inWidth: width, outChannels: 3, window: SlidingWindow(kernelHeight: kernel, kernelWidth: kernel,
                                 strideHeight: strideHeight, strideWidth: 1, dilationHeight: dilation, dilationWidth: dilation,
                                 padTop: pad, padLeft: pad, padBottom: pad, padRight: pad), groups: 3)
            checkConvolution(g, activation: .hardSwish, withBias: true, withResidual: kernel == 5, rng: &rng)
        }
    }

    @Test func randomizedGeometriesMatchReference() {
        var rng = SeededGenerator(seed: 2024)
        var cases = 0
        while cases < 60 {
            let kernel = [1, 3, 5, 7].randomElement(using: &rng)!
            let kind = Int.random(in: 0..<4, using: &rng)
            let groupsChannels = Int.random(in: 1...3, using: &rng)
            var g = ConvGeometry(batch: [1, 3].randomElement(using: &rng)!, inChannels: 1, inHeight: Int.random(in: 3...19, using: &rng),
                                 inWidth: Int.random(in: 3...41, using: &rng), outChannels: 1, window: SlidingWindow(kernelHeight: kernel,
                                 kernelWidth: Int.random(in: 0..<3, using: &rng) == 0 ? 1 : kernel,
                                 strideHeight: Int.random(in: 1...2, using: &rng), strideWidth: Int.random(in: 1...3, using: &rng),
                                 dilationHeight: Int.random(in: 1...2, using: &rng), dilationWidth: Int.random(in: 1...2, using: &rng),
                                 padTop: Int.random(in: 0...3, using: &rng), padLeft: Int.random(in: 0...3, using: &rng),
                                 padBottom: Int.random(in: 0...3, using: &rng), padRight: Int.random(in: 0...3, using: &rng)))
            switch kind {
            case 0: g.groups = 1; g.inChannels = Int.random(in: 1...5, using: &rng); g.outChannels = Int.random(in: 1...13, using: &rng)
            case 1: g.groups = 2; g.inChannels = 2 * groupsChannels; g.outChannels = 2 * Int.random(in: 1...3, using: &rng)
            case 2: g.inChannels = Int.random(in: 2...6, using: &rng); g.groups = g.inChannels; g.outChannels = g.inChannels
            default: g.inChannels = Int.random(in: 2...4, using: &rng); g.groups = g.inChannels; g.outChannels = 2 * g.inChannels
            }
            guard g.outHeight >= 1 && g.outWidth >= 1 else { continue }
            let activation = allActivations.randomElement(using: &rng)!
            checkConvolution(g, activation: activation, withBias: Bool.random(using: &rng), withResidual: Bool.random(using: &rng), rng: &rng)
            cases += 1
        }
    }

    /// Small groups (2-16 channels in, 1-16 out: the direct grouped filter, and the panels at unequal or larger strides),
    /// odd plane sizes, dilations and asymmetric pads, and 3-channel stems, with one and two threads.
    @Test(.serialized, arguments: [1, 2])
    func smallGroupsMatchReference(threads: Int) {
        EngineThreads.configure(threads: threads)
        defer { EngineThreads.configure(threads: 2) }
        var rng = SeededGenerator(seed: 808)
        var cases = 0
        while cases < 40 {
            let kernel = [1, 3, 3, 5].randomElement(using: &rng)!
            let stride = [1, 1, 2, 2, 3].randomElement(using: &rng)!
            let groups = Int.random(in: 2...5, using: &rng)
            let inPerGroup = [2, 3, 4, 8, 8, 16].randomElement(using: &rng)!, outPerGroup = [1, 4, 5, 8, 8, 16].randomElement(using: &rng)!
            let g = ConvGeometry(batch: Int.random(in: 1...3, using: &rng), inChannels: groups * inPerGroup,
                                 inHeight: Int.random(in: 1...17, using: &rng), inWidth: Int.random(in: 1...30, using: &rng),
                                 outChannels: groups * outPerGroup, window: SlidingWindow(kernelHeight: kernel, kernelWidth: kernel, strideHeight: stride,
                                 strideWidth: Int.random(in: 0..<5, using: &rng) == 0 ? 1 : stride,
                                 dilationHeight: Int.random(in: 1...2, using: &rng), dilationWidth: Int.random(in: 1...2, using: &rng),
                                 padTop: Int.random(in: 0...2, using: &rng), padLeft: Int.random(in: 0...2, using: &rng),
                                 padBottom: Int.random(in: 0...2, using: &rng), padRight: Int.random(in: 0...2, using: &rng)), groups: groups)
            // The dilated window must fit the padded plane (a negative extent would truncate to one output row).
            guard g.inHeight + g.padTop + g.padBottom > g.dilationHeight * (kernel - 1),
                  g.inWidth + g.padLeft + g.padRight > g.dilationWidth * (kernel - 1) else { continue }
            checkConvolution(g, activation: allActivations.randomElement(using: &rng)!, withBias: Bool.random(using: &rng),
                             withResidual: Bool.random(using: &rng), rng: &rng)
            cases += 1
        }
        // RGB stems through the same filter, their panels shared out between the threads at batch 1.
        for (kernel, stride, outChannels) in [(3, 2, 32), (7, 2, 64), (3, 1, 13)] {
            let g = ConvGeometry(batch: 1, inChannels: 3, inHeight: 33, inWidth: 47, outChannels: outChannels,
                                 window: SlidingWindow(kernelHeight: kernel, kernelWidth: kernel, strideHeight: stride, strideWidth: stride,
                                                       padTop: kernel / 2, padLeft: kernel / 2, padBottom: kernel / 2, padRight: kernel / 2))
            checkConvolution(g, activation: .relu, withBias: true, withResidual: false, rng: &rng)
        }
    }

    /// Small planes over a batch: 16-column strips span output rows and images, and the last panel and strip are partial.
    @Test(.serialized, arguments: [1, 2])
    func stripsAcrossRowsAndImagesMatchReference(threads: Int) {
        EngineThreads.configure(threads: threads)
        defer { EngineThreads.configure(threads: 2) }
        var rng = SeededGenerator(seed: 77)
        for (size, kernel, stride) in [(7, 3, 1), (7, 1, 1), (9, 3, 2), (5, 1, 2), (13, 3, 3)] {
            let g = ConvGeometry(batch: 3, inChannels: 9, inHeight: size, inWidth: size, outChannels: 14, window: SlidingWindow(kernelHeight: kernel,
                                 kernelWidth: kernel, strideHeight: stride, strideWidth: stride, padTop: kernel / 2, padLeft: kernel / 2,
                                 padBottom: kernel / 2, padRight: kernel / 2))
            checkConvolution(g, activation: .relu, withBias: true, withResidual: true, rng: &rng)
        }
    }

    /// Output images at a stride of their own (Concat windows at batch > 1) on every kernel that writes them: dense
    /// pointwise and gathered, grouped, Winograd; with and without the residual, clamp and other epilogues.
    @Test(.serialized, arguments: [1, 2])
    func stridedOutputImagesMatchReference(threads: Int) {
        EngineThreads.configure(threads: threads)
        defer { EngineThreads.configure(threads: 2) }
        var rng = SeededGenerator(seed: 919)
        // (channels, size, kernel, stride, groups, outChannels): pointwise, 3x3 stride 2 dense, grouped, Winograd 3x3.
        for (c, size, kernel, stride, groups, m) in [(12, 9, 1, 1, 1, 14), (16, 13, 1, 1, 1, 16), (9, 11, 3, 2, 1, 10), (32, 7, 3, 1, 4, 32),
                                                   (16, 10, 3, 2, 2, 16), (16, 13, 3, 1, 1, 24), (20, 6, 3, 1, 1, 16)] {
            for (activation, withResidual) in [(Activation.relu, false), (.relu, true), (.sigmoid, false), (.clip(min: 0, max: 6), false)] {
                let g = ConvGeometry(batch: 3, inChannels: c, inHeight: size, inWidth: size, outChannels: m,
                                     window: SlidingWindow(kernelHeight: kernel, kernelWidth: kernel, strideHeight: stride, strideWidth: stride,
                                                           padTop: kernel / 2, padLeft: kernel / 2, padBottom: kernel / 2, padRight: kernel / 2),
                                     groups: groups)
                checkConvolution(g, activation: activation, withBias: true, withResidual: withResidual, imageGap: 2 * size * size + 3,
                                 unitStride: stride == 1, rng: &rng)
            }
        }
    }

    /// Pointwise convs that multiply their input planes by per-image, per-channel factors while packing (a fused
    /// squeeze-and-excitation Mul): whole strips, strips across images and rows, a strided output, 1 and 2 threads.
    @Test(.serialized, arguments: [1, 2])
    func inputChannelScaleMatchesScaledReference(threads: Int) {
        EngineThreads.configure(threads: threads)
        defer { EngineThreads.configure(threads: 2) }
        var rng = SeededGenerator(seed: 4242)
        for (batch, c, h, w, m) in [(1, 8, 16, 16, 12), (3, 20, 7, 7, 16), (2, 6, 5, 3, 7), (4, 48, 14, 14, 40)] {
            let g = ConvGeometry(batch: batch, inChannels: c, inHeight: h, inWidth: w, outChannels: m, window: SlidingWindow(kernelHeight: 1, kernelWidth: 1))
            for (activation, withResidual) in [(Activation.none, false), (.relu, true), (.relu, false)] {
                checkConvolution(g, activation: activation, withBias: true, withResidual: withResidual, inputScale: true, rng: &rng)
            }
            checkConvolution(g, activation: .relu, withBias: false, withResidual: false, imageGap: 5, inputScale: true, rng: &rng)
        }
    }

    /// Pointwise convs that apply a folded BatchNormalization (+ Relu) to their input planes while packing: scale,
    /// shift and floor against the reference on the normalized input, at 1 and 2 threads.
    @Test(.serialized, arguments: [1, 2])
    func inputShiftMatchesNormalizedReference(threads: Int) {
        EngineThreads.configure(threads: threads)
        defer { EngineThreads.configure(threads: 2) }
        var rng = SeededGenerator(seed: 4343)
        for (batch, c, h, w, m) in [(1, 8, 16, 16, 12), (3, 20, 7, 7, 16), (2, 6, 5, 3, 7), (1, 96, 14, 14, 128)] {
            let g = ConvGeometry(batch: batch, inChannels: c, inHeight: h, inWidth: w, outChannels: m, window: SlidingWindow(kernelHeight: 1, kernelWidth: 1))
            for floor in [Float(0), -.infinity] {
                checkConvolution(g, activation: .relu, withBias: true, withResidual: false, inputScale: true, inputFloor: floor, rng: &rng)
            }
            checkConvolution(g, activation: .none, withBias: false, withResidual: true, imageGap: 5, inputScale: true, inputFloor: 0, rng: &rng)
        }
    }

    @Test(arguments: allActivations)
    func fastPathsMatchReferenceForEveryActivation(_ activation: Activation) {
        var rng = SeededGenerator(seed: 99)
        // Pointwise (direct sgemm), 3x3 unfolded, depthwise 3x3 s1/s2 wide enough for the vector loops, depthwise 5x5 dilated.
        let geometries = [
            ConvGeometry(batch: 2, inChannels: 5, inHeight: 6, inWidth: 7, outChannels: 4, window: SlidingWindow(kernelHeight: 1, kernelWidth: 1)),
            ConvGeometry(batch: 1, inChannels: 3, inHeight: 9, inWidth: 11, outChannels: 5, window: SlidingWindow(kernelHeight: 3, kernelWidth: 3,
                         strideHeight: 2, strideWidth: 2, padTop: 1, padLeft: 1, padBottom: 1, padRight: 1)),
            ConvGeometry(batch: 1, inChannels: 3, inHeight: 5, inWidth: 37, outChannels: 3, window: SlidingWindow(kernelHeight: 3, kernelWidth: 3,
                         padTop: 1, padLeft: 1, padBottom: 1, padRight: 1), groups: 3),
            ConvGeometry(batch: 2, inChannels: 2, inHeight: 7, inWidth: 70, outChannels: 2, window: SlidingWindow(kernelHeight: 3, kernelWidth: 3,
                         strideHeight: 2, strideWidth: 2, padTop: 0, padLeft: 1, padBottom: 1, padRight: 0), groups: 2),
            ConvGeometry(batch: 1, inChannels: 2, inHeight: 9, inWidth: 45, outChannels: 2, window: SlidingWindow(kernelHeight: 5, kernelWidth: 5,
                         strideHeight: 1, strideWidth: 2, dilationHeight: 2, dilationWidth: 2, padTop: 4, padLeft: 3, padBottom: 2, padRight: 4), groups: 2),
        ]
        for g in geometries {
            checkConvolution(g, activation: activation, withBias: true, withResidual: false, rng: &rng)
            checkConvolution(g, activation: activation, withBias: false, withResidual: true, rng: &rng)
        }
    }

    /// Pointwise convs whose column tiles start and end inside images and inside strips (odd planes, batch 3, deep k
    /// so that tiles are short: the packing's lead, whole-strip and tail runs), every register epilogue, one and two threads.
    @Test(.serialized, arguments: [1, 2])
    func pointwiseTilesAcrossImagesMatchReference(threads: Int) {
        var rng = SeededGenerator(seed: 19)
        EngineThreads.configure(threads: threads)
        defer { EngineThreads.configure(threads: 2) }
        for (channels, size, batch) in [(300, 15, 3), (700, 5, 3), (33, 23, 2), (1, 3, 3)] {
            let g = ConvGeometry(batch: batch, inChannels: channels, inHeight: size, inWidth: size + 2, outChannels: 13,
                                 window: SlidingWindow(kernelHeight: 1, kernelWidth: 1))
            // Clamp epilogues and residual-only (MobileNetV2's projections) in registers; SiLU in a pass after.
            checkConvolution(g, activation: .clip(min: 0, max: 6), withBias: true, withResidual: false, rng: &rng)
            checkConvolution(g, activation: .none, withBias: true, withResidual: true, rng: &rng)
            checkConvolution(g, activation: .relu, withBias: false, withResidual: true, rng: &rng)
            checkConvolution(g, activation: .silu, withBias: true, withResidual: true, rng: &rng)
        }
    }

    /// Planes large enough to be cut into row tiles (unfolded and pointwise), with one and two threads.
    @Test(.serialized, arguments: [1, 2])
    func tiledPlanesMatchReference(threads: Int) {
        var rng = SeededGenerator(seed: 8)
        EngineThreads.configure(threads: threads)
        defer { EngineThreads.configure(threads: 2) }
        checkConvolution(ConvGeometry(batch: 2, inChannels: 64, inHeight: 40, inWidth: 40, outChannels: 8, window: SlidingWindow(kernelHeight: 3, kernelWidth: 3,
                                      padTop: 1, padLeft: 1, padBottom: 1, padRight: 1)),
                         activation: .relu, withBias: true, withResidual: true, rng: &rng)
        checkConvolution(ConvGeometry(batch: 1, inChannels: 256, inHeight: 48, inWidth: 48, outChannels: 8, window: SlidingWindow(kernelHeight: 1, kernelWidth: 1)),
                         activation: .clip(min: 0, max: 6), withBias: true, withResidual: false, rng: &rng)
    }

    /// Pointwise convs with the clamp epilogues (Relu, Clip) applied in registers, on whole strips and on strips that
    /// cross images (scattered), next to the epilogues that run after the tile; partial panels, one and two threads.
    @Test(.serialized, arguments: [1, 2])
    func pointwiseRegisterClampMatchesReference(threads: Int) {
        EngineThreads.configure(threads: threads)
        defer { EngineThreads.configure(threads: 2) }
        var rng = SeededGenerator(seed: 4242)
        for (batch, channels, outChannels, height, width) in [(1, 7, 13, 4, 8), (3, 16, 6, 5, 7), (2, 24, 20, 9, 9), (8, 40, 11, 7, 7),
                                                              (1, 3, 9, 17, 33), (2, 130, 7, 14, 14)] {
            let g = ConvGeometry(batch: batch, inChannels: channels, inHeight: height, inWidth: width, outChannels: outChannels,
                                 window: SlidingWindow(kernelHeight: 1, kernelWidth: 1))
            for activation in [Activation.none, .relu, .clip(min: 0, max: 6), .clip(min: -0.5, max: 0.25), .silu] {
                checkConvolution(g, activation: activation, withBias: true, withResidual: false, rng: &rng)
                checkConvolution(g, activation: activation, withBias: false, withResidual: true, rng: &rng)
            }
        }
    }

    /// The dense kernel's AVX-512F tiles (6 x 32, when the CPU has them) and the AVX2 Swift tiles forced on the same
    /// machine: last panels of 1-6 rows, column counts off 16 and 32 (one strip, a pair, a pair and one), strips that
    /// cross images at batch > 1, odd depths, residual + clamp epilogues in registers and activations after, strided
    /// output images (Concat windows); pointwise and gathered 3x3 (stride 1 and 2), then the direct grouped filter.
    @Test(.serialized, arguments: [false, true])
    func bothMicroKernelsMatchReference(forceAVX2: Bool) {
        _ = osprey_float_avx512_enable(forceAVX2 ? 0 : 1)
        defer { _ = osprey_float_avx512_enable(1) }
        EngineThreads.configure(threads: 1)
        defer { EngineThreads.configure(threads: 2) }
        var rng = SeededGenerator(seed: 512)
        let epilogues: [(Activation, Bool)] = [(.clip(min: 0, max: 6), true), (.none, true), (.relu, false), (.silu, true),
                                               (.clip(min: -0.5, max: 0.25), false)]
        // (batch, channels, height, width, kernel, stride): 25, 49 x 3, 2 x 5 x 7, 64, 16 x 2 and 33 columns per call.
        let shapes = [(1, 5, 5, 5, 1, 1), (3, 7, 7, 7, 1, 1), (2, 9, 5, 7, 3, 1), (1, 20, 8, 8, 1, 1), (2, 6, 4, 4, 1, 1),
                      (1, 6, 3, 11, 3, 1), (2, 5, 11, 9, 3, 2), (1, 16, 12, 12, 3, 1)]
        var index = 0
        for outChannels in [1, 2, 3, 4, 5, 6, 7, 13, 20] {
            for (batch, channels, height, width, kernel, stride) in shapes {
                let (activation, withResidual) = epilogues[index % epilogues.count]
                let g = ConvGeometry(batch: batch, inChannels: channels, inHeight: height, inWidth: width, outChannels: outChannels,
                                     window: SlidingWindow(kernelHeight: kernel, kernelWidth: kernel, strideHeight: stride, strideWidth: stride,
                                                           padTop: kernel / 2, padLeft: kernel / 2, padBottom: kernel / 2, padRight: kernel / 2))
                checkConvolution(g, activation: activation, withBias: index % 3 != 1, withResidual: withResidual,
                                 imageGap: index % 4 == 0 ? 7 : nil, unitStride: stride == 1, rng: &rng)
                index += 1
            }
        }
        // The direct grouped filter (4 x 32 blocks): RGB stems 7x7 and 3x3 stride 2, groups of 8, flat counts off 32.
        for (channels, size, kernel, stride, groups, outChannels) in [(3, 29, 7, 2, 1, 10), (3, 17, 3, 2, 1, 8), (16, 9, 3, 1, 2, 16),
                                                                      (24, 7, 3, 2, 3, 12), (4, 13, 3, 1, 1, 5)] {
            let g = ConvGeometry(batch: 2, inChannels: channels, inHeight: size, inWidth: size + 2, outChannels: outChannels,
                                 window: SlidingWindow(kernelHeight: kernel, kernelWidth: kernel, strideHeight: stride, strideWidth: stride,
                                                       padTop: kernel / 2, padLeft: kernel / 2, padBottom: kernel / 2, padRight: kernel / 2),
                                 groups: groups)
            checkConvolution(g, activation: .relu, withBias: true, withResidual: groups > 1, imageGap: 5, rng: &rng)
        }
    }

    /// Pointwise convs with few output channels read their input planes in place on AVX-512F (`PointwisePlanes`), or
    /// a copy of each block where in place they would crowd L1: 1-66 output channels (last panels of 1-6 rows, up to
    /// the 11-panel limit), blocks of 32 columns cut at plane edges (13x13, 1x1, 7x9, 6x8), odd depths, register
    /// epilogues with and without a residual, Concat windows, one and two threads; then the packed path forced (AVX2
    /// tiles) on the same shapes.
    @Test(.serialized, arguments: [1, 2])
    func pointwisePlanesMatchReference(threads: Int) {
        EngineThreads.configure(threads: threads)
        defer { EngineThreads.configure(threads: 2) }
        var rng = SeededGenerator(seed: 1616)
        let epilogues: [(Activation, Bool)] = [(.relu, false), (.none, true), (.clip(min: 0, max: 6), true), (.none, false)]
        var index = 0
        for forceAVX2 in [false, true] {
            _ = osprey_float_avx512_enable(forceAVX2 ? 0 : 1)
            defer { _ = osprey_float_avx512_enable(1) }
            for outChannels in [1, 6, 16, 23, 32, 64, 66] {
                // 32x32 and 6x8 planes with depths 20 and 260 put their blocks in few L1 sets: copied before the panels
                // read them (a full block, and the 48-column plane's last block of 16).
                for (batch, channels, height, width) in [(1, 64, 13, 13), (3, 3, 1, 1), (2, 257, 7, 9), (1, 16, 11, 11), (2, 20, 32, 32),
                                                         (1, 260, 6, 8)] {
                    #expect(PointwisePlanes.crowdsL1(planeFloats: height * width, depth: channels) == (channels == 20 || channels == 260))
                    let (activation, withResidual) = epilogues[index % epilogues.count]
                    let g = ConvGeometry(batch: batch, inChannels: channels, inHeight: height, inWidth: width, outChannels: outChannels,
                                         window: SlidingWindow(kernelHeight: 1, kernelWidth: 1))
                    checkConvolution(g, activation: activation, withBias: index % 3 != 2, withResidual: withResidual,
                                     imageGap: index % 2 == 0 ? 9 : nil, rng: &rng)
                    index += 1
                }
            }
        }
    }

    @Test func singleThreadMatchesReference() {
        var rng = SeededGenerator(seed: 5)
        EngineThreads.configure(threads: 1)
        defer { EngineThreads.configure(threads: 2) }
        checkConvolution(ConvGeometry(batch: 3, inChannels: 4, inHeight: 12, inWidth: 20, outChannels: 4, window: SlidingWindow(kernelHeight: 3, kernelWidth: 3,
                                      padTop: 1, padLeft: 1, padBottom: 1, padRight: 1), groups: 4),
                         activation: .clip(min: 0, max: 6), withBias: true, withResidual: true, rng: &rng)
    }
}

/// Runs the packed transposed convolution and its reference twin on the same random data and compares them.
private func checkTranspose(_ g: ConvTransposeGeometry, activation: Activation, withBias: Bool, withResidual: Bool,
                            rng: inout SeededGenerator, sourceLocation: SourceLocation = #_sourceLocation) {
    let input = rng.floats(g.batch * g.inChannels * g.inHeight * g.inWidth)
    let weights = rng.floats(g.inChannels * g.outChannelsPerGroup * g.kernelHeight * g.kernelWidth)
    let bias = withBias ? rng.floats(g.outChannels) : nil
    let outCount = g.batch * g.outChannels * g.outHeight * g.outWidth
    let residual = withResidual ? rng.floats(outCount) : nil
    var expected = [Float](repeating: 0, count: outCount)
    var actual = [Float](repeating: .nan, count: outCount)
    let packed = weights.withUnsafeBufferPointer { w in
        PackedConvolutionTranspose(weights: w, bias: bias?.withUnsafeBufferPointer { $0 }, inChannels: g.inChannels, outChannels: g.outChannels,
                                   kernelHeight: g.kernelHeight, kernelWidth: g.kernelWidth, groups: g.groups, activation: activation)
    }
    var workspace = [Float](repeating: .nan, count: packed.workspaceCount(for: g))
    input.withUnsafeBufferPointer { i in
        weights.withUnsafeBufferPointer { w in
            (bias ?? []).withUnsafeBufferPointer { b in
                (residual ?? []).withUnsafeBufferPointer { r in
                    let biasPointer = bias == nil ? nil : b.baseAddress
                    let residualPointer = residual == nil ? nil : r.baseAddress
                    expected.withUnsafeMutableBufferPointer {
                        convolutionTransposeReference(g, input: i.baseAddress!, weights: w.baseAddress!, bias: biasPointer, activation: activation,
                                                      output: $0.baseAddress!, residual: residualPointer)
                    }
                    actual.withUnsafeMutableBufferPointer { o in
                        workspace.withUnsafeMutableBufferPointer { ws in
                            packed.run(g, input: i.baseAddress!, output: o.baseAddress!, workspace: ws.baseAddress!, residual: residualPointer)
                        }
                    }
                }
            }
        }
    }
    expectClose(actual, expected, "\(g) \(activation)", sourceLocation: sourceLocation)
}

@Suite struct KernelConvolutionTransposeTests {
    @Test func randomizedGeometriesMatchReference() {
        var rng = SeededGenerator(seed: 77)
        var cases = 0
        while cases < 40 {
            let groups = [1, 2].randomElement(using: &rng)!
            let kernel = [1, 2, 3, 4, 5].randomElement(using: &rng)!
            var g = ConvTransposeGeometry(batch: [1, 3].randomElement(using: &rng)!, inChannels: groups * Int.random(in: 1...3, using: &rng),
                                          inHeight: Int.random(in: 1...7, using: &rng), inWidth: Int.random(in: 1...23, using: &rng),
                                          outChannels: groups * Int.random(in: 1...3, using: &rng), window: SlidingWindow(kernelHeight: kernel,
                                          kernelWidth: Int.random(in: 1...4, using: &rng),
                                          strideHeight: Int.random(in: 1...3, using: &rng), strideWidth: Int.random(in: 1...2, using: &rng),
                                          dilationHeight: Int.random(in: 1...2, using: &rng), dilationWidth: Int.random(in: 1...2, using: &rng),
                                          padTop: Int.random(in: 0...2, using: &rng), padLeft: Int.random(in: 0...2, using: &rng),
                                          padBottom: Int.random(in: 0...2, using: &rng), padRight: Int.random(in: 0...2, using: &rng)),
                                          groups: groups)
            // ONNX requires output_padding below the stride or the dilation.
            g.outputPaddingHeight = Int.random(in: 0..<max(g.strideHeight, g.dilationHeight), using: &rng)
            g.outputPaddingWidth = Int.random(in: 0..<max(g.strideWidth, g.dilationWidth), using: &rng)
            guard g.outHeight >= 1 && g.outWidth >= 1 else { continue }
            checkTranspose(g, activation: allActivations.randomElement(using: &rng)!, withBias: Bool.random(using: &rng),
                           withResidual: Bool.random(using: &rng), rng: &rng)
            cases += 1
        }
    }
}

/// The depthwise kernel's native (C: AVX-512F and AVX2 + FMA bodies) plane path and its portable Swift path against the reference twin:
/// 3x3 and 5x5 (and 7x7, 1x1) taps, strides 1 and 2, dilation, asymmetric pads and pads past the window, rows and
/// planes narrower than a vector, row widths around the 8 / 16-lane tails, batch 2, channel multiplier 2, every
/// activation (HardSwish, SiLU, Sigmoid and the clamps in the plane kernel's registers), bias and residual.
@Suite struct DepthwisePlaneKernelTests {
    /// The native path only where the CPU has AVX2 + FMA.
    private let testedPaths: [Bool] = hasFastLogisticKernel ? [true, false] : [false]

    @Test(arguments: allActivations)
    func nativeAndPortablePathsMatchReference(_ activation: Activation) {
        var rng = SeededGenerator(seed: 314)
        let shapes: [(kernel: Int, stride: Int, dilation: Int, height: Int, width: Int, multiplier: Int)] = [
            (3, 1, 1, 5, 7, 1), (3, 1, 1, 4, 8, 1), (3, 1, 1, 3, 9, 2), (3, 1, 1, 6, 16, 1), (3, 1, 1, 3, 17, 1), (3, 1, 1, 2, 33, 1),
            (3, 2, 1, 7, 14, 1), (3, 2, 1, 9, 29, 2), (3, 2, 1, 5, 34, 1), (5, 1, 1, 6, 13, 1), (5, 1, 1, 4, 40, 1),
            (5, 2, 1, 11, 23, 1), (5, 2, 1, 8, 56, 2), (3, 1, 2, 7, 19, 1), (7, 1, 1, 9, 12, 1), (1, 2, 1, 6, 15, 1),
            (3, 1, 1, 7, 7, 1), (3, 2, 1, 7, 7, 1), (3, 1, 1, 1, 3, 1), (5, 2, 1, 3, 4, 1), (3, 2, 1, 14, 14, 1), (5, 1, 1, 14, 14, 1),
            (7, 2, 1, 13, 30, 1), (3, 1, 1, 10, 112, 1), (3, 2, 1, 6, 57, 1),
        ]
        for (i, s) in shapes.enumerated() {
            // Every fifth shape pads past the window (output rows and columns that see padding only).
            let pad = s.kernel / 2 * s.dilation + (i % 5 == 4 ? 2 : 0)
            let channels = 3
            let g = ConvGeometry(batch: 2, inChannels: channels, inHeight: s.height, inWidth: s.width, outChannels: channels * s.multiplier,
                                 window: SlidingWindow(kernelHeight: s.kernel, kernelWidth: s.kernel, strideHeight: s.stride, strideWidth: s.stride,
                                                       dilationHeight: s.dilation, dilationWidth: s.dilation, padTop: pad, padLeft: i % 2 == 0 ? pad : 0,
                                                       padBottom: i % 3 == 0 ? 0 : pad, padRight: pad), groups: channels)
            let input = rng.floats(g.batch * g.inChannels * g.inHeight * g.inWidth).map { $0 * 4 }
            let weights = rng.floats(g.outChannels * s.kernel * s.kernel)
            let bias = rng.floats(g.outChannels)
            let outCount = g.batch * g.outChannels * g.outHeight * g.outWidth
            let residual = rng.floats(outCount)
            for withResidual in [false, true] {
                var expected = [Float](repeating: 0, count: outCount)
                var results = [String: [Float]]()
                input.withUnsafeBufferPointer { x in
                    weights.withUnsafeBufferPointer { w in
                        bias.withUnsafeBufferPointer { b in
                            residual.withUnsafeBufferPointer { r in
                                let res = withResidual ? r.baseAddress : nil
                                expected.withUnsafeMutableBufferPointer {
                                    convolutionReference(g, input: x.baseAddress!, weights: w.baseAddress!, bias: b.baseAddress, activation: activation,
                                                         output: $0.baseAddress!, residual: res)
                                }
                                for native in testedPaths {
                                    forEachFloatKernelBody { body in
                                        var out = [Float](repeating: .nan, count: outCount)
                                        out.withUnsafeMutableBufferPointer {
                                            depthwiseConvolution(g, input: x.baseAddress!, weights: w.baseAddress!, bias: b.baseAddress, residual: res,
                                                                 activation: activation, output: $0.baseAddress!, native: native)
                                        }
                                        results[native ? body : "portable"] = out
                                    }
                                }
                            }
                        }
                    }
                }
                for (path, out) in results {
                    expectClose(out, expected, "\(path) \(s) \(activation) residual \(withResidual)")
                }
            }
        }
    }
}
