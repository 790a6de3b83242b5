import Foundation
import Testing
import Tensor
import ONNX
@testable import Engine

/// Float16 and bfloat16 models run in float32 between their 16-bit inputs and outputs, as onnxruntime's CPU provider
/// runs float16 ones; references from `Tests/Fixtures/engine/make_float16_fixtures.py` and `make_bfloat16_fixtures.py`.
@Suite struct Float16LoweringTests {
    /// Elements of a float16 or float32 tensor as Float.
    static func values(_ t: Tensor) -> [Float] {
        t.dtype == .float16 ? HalfFloatLowering.widened(t).scalars(as: Float.self) : t.scalars(as: Float.self)
    }

    /// Within about four float16 steps of the largest reference value: onnxruntime 1.32 runs LayerNormalization with
    /// its float16 kernel (rounding its input and output), which Osprey computes in float32.
    static func closeInFloat16(_ actual: Tensor, _ expected: Tensor) -> Bool {
        TestSupport.close(values(actual), values(expected), relative: 2e-3, absolute: 1e-4)
    }

    @Test(arguments: ["float16", "float16_io32"]) func matchesOnnxRuntime(_ name: String) throws {
        let (model, feeds, expected) = try OnnxRuntimeFixtureTests.load(name)
        let results = try model.run(feeds)
        #expect(expected.count == 2)
        for (output, reference) in expected {
            let actual = try #require(results[output], "output \(output) missing")
            #expect(actual.shape == reference.shape, "\(name).\(output) shape")
            #expect(actual.dtype == reference.dtype, "\(name).\(output) dtype")
            #expect(Self.closeInFloat16(actual, reference), "\(name).\(output): \(Self.values(actual)) vs \(Self.values(reference))")
        }
    }

    @Test func declaredTypesStayFloat16() throws {
        let (model, feeds, _) = try OnnxRuntimeFixtureTests.load("float16")
        #expect(model.inputs.map(\.dtype) == [.float16])
        #expect(model.outputs.map(\.dtype) == [.float16, .float16])
        let x = try #require(feeds["x"])
        #expect { try model.run(["x": HalfFloatLowering.widened(x)]) } throws: {
            guard let e = $0 as? EngineError else { return false }
            return e.code == .invalidInput && e.message.contains("float16") && e.message.contains("float32")
        }
        let (wide, _, _) = try OnnxRuntimeFixtureTests.load("float16_io32")
        #expect(wide.inputs.map(\.dtype) == [.float32])
        #expect(wide.outputs.map(\.dtype) == [.float32, .float32])
    }

    @Test func batchEqualsSingleRuns() throws {
        let (model, feeds, _) = try OnnxRuntimeFixtureTests.load("float16")
        let x = try #require(feeds["x"])
        let batched = try model.run(feeds)
        for row in 0..<x.shape[0] {
            let single = try model.run(["x": Tensor.concatenatingRows([x.rows(row..<(row + 1))])])
            for (output, value) in batched {
                #expect(single[output]!.dtype == .float16)
                #expect(Self.closeInFloat16(single[output]!, value.rows(row..<(row + 1))), "\(output) row \(row)")
            }
        }
    }

    /// A one-node graph over float16 values: `Add(x, ConstantOfShape(float16 value))`, `x` also passed through.
    @Test func constantAttributesWidenAndPassThroughKeepsBits() throws {
        let fill = Tensor(shape: [1], scalars: [floatToFloat16(0.25)], dtype16: true)
        let nodes = [
            Node(name: "s", opType: "Shape", inputs: ["x"], outputs: ["shape"]),
            Node(name: "c", opType: "ConstantOfShape", inputs: ["shape"], outputs: ["quarter"], attributes: ["value": .tensor(fill)]),
            Node(name: "a", opType: "Add", inputs: ["x", "quarter"], outputs: ["y"]),
            Node(name: "t", opType: "Cast", inputs: ["y"], outputs: ["z"], attributes: ["to": .int(Int64(DType.float16.rawValue))]),
        ]
        let graph = Graph(name: "g", nodes: nodes, inputs: [ValueInfo(name: "x", elementType: .float16, shape: [.fixed(3)])],
                          outputs: [ValueInfo(name: "z", elementType: .float16), ValueInfo(name: "x", elementType: .float16)])
        let model = try CompiledModel(model: Model(opsetImports: ["": 17], graph: graph))
        let x = Tensor(shape: [3], scalars: [1, -2, 65504].map { floatToFloat16($0) }, dtype16: true)
        let out = try model.run(["x": x])
        #expect(out["z"]!.dtype == .float16)
        #expect(Self.values(out["z"]!) == [1.25, -1.75, 65504])
        #expect(out["x"]!.dtype == .float16 && Self.values(out["x"]!) == [1, -2, 65504])
    }

    /// If branches over an outer float16 input, with a float16 Constant and a float16 initializer, return float16.
    @Test func controlFlowBodiesAreLoweredWithTheirGraph() throws {
        func half(_ values: [Float]) -> Tensor { Tensor(shape: [values.count], scalars: values.map { floatToFloat16($0) }, dtype16: true) }
        let thenBranch = Graph(name: "then", nodes: [
            Node(name: "k", opType: "Constant", inputs: [], outputs: ["k"], attributes: ["value": .tensor(half([1]))]),
            Node(name: "a", opType: "Add", inputs: ["x", "k"], outputs: ["t"]),
        ], outputs: [ValueInfo(name: "t", elementType: .float16)])
        let elseBranch = Graph(name: "else", nodes: [Node(name: "m", opType: "Mul", inputs: ["x", "two"], outputs: ["e"])],
                               initializers: [(name: "two", tensor: half([2]))], outputs: [ValueInfo(name: "e", elementType: .float16)])
        let graph = Graph(name: "g", nodes: [
            Node(name: "if", opType: "If", inputs: ["c"], outputs: ["y"], attributes: ["then_branch": .graph(thenBranch), "else_branch": .graph(elseBranch)]),
        ], inputs: [ValueInfo(name: "c", elementType: .bool, shape: []), ValueInfo(name: "x", elementType: .float16, shape: [.fixed(2)])],
           outputs: [ValueInfo(name: "y", elementType: .float16)])
        let model = try CompiledModel(model: Model(opsetImports: ["": 17], graph: graph))
        let x = half([0.5, -3])
        let yes = try model.run(["c": Tensor(scalar: true), "x": x])["y"]!
        let no = try model.run(["c": Tensor(scalar: false), "x": x])["y"]!
        #expect(yes.dtype == .float16 && Self.values(yes) == [1.5, -2])
        #expect(no.dtype == .float16 && Self.values(no) == [1, -6])
    }

    /// The bfloat16 fixture: declared types stay bfloat16, and each output is the float32 computation (onnxruntime on
    /// the same graph in float32, weights widened exactly) rounded once to bfloat16.
    @Test func bfloat16ModelComputesInFloat32AndRoundsItsOutputs() throws {
        let dir = TestSupport.fixtures + "/bfloat16"
        let model = try CompiledModel(contentsOf: dir + "/model.onnx")
        #expect(model.inputs.map(\.dtype) == [.bfloat16])
        #expect(model.outputs.map(\.dtype) == [.bfloat16, .bfloat16])
        let bits = try TestSupport.npy(dir + "/input_x.npy")
        var x = Tensor(uninitialized: .bfloat16, shape: bits.shape)
        x.withUnsafeMutableBytes { dst in bits.withUnsafeBytes { src in dst.copyMemory(from: src) } }
        let results = try model.run(["x": x])
        for output in ["probs", "logits"] {
            let reference = try TestSupport.npy(dir + "/output_\(output).npy").scalars(as: Float.self)
            let actual = try #require(results[output], "output \(output) missing")
            #expect(actual.dtype == .bfloat16 && actual.shape == [3, 10])
            let values = HalfFloatLowering.widened(actual).scalars(as: Float.self)
            // One rounding to 8 significant bits: within half a step (2^-9 relative) plus float32 noise.
            for (a, r) in zip(values, reference) { #expect(abs(a - r) <= abs(r) / 256 + 1e-6, "\(output): \(a) vs \(r)") }
            #expect(values != reference, "\(output) was not rounded to bfloat16")
        }
        #expect { try model.run(["x": HalfFloatLowering.widened(x)]) } throws: {
            guard let e = $0 as? EngineError else { return false }
            return e.code == .invalidInput && e.message.contains("bfloat16") && e.message.contains("float32")
        }
    }

    @Test func aFloat16OutputNothingProducesIsReportedByItsName() throws {
        let graph = Graph(name: "g", nodes: [Node(name: "r", opType: "Relu", inputs: ["x"], outputs: ["y"])],
                          inputs: [ValueInfo(name: "x", elementType: .float16, shape: [.fixed(2)])],
                          outputs: [ValueInfo(name: "missing", elementType: .float16)])
        #expect { try CompiledModel(model: Model(opsetImports: ["": 17], graph: graph)) } throws: {
            guard let e = $0 as? EngineError else { return false }
            return e.code == .invalidModel && e.message.contains("'missing'") && !e.message.contains(HalfFloatLowering.widenedSuffix)
        }
    }
}

private extension Tensor {
    /// A float16 tensor from raw half bits.
    init(shape: [Int], scalars bits: [UInt16], dtype16: Bool) {
        self.init(uninitialized: .float16, shape: shape)
        withUnsafeMutableBytes { raw in
            let dst = raw.bindMemory(to: UInt16.self)
            for (i, b) in bits.enumerated() { dst[i] = b }
        }
    }
}
