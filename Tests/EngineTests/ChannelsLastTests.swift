import Testing
import Tensor
import ONNX
import CKernelShim
@testable import Engine
import TestSupport

private typealias T = TestSupport

/// Channels-last kernels against their plain twins, and graphs compiled with and without channels-last regions.
@Suite struct ChannelsLastTests {
    /// Depthwise geometries: channel tails, strides 1 and 2, kernels 3 and 5, asymmetric pads, batch 2; images at most
    /// as wide as the kernel, whose pixels are all borders; rows wide enough for the six-pixel groups, with leftovers,
    /// and for several pixel groups of the 5x5 body.
    private static let depthwiseCases: [(c: Int, h: Int, w: Int, k: Int, s: Int, pads: (Int, Int, Int, Int))] = [
        (5, 7, 9, 3, 1, (1, 1, 1, 1)), (16, 8, 8, 3, 2, (0, 0, 1, 1)), (24, 12, 13, 3, 2, (1, 1, 1, 1)), (40, 9, 9, 5, 1, (2, 2, 2, 2)),
        (8, 6, 7, 4, 1, (1, 2, 2, 1)), (21, 9, 7, 5, 1, (2, 1, 2, 3)),
        (37, 11, 10, 5, 2, (2, 2, 1, 2)), (70, 6, 5, 3, 1, (0, 1, 2, 0)), (96, 4, 4, 3, 2, (1, 1, 1, 1)),
        (33, 7, 7, 5, 1, (2, 2, 2, 2)), (20, 3, 3, 5, 1, (2, 2, 2, 2)), (48, 7, 7, 5, 2, (2, 2, 2, 2)), (17, 2, 3, 3, 1, (1, 1, 1, 1)),
        (24, 5, 17, 3, 1, (1, 1, 1, 1)), (20, 6, 16, 5, 1, (2, 2, 2, 2)), (35, 4, 21, 5, 1, (2, 1, 2, 3)),
        // Pixel groups of the 5x5 body: rows of 7 + 7, 7 + 8 at stride 2, 8 + 8 + 9 (four groups), channel tails.
        (34, 14, 14, 5, 1, (2, 2, 2, 2)), (19, 5, 30, 5, 2, (2, 2, 2, 2)), (18, 4, 25, 5, 1, (2, 2, 2, 2)), (50, 7, 7, 3, 1, (1, 1, 1, 1)),
        // 7x7 (ConvNeXt): groups of 7 + 7, one group, asymmetric pads, an image smaller than the kernel, stride 2.
        (40, 14, 14, 7, 1, (3, 3, 3, 3)), (19, 7, 7, 7, 1, (3, 3, 3, 3)), (24, 9, 20, 7, 1, (3, 2, 3, 4)), (16, 5, 4, 7, 1, (3, 3, 3, 3)),
        (21, 11, 12, 7, 2, (3, 3, 3, 3)),
    ]

    @Test func depthwiseMatchesReferenceOnEveryBody() {
        var rng = SeededGenerator(seed: 5)
        forEachFloatKernelBody { body in
            for (c, h, w, k, s, pads) in Self.depthwiseCases {
                let (top, left, bottom, right) = pads
                let g = ChannelsLastDepthwiseGeometry(batch: 2, inHeight: h, inWidth: w, channels: c, kernelHeight: k, kernelWidth: k,
                                                      strideHeight: s, strideWidth: s, padTop: top, padLeft: left,
                                                      outHeight: (h + top + bottom - k) / s + 1, outWidth: (w + left + right - k) / s + 1)
                let input = rng.floats(2 * h * w * c), weights = rng.floats(k * k * c), bias = rng.floats(c)
                let outCount = 2 * g.outHeight * g.outWidth * c
                let residual = rng.floats(outCount).map { $0 * 3 }
                for activation in allActivations {
                    for withResidual in [false, true] {
                        var fast = [Float](repeating: .nan, count: outCount), reference = fast
                        let r: [Float]? = withResidual ? residual : nil
                        withOptional(r) { rp in
                            channelsLastDepthwise(g, input: input, weights: weights, bias: bias, residual: rp, activation: activation, output: &fast)
                            channelsLastDepthwiseReference(g, input: input, weights: weights, bias: bias, residual: rp, activation: activation,
                                                           output: &reference)
                        }
                        expectClose(fast, reference, "\(body) c \(c) \(h)x\(w) k \(k) s \(s) \(activation) residual \(withResidual)")
                        // With the squeeze-and-excitation pool: the same output and its channel means.
                        var pooled = [Float](repeating: .nan, count: outCount), means = [Float](repeating: .nan, count: 2 * c)
                        withOptional(r) { rp in
                            channelsLastDepthwiseWithMeans(g, input: input, weights: weights, bias: bias, residual: rp, activation: activation,
                                                           output: &pooled, means: &means)
                        }
                        expectClose(pooled, reference, "\(body) c \(c) \(h)x\(w) k \(k) \(activation) pooled output")
                        expectClose(means, referenceMeans(reference, batch: 2, pixels: g.outHeight * g.outWidth, channels: c),
                                    "\(body) c \(c) \(h)x\(w) k \(k) \(activation) means")
                    }
                }
            }
        }
    }

    @Test func pointwiseMatchesReferenceOnEveryBody() {
        var rng = SeededGenerator(seed: 6)
        forEachFloatKernelBody { body in
            for (batch, pixels, c, m) in [(2, 7, 5, 3), (2, 13, 24, 40), (1, 49, 96, 17), (2, 30, 33, 64)] {
                let input = rng.floats(batch * pixels * c), w = rng.floats(c * m), bias = rng.floats(m)
                let residual = rng.floats(batch * pixels * m), scale = rng.floats(batch * c)
                let packed = PackedMatrixB(w, depth: c, columns: m)
                for activation in allActivations {
                    for scaled in [false, true] {
                        var fast = [Float](repeating: .nan, count: batch * pixels * m), reference = fast
                        withOptional(scaled ? scale : nil) { sp in
                            channelsLastPointwise(input, batch: batch, pixels: pixels, packed, bias: bias, residual: residual, scale: sp,
                                                  activation: activation, output: &fast)
                        }
                        var a = input
                        if scaled { for n in 0..<batch { for p in 0..<pixels { for k in 0..<c { a[(n * pixels + p) * c + k] *= scale[n * c + k] } } } }
                        packedMatmulReference(a, lda: c, rows: batch * pixels, b: w, depth: c, columns: m, bias: bias, residual: residual,
                                              activation: activation, out: &reference)
                        expectClose(fast, reference, "\(body) \(batch)x\(pixels) \(c)->\(m) \(activation) scaled \(scaled)")
                    }
                }
            }
        }
    }

    /// The fused depthwise + pointwise kernel against the depthwise and product twins, on both bodies.
    @Test func separableMatchesItsTwoHalvesOnEveryBody() {
        var rng = SeededGenerator(seed: 12)
        forEachFloatKernelBody { body in
            for (c, m, h, w, s) in [(24, 40, 9, 11, 1), (37, 16, 12, 7, 2)] {
                let g = ChannelsLastDepthwiseGeometry(batch: 2, inHeight: h, inWidth: w, channels: c, kernelHeight: 3, kernelWidth: 3,
                                                      strideHeight: s, strideWidth: s, padTop: 1, padLeft: 1,
                                                      outHeight: (h + 2 - 3) / s + 1, outWidth: (w + 2 - 3) / s + 1)
                let pixels = g.outHeight * g.outWidth
                let input = rng.floats(2 * h * w * c), dw = rng.floats(9 * c), dwBias = rng.floats(c)
                let pw = rng.floats(c * m), pwBias = rng.floats(m), residual = rng.floats(2 * pixels * m)
                var middle = [Float](repeating: 0, count: 2 * pixels * c), expected = [Float](repeating: 0, count: 2 * pixels * m)
                channelsLastDepthwiseReference(g, input: input, weights: dw, bias: dwBias, residual: nil, activation: .clip(min: 0, max: 6),
                                               output: &middle)
                packedMatmulReference(middle, lda: c, rows: 2 * pixels, b: pw, depth: c, columns: m, bias: pwBias, residual: residual,
                                      activation: .hardSwish, out: &expected)
                var fast = [Float](repeating: .nan, count: expected.count)
                channelsLastSeparable(g, input: input, depthwiseWeights: dw, depthwiseBias: dwBias, depthwiseEpilogue: (0, 0, 6),
                                      pointwise: PackedMatrixB(pw, depth: c, columns: m), pointwiseBias: pwBias, residual: residual,
                                      activation: .hardSwish, output: &fast)
                expectClose(fast, expected, "\(body) c \(c) m \(m) s \(s)")
            }
        }
    }

    /// The fused inverted-residual block against the expand, depthwise and project twins, on both bodies: strides
    /// 1 and 2, kernels 3 and 5, odd sizes, batch 1 and 2, with and without a residual, band heights that do and do
    /// not divide the output rows (1, 2, 3, the automatic one).
    @Test func invertedResidualMatchesItsThreeConvsOnEveryBody() {
        var rng = SeededGenerator(seed: 13)
        let cases: [(cin: Int, c: Int, m: Int, h: Int, w: Int, k: Int, s: Int, pad: Int, batch: Int, residual: Bool)] = [
            (8, 48, 8, 9, 11, 3, 1, 1, 2, true), (5, 37, 16, 12, 7, 3, 2, 1, 1, false), (16, 40, 24, 11, 10, 5, 2, 2, 2, false),
            (12, 72, 12, 7, 9, 5, 1, 2, 1, true), (3, 20, 7, 13, 5, 3, 2, 0, 2, false),
            // Over a million multiply-adds at batch 1: the rows split into one segment per compute thread.
            (16, 96, 24, 24, 23, 3, 1, 1, 1, true),
            // A 5x5 at 7x7 whose segments' halos would repeat most of the expand: the expand runs whole first.
            (64, 384, 40, 7, 7, 5, 1, 2, 1, true),
        ]
        let activations: [(expand: Activation, depthwise: Activation, depthwiseCode: (Int32, Float, Float))] = [
            (.clip(min: 0, max: 6), .clip(min: 0, max: 6), (Int32(OSPREY_DW_CLAMP), 0, 6)),
            (.hardSwish, .hardSwish, (Int32(OSPREY_DW_HARDSWISH), -.infinity, .infinity)),
            (.silu, .silu, (Int32(OSPREY_DW_SILU), -.infinity, .infinity)),
            (.relu, .none, (Int32(OSPREY_DW_CLAMP), -.infinity, .infinity)),
        ]
        forEachFloatKernelBody { body in
            for t in cases {
                let (n, k, s) = (t.batch, t.k, t.s)
                let g = ChannelsLastDepthwiseGeometry(batch: n, inHeight: t.h, inWidth: t.w, channels: t.c, kernelHeight: k, kernelWidth: k,
                                                      strideHeight: s, strideWidth: s, padTop: t.pad, padLeft: t.pad,
                                                      outHeight: (t.h + 2 * t.pad - k) / s + 1, outWidth: (t.w + 2 * t.pad - k) / s + 1)
                let pixels = g.outHeight * g.outWidth
                let input = rng.floats(n * t.h * t.w * t.cin), ex = rng.floats(t.cin * t.c), exBias = rng.floats(t.c)
                let dw = rng.floats(k * k * t.c), dwBias = rng.floats(t.c), pw = rng.floats(t.c * t.m), pwBias = rng.floats(t.m)
                let residual: [Float]? = t.residual ? rng.floats(n * pixels * t.m) : nil
                for (exAct, dwAct, dwCode) in activations {
                    var expanded = [Float](repeating: 0, count: n * t.h * t.w * t.c), middle = [Float](repeating: 0, count: n * pixels * t.c)
                    var expected = [Float](repeating: 0, count: n * pixels * t.m)
                    packedMatmulReference(input, lda: t.cin, rows: n * t.h * t.w, b: ex, depth: t.cin, columns: t.c, bias: exBias, residual: nil,
                                          activation: exAct, out: &expanded)
                    channelsLastDepthwiseReference(g, input: expanded, weights: dw, bias: dwBias, residual: nil, activation: dwAct, output: &middle)
                    withOptional(residual) { rp in
                        packedMatmulReference(middle, lda: t.c, rows: n * pixels, b: pw, depth: t.c, columns: t.m, bias: pwBias, residual: rp,
                                              activation: .hardSwish, out: &expected)
                    }
                    for band in [1, 2, 3, nil] as [Int?] {
                        var fast = [Float](repeating: .nan, count: expected.count)
                        withOptional(residual) { rp in
                            channelsLastInvertedResidual(g, input: input, expand: PackedMatrixB(ex, depth: t.cin, columns: t.c), expandBias: exBias,
                                                         expandActivation: exAct, depthwiseWeights: dw, depthwiseBias: dwBias, depthwiseEpilogue: dwCode,
                                                         pointwise: PackedMatrixB(pw, depth: t.c, columns: t.m), pointwiseBias: pwBias, residual: rp,
                                                         activation: .hardSwish, output: &fast, bandRows: band)
                        }
                        expectClose(fast, expected, "\(body) \(t) \(exAct) band \(band.map(String.init) ?? "auto")")
                        // Without a project (a squeeze-and-excitation block): the depthwise output itself and its channel means.
                        var alone = [Float](repeating: .nan, count: middle.count), means = [Float](repeating: .nan, count: n * t.c)
                        channelsLastInvertedResidual(g, input: input, expand: PackedMatrixB(ex, depth: t.cin, columns: t.c), expandBias: exBias,
                                                     expandActivation: exAct, depthwiseWeights: dw, depthwiseBias: dwBias, depthwiseEpilogue: dwCode,
                                                     pointwise: nil, pointwiseBias: nil, residual: nil, activation: .none, output: &alone,
                                                     means: &means, bandRows: band)
                        expectClose(alone, middle, "\(body) \(t) \(exAct) no project band \(band.map(String.init) ?? "auto")")
                        expectClose(means, referenceMeans(middle, batch: n, pixels: pixels, channels: t.c),
                                    "\(body) \(t) \(exAct) means band \(band.map(String.init) ?? "auto")")
                    }
                }
            }
        }
    }

    /// The stem's patch product (NCHW in, NHWC out) against a direct convolution loop, on both bodies.
    @Test func patchConvMatchesDirectConvolutionOnEveryBody() {
        var rng = SeededGenerator(seed: 14)
        forEachFloatKernelBody { body in
            for (c, m, h, w, k, s, pad, batch) in [(3, 32, 17, 15, 3, 2, 1, 2), (3, 16, 9, 11, 3, 1, 1, 1), (1, 7, 8, 9, 5, 2, 2, 2), (4, 40, 40, 37, 3, 2, 0, 1),
                                                         (3, 24, 23, 29, 3, 3, 1, 3), (3, 16, 20, 41, 3, 2, 1, 2)] {
                let g = ChannelsLastDepthwiseGeometry(batch: batch, inHeight: h, inWidth: w, channels: c, kernelHeight: k, kernelWidth: k,
                                                      strideHeight: s, strideWidth: s, padTop: pad, padLeft: pad,
                                                      outHeight: (h + 2 * pad - k) / s + 1, outWidth: (w + 2 * pad - k) / s + 1)
                let input = rng.floats(batch * c * h * w), weights = rng.floats(m * c * k * k), bias = rng.floats(m)
                let siluActivation = Activation.silu
                var expected = [Float](repeating: 0, count: batch * g.outHeight * g.outWidth * m), sums = expected
                for n in 0..<batch { for y in 0..<g.outHeight { for x in 0..<g.outWidth { for o in 0..<m {
                    var sum = bias[o]
                    for ci in 0..<c { for i in 0..<k { for j in 0..<k {
                        let iy = y * s - pad + i, ix = x * s - pad + j
                        guard iy >= 0 && iy < h && ix >= 0 && ix < w else { continue }
                        sum += input[((n * c + ci) * h + iy) * w + ix] * weights[((o * c + ci) * k + i) * k + j]
                    } } }
                    expected[((n * g.outHeight + y) * g.outWidth + x) * m + o] = siluActivation(sum)
                    sums[((n * g.outHeight + y) * g.outWidth + x) * m + o] = sum
                } } } }
                var packedSource = [Float](repeating: 0, count: c * k * k * m)
                for o in 0..<m { for d in 0..<(c * k * k) { packedSource[d * m + o] = weights[o * c * k * k + d] } }
                var fast = [Float](repeating: .nan, count: expected.count)
                channelsLastPatchConv(g, input: input, PackedMatrixB(packedSource, depth: c * k * k, columns: m), bias: bias, activation: .silu,
                                      output: &fast)
                expectClose(fast, expected, "\(body) c \(c) m \(m) \(h)x\(w) k \(k) s \(s) batch \(batch)")
                // The direct kernel (AVX-512F only), with SiLU after it and Relu in its epilogue.
                let direct = weights.withUnsafeBufferPointer { wp in
                    bias.withUnsafeBufferPointer { bp in
                        DirectConvWeights(weights: wp.baseAddress!, bias: bp.baseAddress, outChannels: m, inChannels: c, kernelHeight: k,
                                          kernelWidth: k, block: 32)
                    }
                }
                guard directPatchConvFits(g, direct) else { continue }
                for activation in [Activation.silu, .relu] {
                    fast = [Float](repeating: .nan, count: expected.count)
                    channelsLastPatchConv(g, input: input, PackedMatrixB(packedSource, depth: c * k * k, columns: m), bias: bias,
                                          activation: activation, output: &fast, direct: direct)
                    expectClose(fast, sums.map { activation($0) }, "direct \(activation) c \(c) m \(m) \(h)x\(w) k \(k) s \(s) batch \(batch)")
                }
            }
        }
    }

    @Test func layoutConversionsRoundTrip() {
        var rng = SeededGenerator(seed: 7)
        for (n, c, h, w) in [(2, 3, 5, 7), (1, 17, 9, 9), (2, 1, 4, 4), (3, 40, 1, 1)] {
            let x = rng.floats(n * c * h * w)
            var last = [Float](repeating: 0, count: x.count), back = last
            convertLayout(x, &last, batch: n, channels: c, pixels: h * w, toChannelsLast: true)
            var expected = last
            for b in 0..<n { for k in 0..<c { for p in 0..<(h * w) { expected[(b * h * w + p) * c + k] = x[(b * c + k) * h * w + p] } } }
            #expect(last == expected, "\([n, c, h, w])")
            convertLayout(last, &back, batch: n, channels: c, pixels: h * w, toChannelsLast: false)
            #expect(back == x, "\([n, c, h, w])")
        }
    }

    /// A MobileNet-like graph: stem conv, depthwise + Relu6, projection with a residual Add, expansion + HardSwish,
    /// a strided 5x5 depthwise + HardSwish, a squeeze-and-excitation block, a projection, and an inner value that is
    /// also a graph output.
    /// `pool` is the squeeze: GlobalAveragePool, ReduceMean over H and W (the dynamo exporter's), or ReduceL2 (not a
    /// pool the planner knows, so with `scaleFirst` the kernel finds the Mul's operands the other way round at run time).
    static func mobileBlock(scaleFirst: Bool, pool: String = "GlobalAveragePool") -> Model {
        var rng = SeededGenerator(seed: 41)
        var inits: [(name: String, tensor: Tensor)] = []
        func weights(_ name: String, _ shape: [Int]) {
            inits.append((name: name, tensor: Tensor(shape: shape, scalars: rng.floats(Tensor.elementCount(shape)).map { $0 * 0.5 })))
            inits.append((name: name + "_b", tensor: Tensor(shape: [shape[0]], scalars: rng.floats(shape[0]))))
        }
        weights("stem", [8, 3, 3, 3]); weights("dw1", [8, 1, 3, 3]); weights("pw1", [8, 8, 1, 1]); weights("ex", [24, 8, 1, 1])
        weights("dw2", [24, 1, 5, 5]); weights("se1", [6, 24, 1, 1]); weights("se2", [24, 6, 1, 1]); weights("pj", [12, 24, 1, 1])
        inits.append((name: "zero", tensor: Tensor(scalar: Float(0)))); inits.append((name: "six", tensor: Tensor(scalar: Float(6))))
        func conv(_ name: String, _ input: String, _ attributes: [String: Attribute] = [:]) -> Node {
            Node(opType: "Conv", inputs: [input, name, name + "_b"], outputs: [name + "_y"], attributes: attributes)
        }
        let nodes = [
            conv("stem", "x", ["pads": .ints([1, 1, 1, 1])]), Node(opType: "Relu", inputs: ["stem_y"], outputs: ["a"]),
            conv("dw1", "a", ["group": .int(8), "pads": .ints([1, 1, 1, 1])]),
            Node(opType: "Clip", inputs: ["dw1_y", "zero", "six"], outputs: ["b"]),
            conv("pw1", "b"), Node(opType: "Add", inputs: ["pw1_y", "a"], outputs: ["r"]),
            conv("ex", "r"), Node(opType: "HardSwish", inputs: ["ex_y"], outputs: ["e"]),
            conv("dw2", "e", ["group": .int(24), "strides": .ints([2, 2]), "pads": .ints([2, 1, 2, 2])]),
            Node(opType: "HardSwish", inputs: ["dw2_y"], outputs: ["d"]),
            pool == "GlobalAveragePool" ? Node(opType: pool, inputs: ["d"], outputs: ["p"])
                : Node(opType: pool, inputs: ["d"], outputs: ["p"], attributes: ["axes": .ints([-1, -2]), "keepdims": .int(1)]),
            conv("se1", "p"), Node(opType: "Relu", inputs: ["se1_y"], outputs: ["s1"]),
            conv("se2", "s1"), Node(opType: "HardSigmoid", inputs: ["se2_y"], outputs: ["s"], attributes: ["alpha": .float(1.0 / 6)]),
            Node(opType: "Mul", inputs: scaleFirst ? ["s", "d"] : ["d", "s"], outputs: ["m"]),
            conv("pj", "m"),
        ]
        let inputs = [ValueInfo(name: "x", elementType: .float32, shape: [.symbolic("N"), .fixed(3), .fixed(10), .fixed(9)])]
        return Model(opsetImports: ["": 17], graph: Graph(name: "mobile", nodes: nodes, initializers: inits, inputs: inputs,
                                                          outputs: [ValueInfo(name: "pj_y"), ValueInfo(name: "r")]))
    }

    @Test(arguments: [false, true], ["GlobalAveragePool", "ReduceMean", "ReduceL2"])
    func regionGivesTheSameOutputs(scaleFirst: Bool, pool: String) throws {
        let region = try CompiledModel(model: Self.mobileBlock(scaleFirst: scaleFirst, pool: pool), baseDirectory: nil, fuseResiduals: true)
        let plain = try CompiledModel(model: Self.mobileBlock(scaleFirst: scaleFirst, pool: pool), baseDirectory: nil, fuseResiduals: true, channelsLast: false)
        var rng = SeededGenerator(seed: 9)
        // The CPU's own bodies only: switching AVX-512 off here would change what concurrently running tests compute.
        do {
            let body = "default"
            for batch in [1, 2] {
                let x = Tensor(shape: [batch, 3, 10, 9], scalars: rng.floats(batch * 270))
                let a = try region.run(["x": x]), b = try plain.run(["x": x])
                for name in ["pj_y", "r"] {
                    #expect(a[name]!.shape == b[name]!.shape, "\(body) \(name) batch \(batch)")
                    #expect(T.close(T.floats(a[name]!), T.floats(b[name]!)), "\(body) \(name) batch \(batch)")
                }
                let split = try region.runSplittingRows(["x": x], parts: 2)
                #expect(T.close(T.floats(split["pj_y"]!), T.floats(b["pj_y"]!)), "\(body) row split batch \(batch)")
            }
        }
        guard pool == "GlobalAveragePool" else { return }
        let kinds = Set(try region.profile(["x": Tensor(shape: [1, 3, 10, 9], scalars: rng.floats(270))]).map(\.opType))
        #expect(kinds.isSuperset(of: [channelsLastSeparableOp + "+Add", channelsLastInvertedResidualOp + "+hardSwish", channelsLastPointwiseOp + "+Mul",
                                      channelsLastPatchConvOp + "+relu", toChannelsFirstOp, channelsLastPointwiseOp + "+relu"]), "\(kinds)")
        // The squeeze-and-excitation pool is the block's second output.
        #expect(!kinds.contains("Conv+Mul") && !kinds.contains(channelsLastMeanOp), "\(kinds)")
    }

    /// Two inverted-residual blocks (Relu6 with a residual Add; a strided 5x5 with HardSwish and none) fuse into
    /// single block ops and give the unfused NCHW graph's outputs at batch 1 and 2 on odd sizes.
    @Test func invertedResidualBlocksFuseAndGiveTheSameOutputs() throws {
        var rng = SeededGenerator(seed: 43)
        var inits: [(name: String, tensor: Tensor)] = []
        func weights(_ name: String, _ shape: [Int]) {
            inits.append((name: name, tensor: Tensor(shape: shape, scalars: rng.floats(Tensor.elementCount(shape)).map { $0 * 0.5 })))
            inits.append((name: name + "_b", tensor: Tensor(shape: [shape[0]], scalars: rng.floats(shape[0]))))
        }
        weights("ex1", [48, 8, 1, 1]); weights("dw1", [48, 1, 3, 3]); weights("pj1", [8, 48, 1, 1])
        weights("ex2", [40, 8, 1, 1]); weights("dw2", [40, 1, 5, 5]); weights("pj2", [12, 40, 1, 1])
        inits.append((name: "zero", tensor: Tensor(scalar: Float(0)))); inits.append((name: "six", tensor: Tensor(scalar: Float(6))))
        func conv(_ name: String, _ input: String, _ attributes: [String: Attribute] = [:]) -> Node {
            Node(opType: "Conv", inputs: [input, name, name + "_b"], outputs: [name + "_y"], attributes: attributes)
        }
        let nodes = [
            conv("ex1", "x"), Node(opType: "Clip", inputs: ["ex1_y", "zero", "six"], outputs: ["e1"]),
            conv("dw1", "e1", ["group": .int(48), "pads": .ints([1, 1, 1, 1])]), Node(opType: "Clip", inputs: ["dw1_y", "zero", "six"], outputs: ["d1"]),
            conv("pj1", "d1"), Node(opType: "Add", inputs: ["pj1_y", "x"], outputs: ["r"]),
            conv("ex2", "r"), Node(opType: "HardSwish", inputs: ["ex2_y"], outputs: ["e2"]),
            conv("dw2", "e2", ["group": .int(40), "strides": .ints([2, 2]), "pads": .ints([2, 2, 2, 2])]),
            Node(opType: "HardSwish", inputs: ["dw2_y"], outputs: ["d2"]), conv("pj2", "d2"),
        ]
        let inputs = [ValueInfo(name: "x", elementType: .float32, shape: [.symbolic("N"), .fixed(8), .fixed(11), .fixed(9)])]
        let model = Model(opsetImports: ["": 17], graph: Graph(name: "blocks", nodes: nodes, initializers: inits, inputs: inputs,
                                                               outputs: [ValueInfo(name: "pj2_y")]))
        let fused = try CompiledModel(model: model, baseDirectory: nil, fuseResiduals: true)
        let plain = try CompiledModel(model: model, baseDirectory: nil, fuseResiduals: true, channelsLast: false)
        for batch in [1, 2] {
            let x = Tensor(shape: [batch, 8, 11, 9], scalars: rng.floats(batch * 792))
            let a = try fused.run(["x": x]), b = try plain.run(["x": x])
            #expect(a["pj2_y"]!.shape == b["pj2_y"]!.shape, "batch \(batch)")
            #expect(T.close(T.floats(a["pj2_y"]!), T.floats(b["pj2_y"]!)), "batch \(batch)")
        }
        let kinds = try fused.profile(["x": Tensor(shape: [1, 8, 11, 9], scalars: rng.floats(792))]).map(\.opType)
        #expect(kinds.filter { $0.hasPrefix(channelsLastInvertedResidualOp) }.count == 2, "\(kinds)")
        #expect(!kinds.contains { $0.hasPrefix(channelsLastPointwiseOp) || $0.hasPrefix(channelsLastSeparableOp) }, "\(kinds)")
    }

    /// A depthwise conv whose output a squeeze-and-excitation branch pools (EfficientNet-B0's first block): the pool
    /// becomes the depthwise step's second output and the graph gives the NCHW plan's outputs at batch 1 and 2.
    @Test func squeezePoolFusesIntoTheDepthwiseStep() throws {
        var rng = SeededGenerator(seed: 47)
        var inits: [(name: String, tensor: Tensor)] = []
        func weights(_ name: String, _ shape: [Int]) {
            inits.append((name: name, tensor: Tensor(shape: shape, scalars: rng.floats(Tensor.elementCount(shape)).map { $0 * 0.5 })))
            inits.append((name: name + "_b", tensor: Tensor(shape: [shape[0]], scalars: rng.floats(shape[0]))))
        }
        weights("stem", [24, 3, 3, 3]); weights("dw", [24, 1, 3, 3]); weights("se1", [6, 24, 1, 1]); weights("se2", [24, 6, 1, 1])
        weights("pj", [16, 24, 1, 1])
        func conv(_ name: String, _ input: String, _ attributes: [String: Attribute] = [:]) -> Node {
            Node(opType: "Conv", inputs: [input, name, name + "_b"], outputs: [name + "_y"], attributes: attributes)
        }
        let nodes = [
            conv("stem", "x", ["pads": .ints([1, 1, 1, 1]), "strides": .ints([2, 2])]), Node(opType: "Relu", inputs: ["stem_y"], outputs: ["a"]),
            conv("dw", "a", ["group": .int(24), "pads": .ints([1, 1, 1, 1])]), Node(opType: "Relu", inputs: ["dw_y"], outputs: ["d"]),
            Node(opType: "GlobalAveragePool", inputs: ["d"], outputs: ["p"]),
            conv("se1", "p"), Node(opType: "Relu", inputs: ["se1_y"], outputs: ["s1"]),
            conv("se2", "s1"), Node(opType: "Sigmoid", inputs: ["se2_y"], outputs: ["s"]),
            Node(opType: "Mul", inputs: ["d", "s"], outputs: ["m"]), conv("pj", "m"),
        ]
        let inputs = [ValueInfo(name: "x", elementType: .float32, shape: [.symbolic("N"), .fixed(3), .fixed(29), .fixed(27)])]
        let model = Model(opsetImports: ["": 17], graph: Graph(name: "se", nodes: nodes, initializers: inits, inputs: inputs,
                                                               outputs: [ValueInfo(name: "pj_y")]))
        let fused = try CompiledModel(model: model, baseDirectory: nil, fuseResiduals: true)
        let plain = try CompiledModel(model: model, baseDirectory: nil, fuseResiduals: true, channelsLast: false)
        for batch in [1, 2] {
            let x = Tensor(shape: [batch, 3, 29, 27], scalars: rng.floats(batch * 3 * 29 * 27))
            let a = try fused.run(["x": x]), b = try plain.run(["x": x])
            #expect(a["pj_y"]!.shape == b["pj_y"]!.shape, "batch \(batch)")
            #expect(T.close(T.floats(a["pj_y"]!), T.floats(b["pj_y"]!)), "batch \(batch)")
        }
        let kinds = try fused.profile(["x": Tensor(shape: [1, 3, 29, 27], scalars: rng.floats(3 * 29 * 27))]).map(\.opType)
        #expect(kinds.contains(channelsLastDepthwiseOp + "+relu") && !kinds.contains(channelsLastMeanOp), "\(kinds)")
    }

    /// ConvNeXt-shaped blocks (7x7 depthwise, Transpose to NHWC, LayerNorm, MLP, Transpose back, residual Add) and a
    /// downsampling 2x2 conv between two stages: channels-last, the block Transposes run no kernel and the graph
    /// gives the NCHW plan's outputs (an intermediate residual one of them) at batch 1 and 2 on odd sizes.
    @Test func convNeXtBlocksDropTheirTransposes() throws {
        var rng = SeededGenerator(seed: 53)
        var inits: [(name: String, tensor: Tensor)] = []
        func constant(_ name: String, _ shape: [Int], _ scale: Float = 0.5) {
            inits.append((name: name, tensor: Tensor(shape: shape, scalars: rng.floats(Tensor.elementCount(shape)).map { $0 * scale })))
        }
        var nodes: [Node] = []
        func block(_ p: String, _ x: String, _ c: Int) -> String {
            constant(p + "dw", [c, 1, 7, 7]); constant(p + "dwb", [c]); constant(p + "g", [c]); constant(p + "b", [c])
            constant(p + "w1", [c, 4 * c]); constant(p + "b1", [4 * c]); constant(p + "w2", [4 * c, c]); constant(p + "b2", [c])
            constant(p + "s", [c, 1, 1], 0.1)
            nodes += [
                Node(opType: "Conv", inputs: [x, p + "dw", p + "dwb"], outputs: [p + "d"], attributes: ["group": .int(Int64(c)), "pads": .ints([3, 3, 3, 3])]),
                Node(opType: "Transpose", inputs: [p + "d"], outputs: [p + "t"], attributes: ["perm": .ints([0, 2, 3, 1])]),
                Node(opType: "LayerNormalization", inputs: [p + "t", p + "g", p + "b"], outputs: [p + "n"], attributes: ["axis": .int(-1)]),
                Node(opType: "MatMul", inputs: [p + "n", p + "w1"], outputs: [p + "m1"]), Node(opType: "Add", inputs: [p + "m1", p + "b1"], outputs: [p + "a1"]),
                Node(opType: "Relu", inputs: [p + "a1"], outputs: [p + "h"]),
                Node(opType: "MatMul", inputs: [p + "h", p + "w2"], outputs: [p + "m2"]), Node(opType: "Add", inputs: [p + "m2", p + "b2"], outputs: [p + "a2"]),
                Node(opType: "Transpose", inputs: [p + "a2"], outputs: [p + "u"], attributes: ["perm": .ints([0, 3, 1, 2])]),
                Node(opType: "Mul", inputs: [p + "u", p + "s"], outputs: [p + "l"]), Node(opType: "Add", inputs: [p + "l", x], outputs: [p + "r"]),
            ]
            return p + "r"
        }
        let r1 = block("a", "x", 8), r2 = block("b", r1, 8)
        constant("zg", [8]); constant("zb", [8]); constant("down", [16, 8, 2, 2]); constant("downb", [16])
        nodes += [
            Node(opType: "Transpose", inputs: [r2], outputs: ["zt"], attributes: ["perm": .ints([0, 2, 3, 1])]),
            Node(opType: "LayerNormalization", inputs: ["zt", "zg", "zb"], outputs: ["zn"], attributes: ["axis": .int(-1)]),
            Node(opType: "Transpose", inputs: ["zn"], outputs: ["zu"], attributes: ["perm": .ints([0, 3, 1, 2])]),
            Node(opType: "Conv", inputs: ["zu", "down", "downb"], outputs: ["s2"], attributes: ["strides": .ints([2, 2])]),
        ]
        let r3 = block("c", "s2", 16), r4 = block("d", r3, 16)
        nodes.append(Node(opType: "GlobalAveragePool", inputs: [r4], outputs: ["pool"]))
        let inputs = [ValueInfo(name: "x", elementType: .float32, shape: [.symbolic("N"), .fixed(8), .fixed(11), .fixed(9)])]
        let model = Model(opsetImports: ["": 17], graph: Graph(name: "convnext", nodes: nodes, initializers: inits, inputs: inputs,
                                                               outputs: [ValueInfo(name: "pool"), ValueInfo(name: r1)]))
        let fused = try CompiledModel(model: model, baseDirectory: nil, fuseResiduals: true)
        let plain = try CompiledModel(model: model, baseDirectory: nil, fuseResiduals: true, channelsLast: false)
        for batch in [1, 2] {
            let x = Tensor(shape: [batch, 8, 11, 9], scalars: rng.floats(batch * 792))
            let a = try fused.run(["x": x]), b = try plain.run(["x": x])
            for name in ["pool", r1] {
                #expect(a[name]!.shape == b[name]!.shape, "\(name) batch \(batch)")
                #expect(T.close(T.floats(a[name]!), T.floats(b[name]!)), "\(name) batch \(batch)")
            }
        }
        let steps = try fused.profile(["x": Tensor(shape: [1, 8, 11, 9], scalars: rng.floats(792))])
        // The only Transpose left feeds the NCHW downsampling conv.
        #expect(steps.filter { $0.opType == "Transpose" }.map(\.nodes) == [1], "\(steps.map(\.opType))")
        #expect(steps.contains { $0.opType == channelsLastDepthwiseOp && $0.nodes == 4 }, "\(steps.map(\.opType))")
        // Each block's LayerNorm runs in its depthwise step; the downsampling one reads a residual sum and stays.
        #expect(steps.filter { $0.opType == "LayerNormalization" }.map(\.nodes) == [1], "\(steps.map(\.opType))")
    }

    /// The depthwise kernel with a fused channel norm against the plain conv followed by the LayerNorm rows, on 7x7 and
    /// 3x3 kernels, channel tails and batch 2 (rows split across the engine's threads).
    @Test func depthwiseWithChannelNormMatchesConvThenNorm() {
        var rng = SeededGenerator(seed: 59)
        for (c, h, w, k) in [(19, 9, 8, 7), (40, 14, 14, 7), (33, 5, 7, 3)] {
            let p = k / 2
            let g = ChannelsLastDepthwiseGeometry(batch: 2, inHeight: h, inWidth: w, channels: c, kernelHeight: k, kernelWidth: k,
                                                  strideHeight: 1, strideWidth: 1, padTop: p, padLeft: p, outHeight: h, outWidth: w)
            let input = rng.floats(2 * h * w * c), weights = rng.floats(k * k * c), bias = rng.floats(c)
            let norm = ChannelNorm(gamma: rng.floats(c), beta: rng.floats(c), epsilon: 1e-6)
            var reference = [Float](repeating: .nan, count: 2 * h * w * c)
            channelsLastDepthwiseReference(g, input: input, weights: weights, bias: bias, residual: nil, activation: .none, output: &reference)
            reference.withUnsafeMutableBufferPointer { r in
                layerNormRows(r.baseAddress!, rows: 2 * h * w, width: c, gamma: norm.gamma, beta: norm.beta, epsilon: norm.epsilon)
            }
            var fused = [Float](repeating: .nan, count: reference.count)
            channelsLastDepthwise(g, input: input, weights: weights, bias: bias, residual: nil, activation: .none, output: &fused, norm: norm)
            expectClose(fused, reference, "c \(c) \(h)x\(w) k \(k)")
        }
    }

    /// One depthwise conv alone is not worth two conversions: the graph stays NCHW.
    @Test func lonelyDepthwiseStaysChannelsFirst() throws {
        let w = Tensor(shape: [4, 1, 3, 3], scalars: [Float](repeating: 0.1, count: 36))
        let graph = Graph(name: "dw", nodes: [Node(opType: "Conv", inputs: ["x", "w"], outputs: ["y"], attributes: ["group": .int(4)])],
                          initializers: [(name: "w", tensor: w)],
                          inputs: [ValueInfo(name: "x", elementType: .float32, shape: [.fixed(1), .fixed(4), .fixed(5), .fixed(5)])],
                          outputs: [ValueInfo(name: "y")])
        let model = try CompiledModel(model: Model(opsetImports: ["": 17], graph: graph), baseDirectory: nil, fuseResiduals: true)
        let kinds = Set(try model.profile(["x": Tensor(shape: [1, 4, 5, 5], scalars: [Float](repeating: 1, count: 100))]).map(\.opType))
        #expect(kinds == ["Conv"], "\(kinds)")
    }
}

/// Channel means [N][C] of an NHWC tensor [N][pixels][C], summed in plain loops.
private func referenceMeans(_ x: [Float], batch: Int, pixels: Int, channels: Int) -> [Float] {
    var means = [Float](repeating: 0, count: batch * channels)
    for n in 0..<batch { for p in 0..<pixels { for k in 0..<channels { means[n * channels + k] += x[(n * pixels + p) * channels + k] } } }
    return means.map { $0 / Float(pixels) }
}

/// Runs `body` with the array's pointer, or nil.
private func withOptional<R>(_ values: [Float]?, _ body: (UnsafePointer<Float>?) -> R) -> R {
    guard let values else { return body(nil) }
    return values.withUnsafeBufferPointer { body($0.baseAddress) }
}
