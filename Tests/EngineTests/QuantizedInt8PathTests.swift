import CKernelShim
import Testing
import Tensor
import ONNX
@testable import Engine
import TestSupport

/// The int8 paths (u8 x s8 GEMM with fused requantization, int16 GEMM with the same epilogue, depthwise kernel,
/// row GEMM of the MatMuls) against the exact reference paths, and each AVX2 body against its portable twin.
/// Constant weights take the integer kernels; the same weights fed as graph inputs take the reference loops.
@Suite(.serialized) struct QuantizedInt8PathTests {
    private func bytes<T: FixedWidthInteger & TensorScalar>(_ shape: [Int], _ rng: inout SeededGenerator, _ range: ClosedRange<T>) -> Tensor {
        Tensor(shape: shape, scalars: (0..<shape.reduce(1, *)).map { _ in T.random(in: range, using: &rng) })
    }

    private func same(_ a: Tensor, _ b: Tensor, _ label: String) {
        #expect(a.shape == b.shape && a.dtype == b.dtype, "\(label): \(a.shape) \(a.dtype) vs \(b.shape) \(b.dtype)")
        switch a.dtype {
        case .int32: #expect(a.scalars(as: Int32.self) == b.scalars(as: Int32.self), "\(label)")
        case .uint8: #expect(a.scalars(as: UInt8.self) == b.scalars(as: UInt8.self), "\(label)")
        case .int8: #expect(a.scalars(as: Int8.self) == b.scalars(as: Int8.self), "\(label)")
        default: #expect(TestSupport.close(TestSupport.floats(a), TestSupport.floats(b), relative: 1e-6, absolute: 0), "\(label)")
        }
    }

    /// Runs `op` with `weights` as initializers: with the CPU's bodies (VNNI where present), with the AVX2 bodies
    /// forced (plans then split or widen full-range weights), with the portable bodies, and with the weights as graph
    /// inputs (the reference loops); all must agree exactly.
    private func agree(_ op: String, _ inputs: [(String, Tensor)], weights: Set<String>, attributes: [String: Attribute] = [:], _ label: String) throws {
        let fast = try TestSupport.runNode(op, inputs, attributes: attributes, constants: weights)[0]
        if osprey_qkernels_force_path(Int32(OSPREY_QPATH_AVX2)) == OSPREY_QPATH_AVX2 {
            let avx2 = try TestSupport.runNode(op, inputs, attributes: attributes, constants: weights)[0]
            _ = osprey_qkernels_force_path(-1)
            same(avx2, fast, "\(label): AVX2 vs the CPU's bodies")
        }
        osprey_qkernels_force_portable(1)
        let portable = try TestSupport.runNode(op, inputs, attributes: attributes, constants: weights)[0]
        osprey_qkernels_force_portable(0)
        let reference = try TestSupport.runNode(op, inputs, attributes: attributes)[0]
        same(fast, portable, "\(label): AVX2 vs portable")
        same(fast, reference, "\(label): kernel vs reference")
    }

    @Test func convolutionsOnEveryIntegerPathMatchTheReference() throws {
        var rng = SeededGenerator(seed: 21)
        // (channels, out channels, groups, kernel, stride, pad, dilation, size): pointwise, im2col, grouped, depthwise
        // with stride 1 and 2 and dilation, on planes narrower and wider than the kernels' 16-output vectors (narrow
        // ones take the channel kernel: 40 and 20 channels give whole and partial 16-channel blocks, across images), a
        // pointwise K of 7 over 8 full panels (the two-panel packing and a partial quad), a stride-2 im2col 20 wide.
        // Columns past the last full panel (9 x 10, 11 x 12, grouped 8 x 9) take the row-panel tail; a stride-2
        // depthwise 14 wide the planar kernel.
        let shapes = [(16, 24, 1, 1, 1, 0, 1, 9), (3, 20, 1, 3, 2, 1, 1, 13), (8, 12, 2, 3, 1, 1, 1, 8), (12, 12, 12, 3, 1, 1, 1, 11),
                      (10, 10, 10, 3, 2, 1, 1, 14), (6, 6, 6, 5, 2, 2, 1, 12), (5, 5, 5, 3, 1, 2, 2, 9), (4, 4, 4, 3, 1, 1, 1, 37),
                      (3, 3, 3, 3, 2, 1, 1, 41), (40, 40, 40, 3, 1, 1, 1, 6), (20, 20, 20, 3, 2, 1, 1, 13), (18, 18, 18, 5, 1, 2, 1, 7),
                      (7, 9, 1, 1, 1, 0, 1, 11), (3, 8, 1, 3, 2, 1, 1, 40), (6, 6, 6, 3, 2, 1, 1, 26)]
        for (c, m, g, kernel, stride, pad, dilation, size) in shapes {
            let attributes: [String: Attribute] = ["kernel_shape": .ints([Int64(kernel), Int64(kernel)]), "strides": .ints([Int64(stride), Int64(stride)]),
                                                   "pads": .ints([Int64(pad), Int64(pad), Int64(pad), Int64(pad)]),
                                                   "dilations": .ints([Int64(dilation), Int64(dilation)]), "group": .int(Int64(g))]
            // Weights within [-64, 64] take the u8 x s8 GEMM; full-range weights the int16 GEMM.
            for (signedInput, weightRange) in [(false, Int8(-64)...64), (true, Int8(-64)...64), (false, Int8(-128)...127)] {
                let label = "c \(c) m \(m) group \(g) kernel \(kernel) stride \(stride) pad \(pad) dilation \(dilation) signed x \(signedInput) w \(weightRange)"
                let x: Tensor = signedInput ? bytes([2, c, size, size + 1], &rng, Int8(-128)...127) : bytes([2, c, size, size + 1], &rng, UInt8(0)...255)
                let xz = signedInput ? Tensor(scalar: Int8(-3)) : Tensor(scalar: UInt8(120))
                let w: Tensor = bytes([m, c / g, kernel, kernel], &rng, weightRange)
                let bias = Tensor(shape: [m], scalars: (0..<m).map { _ in Int32.random(in: -3000...3000, using: &rng) })
                let ws = Tensor(shape: [m], scalars: (0..<m).map { _ in Float.random(in: 0.002...0.01, using: &rng) })
                let zeros = Tensor(shape: [m], scalars: [Int8](repeating: 0, count: m))
                try agree("ConvInteger", [("x", x), ("w", w), ("xz", xz), ("wz", zeros)], weights: ["w", "wz"], attributes: attributes, "ConvInteger \(label)")
                for yz in [Tensor(scalar: UInt8(128)), Tensor(scalar: Int8(5))] {
                    try agree("QLinearConv", [("x", x), ("xs", Tensor(scalar: Float(0.02))), ("xz", xz), ("w", w), ("ws", ws), ("wz", zeros),
                                              ("ys", Tensor(scalar: Float(0.15))), ("yz", yz), ("b", bias)],
                              weights: ["w", "ws", "wz", "b"], attributes: attributes, "QLinearConv \(label) y \(yz.dtype)")
                }
            }
        }
    }

    /// The row GEMM (6-row tiles, 16-column panels): partial tiles and panels, K off and on whole quads, int8 and uint8 A.
    @Test func matMulsOnTheRowGemmMatchTheReference() throws {
        var rng = SeededGenerator(seed: 22)
        for (aShape, bShape) in [([3, 7], [7, 5]), ([2, 19, 33], [33, 40]), ([1, 300], [300, 17]), ([6], [6, 3]), ([5, 26, 64], [64, 48])] {
            for signedInput in [false, true] {
                let a: Tensor = signedInput ? bytes(aShape, &rng, Int8(-128)...127) : bytes(aShape, &rng, UInt8(0)...255)
                let az = signedInput ? Tensor(scalar: Int8(9)) : Tensor(scalar: UInt8(131))
                let n = bShape[1]
                let b: Tensor = bytes(bShape, &rng, UInt8(70)...190)
                let bz: Tensor = bytes([n], &rng, UInt8(126)...130)
                let label = "\(aShape) x \(bShape) signed a \(signedInput)"
                try agree("MatMulInteger", [("a", a), ("b", b), ("az", az), ("bz", bz)], weights: ["b", "bz"], "MatMulInteger \(label)")
                let bs = Tensor(shape: [n], scalars: (0..<n).map { _ in Float.random(in: 0.001...0.01, using: &rng) })
                try agree("QLinearMatMul", [("a", a), ("as", Tensor(scalar: Float(0.02))), ("az", az), ("b", b), ("bs", bs), ("bz", bz),
                                            ("ys", Tensor(scalar: Float(0.3))), ("yz", Tensor(scalar: UInt8(100)))],
                          weights: ["b", "bs", "bz"], "QLinearMatMul \(label)")
            }
        }
    }

    @Test func dynamicQuantizeMatMulMatchesTheDoublePath() throws {
        var rng = SeededGenerator(seed: 23)
        let (k, n) = (40, 24)
        let a = Tensor(shape: [2, 5, k], scalars: rng.floats(2 * 5 * k).map { $0 * 3 })
        let b: Tensor = bytes([k, n], &rng, Int8(-60)...60)
        let bs = Tensor(shape: [n], scalars: (0..<n).map { _ in Float.random(in: 0.001...0.01, using: &rng) })
        let bias = Tensor(shape: [n], scalars: rng.floats(n))
        let inputs: [(String, Tensor)] = [("a", a), ("b", b), ("bs", bs), ("bz", Tensor(scalar: Int8(0))), ("bias", bias)]
        func run(constants: Set<String>) throws -> Tensor {
            let node = Node(name: "n", opType: "DynamicQuantizeMatMul", domain: "com.microsoft", inputs: inputs.map(\.0), outputs: ["y"])
            let graphInputs = inputs.filter { !constants.contains($0.0) }.map { ValueInfo(name: $0.0, elementType: $0.1.dtype, shape: $0.1.shape.map { .fixed($0) }) }
            let graph = Graph(name: "g", nodes: [node], initializers: inputs.filter { constants.contains($0.0) }.map { (name: $0.0, tensor: $0.1) },
                              inputs: graphInputs, outputs: [ValueInfo(name: "y")])
            let model = try CompiledModel(model: Model(opsetImports: ["": 17, "com.microsoft": 1], graph: graph))
            return try model.run(Dictionary(uniqueKeysWithValues: inputs.filter { !constants.contains($0.0) }))["y"]!
        }
        let fast = try run(constants: ["b", "bs", "bz", "bias"]), reference = try run(constants: [])
        same(fast, reference, "DynamicQuantizeMatMul")
    }

    /// QGemm at batch 1 to 3 and at 9 rows (a partial and a whole 6-row tile of `osprey_qgemv_u8s8`): each
    /// AVX2 body equals its portable twin, and both stay within the double-precision path's rounding (float output)
    /// or one step (8-bit output).
    @Test func qgemmOnFewRowsMatchesTheDoublePath() throws {
        var rng = SeededGenerator(seed: 25)
        let (k, n) = (70, 37)
        for (rows, signedInput, transB) in [(1, false, true), (3, true, false), (9, false, true)] {
            let a: Tensor = signedInput ? bytes([rows, k], &rng, Int8(-128)...127) : bytes([rows, k], &rng, UInt8(0)...255)
            let az = signedInput ? Tensor(scalar: Int8(-7)) : Tensor(scalar: UInt8(131))
            let b: Tensor = bytes(transB ? [n, k] : [k, n], &rng, Int8(-60)...60)
            let bs = Tensor(shape: [n], scalars: (0..<n).map { _ in Float.random(in: 0.001...0.01, using: &rng) })
            let c = Tensor(shape: [n], scalars: (0..<n).map { _ in Int32.random(in: -900...900, using: &rng) })
            for quantizedOutput in [false, true] {
                var inputs: [(String, Tensor)] = [("a", a), ("as", Tensor(scalar: Float(0.02))), ("az", az), ("b", b), ("bs", bs),
                                                  ("bz", Tensor(scalar: Int8(0))), ("c", c)]
                if quantizedOutput { inputs += [("ys", Tensor(scalar: Float(0.04))), ("yz", Tensor(scalar: UInt8(100)))] }
                func run(constants: Set<String>) throws -> Tensor {
                    let node = Node(name: "n", opType: "QGemm", domain: "com.microsoft", inputs: inputs.map(\.0), outputs: ["y"],
                                    attributes: ["transB": .int(transB ? 1 : 0), "alpha": .float(0.5)])
                    let graphInputs = inputs.filter { !constants.contains($0.0) }.map { ValueInfo(name: $0.0, elementType: $0.1.dtype, shape: $0.1.shape.map { .fixed($0) }) }
                    let graph = Graph(name: "g", nodes: [node], initializers: inputs.filter { constants.contains($0.0) }.map { (name: $0.0, tensor: $0.1) },
                                      inputs: graphInputs, outputs: [ValueInfo(name: "y")])
                    let model = try CompiledModel(model: Model(opsetImports: ["": 17, "com.microsoft": 1], graph: graph))
                    return try model.run(Dictionary(uniqueKeysWithValues: inputs.filter { !constants.contains($0.0) }))["y"]!
                }
                let weights: Set<String> = ["b", "bs", "bz", "c", "ys", "yz"]
                let fast = try run(constants: weights)
                osprey_qkernels_force_portable(1)
                let portable = try run(constants: weights)
                osprey_qkernels_force_portable(0)
                let reference = try run(constants: [])
                let label = "QGemm rows \(rows) signed a \(signedInput) transB \(transB) quantized \(quantizedOutput)"
                same(fast, portable, "\(label): AVX2 vs portable")
                #expect(fast.shape == reference.shape && fast.dtype == reference.dtype, "\(label)")
                if quantizedOutput {
                    let steps = zip(fast.scalars(as: UInt8.self), reference.scalars(as: UInt8.self)).map { abs(Int($0) - Int($1)) }.max() ?? 0
                    #expect(steps <= 1, "\(label): \(steps) steps from the double path")
                } else {
                    #expect(TestSupport.close(TestSupport.floats(fast), TestSupport.floats(reference)), "\(label): vs the double path")
                }
            }
        }
    }

    /// Every centred weight up to 255 splits into parts within [-64, 64] that sum back to it.
    @Test func fullRangeWeightsSplitIntoExactParts() {
        for pieces in 1...4 {
            for v in Int32(-64 * pieces)...Int32(64 * pieces) {
                let parts = splitWeight(v, pieces: pieces)
                #expect(parts.count == pieces && parts.reduce(Int32(0)) { $0 + Int32($1) } == v && parts.allSatisfy { abs($0) <= 64 }, "\(v) in \(pieces)")
            }
        }
    }

    /// QGemm with full-range B (int8 over [-128, 127], uint8 with a zero point): the split u8 x s8 path gives the
    /// double path's integer sums exactly (float output within its rounding), at batch 1 (column panels) and 9.
    @Test func qgemmWithFullRangeWeightsMatchesTheDoublePath() throws {
        var rng = SeededGenerator(seed: 26)
        let (k, n) = (45, 21)
        for (rows, unsignedB) in [(1, false), (9, false), (2, true)] {
            let a = bytes([rows, k], &rng, UInt8(0)...255)
            let b: Tensor = unsignedB ? bytes([n, k], &rng, UInt8(0)...255) : bytes([n, k], &rng, Int8(-128)...127)
            let bz = unsignedB ? Tensor(scalar: UInt8(9)) : Tensor(scalar: Int8(0))
            let inputs: [(String, Tensor)] = [("a", a), ("as", Tensor(scalar: Float(0.02))), ("az", Tensor(scalar: UInt8(117))), ("b", b),
                                              ("bs", Tensor(scalar: Float(0.003))), ("bz", bz)]
            func run(constants: Set<String>) throws -> Tensor {
                let node = Node(name: "n", opType: "QGemm", domain: "com.microsoft", inputs: inputs.map(\.0), outputs: ["y"], attributes: ["transB": .int(1)])
                let graphInputs = inputs.filter { !constants.contains($0.0) }.map { ValueInfo(name: $0.0, elementType: $0.1.dtype, shape: $0.1.shape.map { .fixed($0) }) }
                let graph = Graph(name: "g", nodes: [node], initializers: inputs.filter { constants.contains($0.0) }.map { (name: $0.0, tensor: $0.1) },
                                  inputs: graphInputs, outputs: [ValueInfo(name: "y")])
                let model = try CompiledModel(model: Model(opsetImports: ["": 17, "com.microsoft": 1], graph: graph))
                return try model.run(Dictionary(uniqueKeysWithValues: inputs.filter { !constants.contains($0.0) }))["y"]!
            }
            let fast = try run(constants: ["b", "bs", "bz"])
            osprey_qkernels_force_portable(1)
            let portable = try run(constants: ["b", "bs", "bz"])
            osprey_qkernels_force_portable(0)
            let reference = try run(constants: [])
            let label = "full-range QGemm rows \(rows) uint8 B \(unsignedB)"
            same(fast, portable, "\(label): AVX2 vs portable")
            #expect(TestSupport.close(TestSupport.floats(fast), TestSupport.floats(reference)), "\(label): vs the double path")
        }
    }

    @Test func elementwiseKernelsMatchTheirPortableBodies() {
        var rng = SeededGenerator(seed: 24)
        let count = 1000
        let a = (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }, b = (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }
        for (isMul, isSigned) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
            var fast = [UInt8](repeating: 0, count: count), portable = fast
            osprey_qlinear_binary(Int32(isMul), Int32(isSigned), count, a, 0.05, 3, b, 0.02, 250, 0.07, 10, &fast)
            osprey_qkernels_force_portable(1)
            osprey_qlinear_binary(Int32(isMul), Int32(isSigned), count, a, 0.05, 3, b, 0.02, 250, 0.07, 10, &portable)
            osprey_qkernels_force_portable(0)
            #expect(fast == portable, "mul \(isMul) signed \(isSigned)")
        }
    }
}
