import Foundation
import Testing
import Tensor
import ONNX
@testable import Engine

/// onnxruntime's com.microsoft operators and the quantized / fused models its own tools write, compared with
/// onnxruntime's outputs made by `Tests/Fixtures/contrib/make_contrib_fixtures.py`.
@Suite struct ContribFixtureTests {
    /// `Tests/Fixtures/contrib`.
    static let root = String(TestSupport.fixtures.dropLast("engine".count)) + "contrib"

    /// Every case directory.
    static let cases: [String] = {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        return names.filter { FileManager.default.fileExists(atPath: root + "/" + $0 + "/model.onnx") }.sorted()
    }()

    @Test func fixturesArePresent() {
        #expect(Self.cases.count >= 30, "run Tests/Fixtures/contrib/make_contrib_fixtures.py")
    }

    /// One quantization step per output, from tolerance.json.
    static func steps(_ dir: String) throws -> [String: Double] {
        guard let data = FileManager.default.contents(atPath: dir + "/tolerance.json"),
              let object = try JSONSerialization.jsonObject(with: data) as? [String: [String: Double]] else { return [:] }
        return object.compactMapValues { $0["step"] }
    }

    @Test(arguments: cases) func matchesOnnxRuntime(_ name: String) throws {
        let dir = Self.root + "/" + name
        let model = try CompiledModel(contentsOf: dir + "/model.onnx")
        let (feeds, expected) = try TestSupport.fixtureTensors(in: dir)
        let steps = try Self.steps(dir)
        #expect(!expected.isEmpty)
        let results = try model.run(feeds)
        for (output, reference) in expected {
            let actual = try #require(results[output], "\(name): output \(output) missing")
            #expect(actual.shape == reference.shape, "\(name).\(output) shape \(actual.shape) vs \(reference.shape)")
            #expect(actual.dtype == reference.dtype, "\(name).\(output) dtype \(actual.dtype) vs \(reference.dtype)")
            guard actual.count == reference.count else { continue }
            let a = actual.doubles, e = reference.doubles
            let step = steps[output] ?? 0
            let worst = zip(a, e).map { abs($0 - $1) }.max() ?? 0
            if reference.dtype.isFloatingPoint {
                // Quantized origin: one step of the output's scale on top of the usual float tolerance.
                let scale = e.reduce(0) { max($0, abs($1)) }
                #expect(worst <= step + 1e-4 * scale + 1e-5, "\(name).\(output): max diff \(worst) (step \(step), max|ref| \(scale))")
            } else {
                #expect(worst <= step, "\(name).\(output): max diff \(worst) quantization steps (allowed \(step))")
            }
        }
    }

    @Test func contribOperatorsAreListedWithTheirDomain() {
        for op in ["FusedConv", "FusedGemm", "FusedMatMul", "Gelu", "FastGelu", "BiasGelu", "QuickGelu", "BiasAdd", "SkipLayerNormalization",
                   "SkipSimplifiedLayerNormalization", "EmbedLayerNormalization", "Attention", "MultiHeadAttention", "NhwcConv",
                   "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeMatMul", "MatMulIntegerToFloat", "QLinearAdd", "QLinearMul",
                   "QLinearSigmoid", "QLinearLeakyRelu", "QLinearConcat", "QLinearGlobalAveragePool", "QLinearAveragePool", "DynamicQuantizeLSTM", "MatMulNBits", "GroupQueryAttention", "RotaryEmbedding"] {
            #expect(CompiledModel.supportedOperators.contains("com.microsoft:\(op)"), "\(op)")
        }
        // onnxruntime registers SimplifiedLayerNormalization in the default domain.
        #expect(CompiledModel.supportedOperators.contains("SimplifiedLayerNormalization"))
    }

    @Test func missingContribOperatorNamesOperatorDomainAndNode() throws {
        let node = Node(name: "attn_0", opType: "SparseAttention", domain: "com.microsoft", inputs: ["x"], outputs: ["y"])
        let graph = Graph(name: "g", nodes: [node], inputs: [ValueInfo(name: "x", elementType: .float32, shape: [.fixed(1)])], outputs: [ValueInfo(name: "y")])
        #expect { try CompiledModel(model: Model(opsetImports: ["": 17, "com.microsoft": 1], graph: graph)) } throws: {
            guard let e = $0 as? EngineError else { return false }
            return e.code == .unsupportedOperator && e.message.contains("SparseAttention") && e.message.contains("com.microsoft") && e.message.contains("attn_0")
        }
    }

    @Test func exactIntegerProductMatchesItsReference() {
        var generator = SystemRandomNumberGenerator()
        let (m, k, n) = (7, 300, 9)
        let a = (0..<(m * k)).map { _ in Double(Int.random(in: -255...255, using: &generator)) }
        let b = (0..<(k * n)).map { _ in Double(Int.random(in: -255...255, using: &generator)) }
        #expect(exactIntegerProduct(a, b, m: m, k: k, n: n) == exactIntegerProductReference(a, b, m: m, k: k, n: n))
    }

    @Test func malformedContribNodesAreRefusedWithClearErrors() throws {
        // Attention weights that do not split into Q, K and V over the heads.
        let x = Tensor(shape: [1, 2, 4], scalars: [Float](repeating: 0.5, count: 8))
        let w = Tensor(shape: [4, 10], scalars: [Float](repeating: 0.1, count: 40))
        let node = Node(name: "a", opType: "Attention", domain: "com.microsoft", inputs: ["x", "w"], outputs: ["y"], attributes: ["num_heads": .int(2)])
        let graph = Graph(name: "g", nodes: [node], initializers: [(name: "w", tensor: w)],
                          inputs: [ValueInfo(name: "x", elementType: .float32, shape: [.fixed(1), .fixed(2), .fixed(4)])], outputs: [ValueInfo(name: "y")])
        let model = try CompiledModel(model: Model(opsetImports: ["": 17, "com.microsoft": 1], graph: graph))
        #expect { try model.run(["x": x]) } throws: { ($0 as? EngineError)?.message.contains("do not split") == true }
        // A QLinearConcat without complete (X, scale, zero point) triples.
        let bad = Node(name: "c", opType: "QLinearConcat", domain: "com.microsoft", inputs: ["s", "z", "x"], outputs: ["y"])
        let g2 = Graph(name: "g", nodes: [bad], inputs: ["s", "z", "x"].map { ValueInfo(name: $0, elementType: .float32, shape: [.fixed(1)]) },
                       outputs: [ValueInfo(name: "y")])
        #expect { try CompiledModel(model: Model(opsetImports: ["": 17, "com.microsoft": 1], graph: g2)) } throws: {
            ($0 as? EngineError)?.message.contains("triples") == true
        }
    }

    @Test func sequenceGraphOutputsAreRefusedAndBadPositionsAreErrors() throws {
        let split = Node(name: "s", opType: "SplitToSequence", inputs: ["x"], outputs: ["seq"])
        let x = ValueInfo(name: "x", elementType: .float32, shape: [.fixed(3), .fixed(2)])
        let asOutput = Graph(name: "g", nodes: [split], inputs: [x], outputs: [ValueInfo(name: "seq", kind: .sequence)])
        #expect { try CompiledModel(model: Model(opsetImports: ["": 18], graph: asOutput)) } throws: {
            ($0 as? EngineError)?.message.contains("'seq' is a sequence") == true
        }
        let at = Node(name: "at", opType: "SequenceAt", inputs: ["seq", "p"], outputs: ["y"])
        let graph = Graph(name: "g", nodes: [split, at], initializers: [(name: "p", tensor: Tensor(scalar: Int64(5)))], inputs: [x],
                          outputs: [ValueInfo(name: "y")])
        let model = try CompiledModel(model: Model(opsetImports: ["": 18], graph: graph))
        #expect { try model.run(["x": Tensor(shape: [3, 2], scalars: [Float](repeating: 1, count: 6))]) } throws: {
            ($0 as? EngineError)?.message.contains("position 5 is out of range for a sequence of 3") == true
        }
    }
}

/// The float32 (De)QuantizeLinear fast paths against their double-precision reference twins.
@Suite struct QuantizeLinearFastPathTests {
    static let ctx = OpContext(node: Node(opType: "QuantizeLinear", inputs: ["x", "s", "z"], outputs: ["y"]), opset: 21, constants: [:], activation: .none)

    @Test(arguments: [DType.uint8, .int8]) func quantizeMatchesReference(_ dtype: DType) throws {
        var values = (0..<600).map { Float($0 - 300) * 0.37 + 0.005 }
        values += [.nan, .infinity, -.infinity, 0.5, 1.5, 2.5, -0.5, -1.5]  // ties round half to even; NaN and infinities saturate as in the reference
        let x = Tensor(shape: [2, 4, values.count / 8], scalars: values)
        for (scale, zero) in [(Tensor(scalar: Float(0.5)), Tensor(dtype: dtype, shape: [])),
                              (Tensor(shape: [4], scalars: [Float(0.5), 1, 0.25, 3]), try castTensor(Tensor(shape: [4], scalars: [Double(3), 0, -2, 7].map { dtype == .uint8 ? abs($0) : $0 }), to: dtype, Self.ctx))] {
            let fast = try #require(try quantizeLinearFast(Self.ctx, x, scale: scale, zeroPoint: zero, dtype: dtype, axis: 1))
            let reference = try quantizeLinearReference(Self.ctx, x, scale: scale, zeroPoint: zero, dtype: dtype, axis: 1)
            #expect(fast.dtype == reference.dtype && fast.shape == reference.shape)
            #expect(fast.doubles == reference.doubles)
        }
    }

    @Test(arguments: [DType.uint8, .int8]) func dequantizeMatchesReference(_ dtype: DType) throws {
        let raw = (0..<256).map { Double($0) - (dtype == .int8 ? 128 : 0) }
        let x = try castTensor(Tensor(shape: [2, 4, 64], scalars: raw + raw), to: dtype, Self.ctx)
        let scale = Tensor(shape: [4], scalars: [Float(0.013), 0.5, 1e-3, 7.25])
        let zero = try castTensor(Tensor(shape: [4], scalars: [Double(5), 0, 100, 1]), to: dtype, Self.ctx)
        let fast = try #require(try dequantizeLinearFast(Self.ctx, x, scale: scale, zeroPoint: zero, axis: 1))
        let reference = try dequantizeLinearReference(Self.ctx, x, scale: scale, zeroPoint: zero, axis: 1)
        #expect(fast.scalars(as: Float.self) == reference.scalars(as: Float.self))
    }
}

/// The im2col / dgemm integer convolution and matrix product against their plain-loop reference twins.
@Suite struct IntegerProductFastPathTests {
    static func context(_ attributes: [String: Attribute]) -> OpContext {
        OpContext(node: Node(opType: "ConvInteger", inputs: ["x", "w"], outputs: ["y"], attributes: attributes), opset: 21, constants: [:], activation: .none)
    }

    static func random(_ shape: [Int], _ range: ClosedRange<Int>, _ dtype: DType) throws -> Tensor {
        var generator = SystemRandomNumberGenerator()
        let values = (0..<shape.reduce(1, *)).map { _ in Double(Int.random(in: range, using: &generator)) }
        return try castTensor(Tensor(shape: shape, scalars: values), to: dtype, context([:]))
    }

    @Test(arguments: [(1, [1, 1, 1, 1], [1, 1], [1, 1]), (2, [1, 0, 2, 1], [2, 1], [1, 2]), (4, [0, 0, 0, 0], [1, 3], [2, 1])])
    func convolutionMatchesReference(_ groups: Int, _ pads: [Int], _ strides: [Int], _ dilations: [Int]) throws {
        let attributes: [String: Attribute] = ["pads": .ints(pads.map(Int64.init)), "strides": .ints(strides.map(Int64.init)), "dilations": .ints(dilations.map(Int64.init))]
        let ctx = Self.context(attributes)
        let attrs = try WindowAttributes(ctx)
        let x = try Self.random([2, 8, 9, 11], 0...255, .uint8), w = try Self.random([8, 8 / groups, 3, 2], -128...127, .int8)
        let xZero = Tensor(scalar: UInt8(131)), wZero = try Self.random([8], -5...5, .int8), bias = try Self.random([8], -999...999, .int32)
        let fast = try #require(try integerConvolutionFast(ctx, attrs, groups: groups, x: x, xZero: xZero, w: w, wZero: wZero, bias: bias))
        let reference = try integerConvolution(ctx, attrs, groups: groups, x: x, xZero: xZero, w: w, wZero: wZero, bias: bias)
        #expect(fast.1 == reference.1)
        #expect(fast.0 == reference.0)
    }

    @Test func matrixProductMatchesReference() throws {
        let ctx = Self.context([:])
        let a = try Self.random([3, 5, 40], 0...255, .uint8), b = try Self.random([40, 7], -128...127, .int8)
        let aZero = try Self.random([5], 0...255, .uint8), bZero = try Self.random([7], -3...3, .int8)
        let fast = try #require(try integerMatMulFast(a, zero: aZero, b, zero: bZero, ctx))
        let reference = try integerMatMul(a, zero: aZero, b, zero: bZero, ctx)
        #expect(fast.1 == reference.1)
        #expect(fast.0 == reference.0)
    }
}
