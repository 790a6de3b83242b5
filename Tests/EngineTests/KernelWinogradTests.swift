import CKernelShim
import Testing
@testable import Engine
import TestSupport

/// Runs the Winograd kernel and the direct reference on the same random data; compares at the engine tolerance
/// (|a - b| <= 1e-4 * max|ref| + 1e-5 over the whole output).
/// `tilesPerBlock` and `channelChunks` override the kernel's split; `viaPacked` runs `PackedConvolution` (unit strides declared)
/// instead, which picks its own kernel.
private func checkWinograd(_ g: ConvGeometry, activation: Activation = .none, withBias: Bool = true, withResidual: Bool = false,
                           viaPacked: Bool = false, tilesPerBlock: Int? = nil, channelChunks: Int? = nil, rng: inout SeededGenerator,
                           sourceLocation: SourceLocation = #_sourceLocation) {
    let input = rng.floats(g.batch * g.inChannels * g.inHeight * g.inWidth)
    let weights = rng.floats(g.outChannels * g.inChannels * 9)
    let bias = withBias ? rng.floats(g.outChannels) : nil
    let outCount = g.batch * g.outChannels * g.outHeight * g.outWidth
    let residual = withResidual ? rng.floats(outCount) : nil
    let expected = convolutionReferenceOutput(g, input: input, weights: weights, bias: bias, residual: residual, activation: activation)
    var actual = [Float](repeating: .nan, count: outCount)
    input.withUnsafeBufferPointer { i in
        weights.withUnsafeBufferPointer { w in
            (bias ?? []).withUnsafeBufferPointer { b in
                (residual ?? []).withUnsafeBufferPointer { r in
                    let biasPointer = bias == nil ? nil : b.baseAddress
                    let residualPointer = residual == nil ? nil : r.baseAddress
                    if viaPacked {
                        let packed = PackedConvolution(weights: w, bias: bias == nil ? nil : b, outChannels: g.outChannels,
                                                       inChannels: g.inChannels, kernelHeight: 3, kernelWidth: 3, groups: 1,
                                                       activation: activation, unitStride: true)
                        actual.withUnsafeMutableBufferPointer { o in
                            packed.run(g, input: i.baseAddress!, output: o.baseAddress!, residual: residualPointer)
                        }
                        return
                    }
                    let filters = WinogradFilters(weights: w.baseAddress!, bias: biasPointer, outChannels: g.outChannels,
                                                  inChannels: g.inChannels)
                    defer { filters.deallocate() }
                    actual.withUnsafeMutableBufferPointer { o in
                        winogradConvolution(g, filters: filters, residual: residualPointer, activation: activation, input: i.baseAddress!,
                                            output: o.baseAddress!, tilesPerBlock: tilesPerBlock, channelChunks: channelChunks)
                    }
                }
            }
        }
    }
    expectWithinEngineTolerance(actual, expected, "\(g) \(activation) bias \(withBias) residual \(withResidual)",
                                sourceLocation: sourceLocation)
}

/// The engine's whole-output tolerance: |a - b| <= 1e-4 * max|ref| + 1e-5 for every element.
private func expectWithinEngineTolerance(_ actual: [Float], _ expected: [Float], _ context: @autoclosure () -> String,
                                         sourceLocation: SourceLocation) {
    #expect(actual.count == expected.count, "\(context()): count", sourceLocation: sourceLocation)
    let bound = 1e-4 * (expected.map(abs).max() ?? 0) + 1e-5
    for i in 0..<min(actual.count, expected.count) where !(abs(actual[i] - expected[i]) <= bound) {
        Issue.record("\(context()): element \(i) is \(actual[i]), expected \(expected[i]) (bound \(bound))", sourceLocation: sourceLocation)
        return
    }
}

/// A 3x3 stride-1 geometry with the same pad on every side unless given.
private func geometry(batch: Int = 1, channels: Int, height: Int, width: Int, outChannels: Int, pad: Int,
                      padBottom: Int? = nil, padRight: Int? = nil) -> ConvGeometry {
    ConvGeometry(batch: batch, inChannels: channels, inHeight: height, inWidth: width, outChannels: outChannels,
                 window: SlidingWindow(kernelHeight: 3, kernelWidth: 3, padTop: pad, padLeft: pad, padBottom: padBottom ?? pad,
                                       padRight: padRight ?? pad))
}

@Suite struct KernelWinogradTests {
    /// The filter transform against G g G^T written out for a single tap: a unit impulse at (1, 1) gives column 1 of G
    /// times row 1 of G^T.
    @Test func filterTransformOfAnImpulseIsAnOuterProduct() {
        var g = [Float](repeating: 0, count: 9)
        g[4] = 1
        let u = g.withUnsafeBufferPointer { Winograd.transformFilter($0.baseAddress!) }
        let column = Winograd.filterMatrix.map { $0[1] }
        for i in 0..<6 {
            for j in 0..<6 { #expect(abs(Double(u[i * 6 + j]) - column[i] * column[j]) < 1e-7) }
        }
    }

    /// Sizes that are and are not multiples of the 4x4 tile, pads 0 and 1, channels off the 8-lane vector.
    @Test func oddSizesAndPadsMatchReference() {
        var rng = SeededGenerator(seed: 9)
        for (height, width, pad) in [(8, 8, 1), (7, 7, 1), (9, 13, 1), (5, 6, 0), (14, 14, 1), (17, 3, 1), (3, 3, 0), (1, 1, 1), (12, 11, 0)] {
            for (channels, outChannels) in [(16, 16), (19, 21), (24, 8)] {
                checkWinograd(geometry(channels: channels, height: height, width: width, outChannels: outChannels, pad: pad), rng: &rng)
            }
        }
    }

    /// Uneven pads (SAME_UPPER-like) and a pad of 2, where the padded window is wider than the input.
    @Test func unevenPadsMatchReference() {
        var rng = SeededGenerator(seed: 10)
        checkWinograd(geometry(channels: 16, height: 10, width: 9, outChannels: 24, pad: 0, padBottom: 2, padRight: 1), rng: &rng)
        checkWinograd(geometry(channels: 17, height: 6, width: 7, outChannels: 16, pad: 2), rng: &rng)
        checkWinograd(ConvGeometry(batch: 2, inChannels: 16, inHeight: 9, inWidth: 10, outChannels: 16,
                                   window: SlidingWindow(kernelHeight: 3, kernelWidth: 3, padTop: 1, padLeft: 0, padBottom: 0, padRight: 2)),
                      rng: &rng)
    }

    /// Several images (tiles of one block run into the next image), with and without the bias.
    @Test func batchesMatchReference() {
        var rng = SeededGenerator(seed: 11)
        checkWinograd(geometry(batch: 3, channels: 16, height: 13, width: 10, outChannels: 32, pad: 1), rng: &rng)
        checkWinograd(geometry(batch: 2, channels: 32, height: 28, width: 28, outChannels: 16, pad: 1), withBias: false, rng: &rng)
        checkWinograd(geometry(batch: 8, channels: 16, height: 7, width: 7, outChannels: 16, pad: 1), rng: &rng)
    }

    /// Bias, residual and activations in the epilogue, including a residual without an activation.
    @Test func fusedEpiloguesMatchReference() {
        var rng = SeededGenerator(seed: 12)
        let g = geometry(batch: 2, channels: 24, height: 11, width: 15, outChannels: 20, pad: 1)
        for activation in [Activation.none, .relu, .clip(min: 0, max: 6), .silu, .leakyRelu(alpha: 0.1)] {
            checkWinograd(g, activation: activation, withResidual: false, rng: &rng)
            checkWinograd(g, activation: activation, withResidual: true, rng: &rng)
        }
    }

    /// Channel counts of the served models' layers (ResNet, DenseNet, SqueezeNet, YOLO) on small planes (the
    /// reference is slow in debug builds).
    @Test func modelChannelCountsMatchReference() {
        var rng = SeededGenerator(seed: 13)
        checkWinograd(geometry(channels: 64, height: 12, width: 12, outChannels: 64, pad: 1), activation: .relu, withResidual: true, rng: &rng)
        checkWinograd(geometry(channels: 128, height: 8, width: 8, outChannels: 32, pad: 1), rng: &rng)
        checkWinograd(geometry(channels: 16, height: 15, width: 15, outChannels: 64, pad: 1), activation: .relu, rng: &rng)
        checkWinograd(geometry(channels: 32, height: 10, width: 10, outChannels: 32, pad: 1), activation: .silu, rng: &rng)
        checkWinograd(geometry(batch: 2, channels: 160, height: 7, width: 7, outChannels: 24, pad: 1), rng: &rng)
    }

    /// The AVX-512F product tiles and output transform (when the CPU has them) and the AVX2 Swift ones forced on the
    /// same machine: 16, 32 and 48 padded output channels (one strip, a pair, a pair and one; 20 and 40 channels end
    /// in 8-lane groups after the 16-channel ones), tile counts off the 6 rows, odd blocks, whole and edge tiles.
    @Test(.serialized, arguments: [false, true])
    func bothProductKernelsMatchReference(forceAVX2: Bool) {
        _ = osprey_float_avx512_enable(forceAVX2 ? 0 : 1)
        defer { _ = osprey_float_avx512_enable(1) }
        var rng = SeededGenerator(seed: 513)
        for (channels, outChannels, size, batch) in [(16, 16, 9, 1), (24, 20, 13, 2), (17, 40, 10, 1), (32, 48, 7, 3)] {
            let g = geometry(batch: batch, channels: channels, height: size, width: size + 1, outChannels: outChannels, pad: 1)
            checkWinograd(g, activation: .relu, withResidual: true, rng: &rng)
            checkWinograd(g, activation: .clip(min: 0, max: 6), tilesPerBlock: 5, rng: &rng)
        }
    }

    /// Output channels split into ranges of whole 32-channel pairs (the last taking an odd 16-channel strip and the
    /// 8-lane rest), alone or with blocks of tiles, with both product kernels; ranges left empty by too many chunks.
    @Test(.serialized, arguments: [false, true])
    func channelChunksMatchReference(forceAVX2: Bool) {
        _ = osprey_float_avx512_enable(forceAVX2 ? 0 : 1)
        defer { _ = osprey_float_avx512_enable(1) }
        var rng = SeededGenerator(seed: 517)
        for (outChannels, chunks, perBlock) in [(64, 2, nil), (88, 2, nil), (100, 3, 7), (40, 4, nil)] as [(Int, Int, Int?)] {
            let g = geometry(batch: 2, channels: 16, height: 13, width: 13, outChannels: outChannels, pad: 1)
            checkWinograd(g, activation: .relu, tilesPerBlock: perBlock, channelChunks: chunks, rng: &rng)
            checkWinograd(g, activation: .silu, withResidual: true, tilesPerBlock: perBlock, channelChunks: chunks, rng: &rng)
        }
        // The split the kernel picks itself at two threads: 16 tiles of a 13x13 plane under a 4.7 MB U.
        checkWinograd(geometry(channels: 128, height: 13, width: 13, outChannels: 256, pad: 1), activation: .relu, rng: &rng)
    }

    /// Small blocks of tiles: blocks that end mid tile row and run across images, each with its own epilogue.
    @Test func manyBlocksMatchReference() {
        var rng = SeededGenerator(seed: 16)
        for perBlock in [1, 3, 5, 7] {
            checkWinograd(geometry(batch: 2, channels: 16, height: 13, width: 17, outChannels: 16, pad: 1), activation: .relu,
                          withResidual: true, tilesPerBlock: perBlock, rng: &rng)
        }
    }

    /// Inputs far from zero mean (images, unnormalised activations): the transform's cancellations stay within tolerance.
    @Test func offsetInputsStayWithinTolerance() {
        var rng = SeededGenerator(seed: 14)
        let g = geometry(channels: 64, height: 10, width: 10, outChannels: 64, pad: 1)
        let input = rng.floats(g.batch * g.inChannels * g.inHeight * g.inWidth).map { $0 * 0.5 + 3 }
        let weights = rng.floats(g.outChannels * g.inChannels * 9)
        var expected = [Float](repeating: 0, count: g.batch * g.outChannels * g.outHeight * g.outWidth)
        var actual = expected
        input.withUnsafeBufferPointer { i in
            weights.withUnsafeBufferPointer { w in
                expected.withUnsafeMutableBufferPointer {
                    convolutionReference(g, input: i.baseAddress!, weights: w.baseAddress!, bias: nil, activation: .none, output: $0.baseAddress!)
                }
                let filters = WinogradFilters(weights: w.baseAddress!, bias: nil, outChannels: g.outChannels, inChannels: g.inChannels)
                defer { filters.deallocate() }
                actual.withUnsafeMutableBufferPointer {
                    winogradConvolution(g, filters: filters, residual: nil, activation: .none, input: i.baseAddress!, output: $0.baseAddress!)
                }
            }
        }
        expectWithinEngineTolerance(actual, expected, "offset inputs", sourceLocation: #_sourceLocation)
    }

    /// Which calls take the Winograd path: unit stride and dilation, enough tiles, dense 3x3 with enough channels.
    @Test func winogradAppliesOnlyWhereItFits() {
        let weights = [Float](repeating: 0.5, count: 32 * 16 * 9)
        let filters = weights.withUnsafeBufferPointer {
            WinogradFilters(weights: $0.baseAddress!, bias: nil, outChannels: 32, inChannels: 16)
        }
        defer { filters.deallocate() }
        #expect(filters.fits(geometry(channels: 16, height: 16, width: 16, outChannels: 32, pad: 1)))
        #expect(!filters.fits(geometry(channels: 16, height: 7, width: 7, outChannels: 32, pad: 1)), "4 tiles: direct")
        #expect(!filters.fits(geometry(batch: 8, channels: 16, height: 7, width: 7, outChannels: 32, pad: 1)),
                "4 tiles an image: direct at any batch")
        var strided = geometry(channels: 16, height: 32, width: 32, outChannels: 32, pad: 1)
        strided.parts.window.strideHeight = 2
        #expect(!filters.fits(strided))
        var dilated = geometry(channels: 16, height: 32, width: 32, outChannels: 32, pad: 2)
        dilated.parts.window.dilationWidth = 2
        #expect(!filters.fits(dilated))
        #expect(!WinogradFilters.suits(outChannels: 32, inChannels: 8, kernelHeight: 3, kernelWidth: 3, groups: 1))
        #expect(!WinogradFilters.suits(outChannels: 32, inChannels: 32, kernelHeight: 3, kernelWidth: 3, groups: 2))
        #expect(!WinogradFilters.suits(outChannels: 32, inChannels: 32, kernelHeight: 5, kernelWidth: 5, groups: 1))
    }

    /// The packed convolution with Winograd filters (made from its weight panels on the first call that needs them,
    /// odd channel counts included) agrees with the reference on the calls it sends either way.
    @Test func packedConvolutionMatchesReferenceOnBothPaths() {
        var rng = SeededGenerator(seed: 15)
        checkWinograd(geometry(channels: 19, height: 13, width: 13, outChannels: 23, pad: 1), withResidual: false, viaPacked: true, rng: &rng)
        checkWinograd(geometry(batch: 2, channels: 16, height: 16, width: 16, outChannels: 32, pad: 1), activation: .relu, withResidual: true,
                      viaPacked: true, rng: &rng)
        checkWinograd(geometry(channels: 16, height: 7, width: 7, outChannels: 32, pad: 1), activation: .relu, viaPacked: true, rng: &rng)
    }
}
