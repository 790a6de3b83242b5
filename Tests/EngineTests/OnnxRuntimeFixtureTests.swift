import Foundation
import Testing
import Tensor
import ONNX
@testable import Engine

/// Small exported-style models compared against onnxruntime outputs made by `Tests/Fixtures/engine/make_fixtures.py`.
@Suite struct OnnxRuntimeFixtureTests {
    static let models = ["cnn", "mlp", "shapes", "legacy", "attention", "gridsample_3d"]

    static func load(_ name: String) throws -> (CompiledModel, [String: Tensor], [String: Tensor]) {
        let dir = TestSupport.fixtures + "/" + name
        let model = try CompiledModel(contentsOf: dir + "/model.onnx")
        var feeds: [String: Tensor] = [:], expected: [String: Tensor] = [:]
        for file in try FileManager.default.contentsOfDirectory(atPath: dir) where file.hasSuffix(".npy") {
            let tensor = try TestSupport.npy(dir + "/" + file)
            let stem = String(file.dropLast(4))
            if stem.hasPrefix("input_") { feeds[String(stem.dropFirst(6))] = tensor }
            if stem.hasPrefix("output_") { expected[String(stem.dropFirst(7))] = tensor }
        }
        return (model, feeds, expected)
    }

    @Test(arguments: models) func matchesOnnxRuntime(_ name: String) throws {
        let (model, feeds, expected) = try Self.load(name)
        let plansBefore = model.cachedPlanCount
        let results = try model.run(feeds)
        #expect(!expected.isEmpty)
        for (output, reference) in expected {
            let actual = try #require(results[output], "output \(output) missing")
            #expect(actual.shape == reference.shape, "\(name).\(output) shape")
            #expect(actual.dtype == reference.dtype, "\(name).\(output) dtype")
            if reference.dtype == .float32 {
                #expect(TestSupport.close(actual.scalars(as: Float.self), reference.scalars(as: Float.self)), "\(name).\(output) values")
            } else {
                #expect(actual.scalars(as: Int64.self) == reference.scalars(as: Int64.self), "\(name).\(output) values")
            }
        }
        // A second run reuses the cached shape plan and must agree.
        let again = try model.run(feeds)
        for (output, reference) in expected where reference.dtype == .float32 {
            #expect(TestSupport.close(again[output]!.scalars(as: Float.self), reference.scalars(as: Float.self)))
        }
        #expect(model.cachedPlanCount <= plansBefore + 1)
    }

    @Test(arguments: models) func batchEqualsSingleRuns(_ name: String) throws {
        let (model, feeds, _) = try Self.load(name)
        // Every input carries the batch on its first axis.
        let input = try #require(feeds.first)
        let batched = try model.run(feeds)
        for row in 0..<input.value.shape[0] {
            let single = try model.run(feeds.mapValues { Tensor.concatenatingRows([$0.rows(row..<(row + 1))]) })
            for (output, value) in batched {
                let expectedRow = value.rows(row..<(row + 1))
                if value.dtype == .float32 {
                    #expect(TestSupport.close(single[output]!.scalars(as: Float.self), expectedRow.scalars(as: Float.self)), "\(name).\(output) row \(row)")
                } else {
                    #expect(single[output]!.scalars(as: Int64.self) == expectedRow.scalars(as: Int64.self))
                }
            }
        }
    }

    @Test func inputsAndOutputsAreDescribed() throws {
        let (model, _, _) = try Self.load("cnn")
        #expect(model.inputs == [TensorSpec(name: "x", dtype: .float32, shape: [.symbolic("N"), .fixed(3), .fixed(17), .fixed(17)])])
        #expect(model.outputs.map(\.name) == ["probs", "logits"])
        #expect(model.info.producerName == "osprey-fixtures")
        #expect(model.info.opsets.first { $0.domain == "ai.onnx" }?.version == 13)
    }

    @Test func feedValidationSaysExpectedVersusGot() throws {
        let (model, feeds, _) = try Self.load("cnn")
        let x = feeds["x"]!
        #expect { try model.run([:]) } throws: { ($0 as? EngineError)?.code == .missingInput }
        #expect { try model.run(["x": x, "y": x]) } throws: { ($0 as? EngineError)?.code == .unknownInput }
        #expect { try model.run(["x": Tensor(dtype: .int64, shape: x.shape)]) } throws: {
            guard let e = $0 as? EngineError else { return false }
            return e.code == .invalidInput && e.message.contains("float32") && e.message.contains("int64")
        }
        #expect { try model.run(["x": Tensor(dtype: .float32, shape: [1, 3, 17])]) } throws: { ($0 as? EngineError)?.code == .invalidInput }
        #expect { try model.run(["x": Tensor(dtype: .float32, shape: [1, 3, 16, 17])]) } throws: {
            guard let e = $0 as? EngineError else { return false }
            return e.message.contains("17") && e.message.contains("16")
        }
        #expect { try model.run(feeds, outputs: ["nope"]) } throws: { ($0 as? EngineError)?.code == .unknownOutput }
        let onlyLogits = try model.run(feeds, outputs: ["logits"])
        #expect(Array(onlyLogits.keys) == ["logits"])
    }

    @Test func concurrentRunsAgree() throws {
        let (model, feeds, expected) = try Self.load("cnn")
        let reference = expected["probs"]!.scalars(as: Float.self)
        let failures = LockedCounter()
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            guard let r = try? model.run(feeds), TestSupport.close(r["probs"]!.scalars(as: Float.self), reference) else {
                failures.increment()
                return
            }
        }
        #expect(failures.value == 0)
    }
}

/// A thread-safe counter for the concurrency test.
final class LockedCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func increment() { lock.lock(); count += 1; lock.unlock() }
    var value: Int { lock.lock(); defer { lock.unlock() }; return count }
}

/// Compile-time rewrites and the per-shape plan cache.
@Suite struct CompilerTests {
    @Test func undeclaredOutputShapesAreProbed() throws {
        let model = try CompiledModel(contentsOf: TestSupport.fixtures + "/mlp/model.onnx")
        let am = try #require(model.outputs.first { $0.name == "am" })
        #expect(am.dtype == .int64)
        #expect(am.shape == [.symbolic("N"), .fixed(5)])
    }

    @Test func shapePlansAreCachedPerSignature() throws {
        let dir = TestSupport.fixtures + "/mlp"
        let model = try CompiledModel(contentsOf: dir + "/model.onnx")
        let before = model.cachedPlanCount
        let x = try TestSupport.npy(dir + "/input_x.npy")
        _ = try model.run(["x": x])
        _ = try model.run(["x": x])
        #expect(model.cachedPlanCount == before + 1 || model.cachedPlanCount == before)
        let one = try model.run(["x": Tensor.concatenatingRows([x.rows(0..<1)])])
        #expect(one["rs"]!.shape == [1, 2])
        let expected = try TestSupport.npy(dir + "/output_rs.npy").rows(0..<1)
        #expect(TestSupport.close(one["rs"]!.scalars(as: Float.self), expected.scalars(as: Float.self)))
    }

    @Test func float16InitializerFeedingCastIsFoldedToFloat32() throws {
        var halfBits = Tensor(dtype: .float16, shape: [2])
        halfBits.withUnsafeMutableBytes { raw in
            raw.storeBytes(of: UInt16(0x3C00), toByteOffset: 0, as: UInt16.self)   // 1.0
            raw.storeBytes(of: UInt16(0xC000), toByteOffset: 2, as: UInt16.self)   // -2.0
        }
        let graph = Graph(nodes: [Node(opType: "Cast", inputs: ["w16"], outputs: ["w"], attributes: ["to": .int(1)]),
                                  Node(opType: "Add", inputs: ["x", "w"], outputs: ["y"])],
                          initializers: [(name: "w16", tensor: halfBits)],
                          inputs: [ValueInfo(name: "x", elementType: .float32, shape: [.symbolic("N"), .fixed(2)])],
                          outputs: [ValueInfo(name: "y", elementType: .float32, shape: [.symbolic("N"), .fixed(2)])])
        let model = try CompiledModel(model: Model(graph: graph))
        let y = try model.run(["x": Tensor(shape: [1, 2], scalars: [Float(1), 1])])["y"]!
        #expect(y.scalars(as: Float.self) == [2, -1])
    }

    @Test func convBatchNormReluFusionMatchesUnfusedMath() throws {
        // Conv 1x1 (weight 2, bias 1) -> BN (scale 3, B 0.5, mean 1, var 4, eps 0) -> Relu.
        let graph = Graph(nodes: [Node(opType: "Conv", inputs: ["x", "w", "b"], outputs: ["c"]),
                                  Node(opType: "BatchNormalization", inputs: ["c", "s", "bb", "m", "v"], outputs: ["n"], attributes: ["epsilon": .float(0)]),
                                  Node(opType: "Relu", inputs: ["n"], outputs: ["y"])],
                          initializers: [(name: "w", tensor: TestSupport.f([1, 1, 1, 1], [2])), (name: "b", tensor: TestSupport.f([1], [1])),
                                         (name: "s", tensor: TestSupport.f([1], [3])), (name: "bb", tensor: TestSupport.f([1], [0.5])),
                                         (name: "m", tensor: TestSupport.f([1], [1])), (name: "v", tensor: TestSupport.f([1], [4]))],
                          inputs: [ValueInfo(name: "x", elementType: .float32, shape: [.symbolic("N"), .fixed(1), .fixed(1), .fixed(3)])],
                          outputs: [ValueInfo(name: "y", elementType: .float32, shape: nil)])
        let model = try CompiledModel(model: Model(graph: graph))
        let y = try model.run(["x": TestSupport.f([1, 1, 1, 3], [-2, 0, 1])])["y"]!
        // (2x + 1 - 1) * 3 / 2 + 0.5, then relu.
        #expect(y.scalars(as: Float.self) == [0, 0.5, 3.5])
        #expect(model.outputs[0].shape == [.symbolic("N"), .fixed(1), .fixed(1), .fixed(3)])
    }

    @Test func nodesAreSortedRegardlessOfFileOrder() throws {
        let graph = Graph(nodes: [Node(opType: "Relu", inputs: ["t"], outputs: ["y"]), Node(opType: "Neg", inputs: ["x"], outputs: ["t"])],
                          inputs: [ValueInfo(name: "x", elementType: .float32, shape: [.fixed(2)])],
                          outputs: [ValueInfo(name: "y", elementType: .float32, shape: [.fixed(2)])])
        let model = try CompiledModel(model: Model(graph: graph))
        #expect(try model.run(["x": TestSupport.f([2], [1, -1])])["y"]!.scalars(as: Float.self) == [0, 1])
        let cyclic = Graph(nodes: [Node(opType: "Relu", inputs: ["b"], outputs: ["a"]), Node(opType: "Relu", inputs: ["a"], outputs: ["b"])],
                           inputs: [], outputs: [ValueInfo(name: "a")])
        #expect(throws: EngineError.self) { try CompiledModel(model: Model(graph: cyclic)) }
    }
}

/// The `.npy` codec.
@Suite struct NumpyFormatTests {
    @Test func roundTripsDtypesAndShapes() throws {
        for tensor in [Tensor(shape: [2, 3], scalars: [Float(1), 2, 3, 4, 5, 6]), Tensor(shape: [3], scalars: [Int64(-1), 0, 1 << 40]),
                       Tensor(shape: [], scalars: [Double(2.5)]), Tensor(shape: [2], scalars: [true, false]), Tensor(shape: [0, 4], scalars: [UInt8]())] {
            let bytes = try NumpyFormat.encode(tensor)
            #expect(bytes.count % 64 == (tensor.byteCount % 64))
            let back = try NumpyFormat.decode(bytes)
            #expect(back.dtype == tensor.dtype && back.shape == tensor.shape)
            #expect(back.withUnsafeBytes { Array($0) } == tensor.withUnsafeBytes { Array($0) })
        }
    }

    @Test func readsNumpyWrittenFixture() throws {
        let x = try NumpyFormat.read(path: TestSupport.fixtures + "/cnn/input_x.npy")
        #expect(x.dtype == .float32 && x.shape == [3, 3, 17, 17])
    }

    @Test func rejectsFortranOrderAndUnknownDtypes() throws {
        func file(_ header: String) -> [UInt8] {
            var h = header
            while (10 + h.utf8.count + 1) % 64 != 0 { h += " " }
            h += "\n"
            return [0x93, 0x4E, 0x55, 0x4D, 0x50, 0x59, 1, 0, UInt8(h.utf8.count & 0xff), UInt8(h.utf8.count >> 8)] + Array(h.utf8) + [UInt8](repeating: 0, count: 16)
        }
        #expect { try NumpyFormat.decode(file("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }")) } throws: {
            ($0 as? EngineError)?.message.contains("fortran") ?? false
        }
        #expect { try NumpyFormat.decode(file("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }")) } throws: {
            ($0 as? EngineError)?.message.contains("c8") ?? false
        }
        #expect { try NumpyFormat.decode(file("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }")) } throws: { $0 is EngineError }
        #expect { try NumpyFormat.decode(file("{'descr': '<f4', 'fortran_order': False, 'shape': (100,), }")) } throws: { $0 is EngineError }
        #expect { try NumpyFormat.decode([1, 2, 3]) } throws: { $0 is EngineError }
        let v1 = file("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }")
        #expect(try NumpyFormat.decode(v1).shape == [2])
        // Versions 2 and 3 carry a 4-byte header length.
        for major in [UInt8(2), 3] {
            var h = "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 2), }"
            while (12 + h.utf8.count + 1) % 64 != 0 { h += " " }
            h += "\n"
            let n = h.utf8.count
            let bytes: [UInt8] = [0x93, 0x4E, 0x55, 0x4D, 0x50, 0x59, major, 0, UInt8(n & 0xff), UInt8(n >> 8), 0, 0] + Array(h.utf8)
                + withUnsafeBytes(of: 1.5) { Array($0) } + withUnsafeBytes(of: -2.0) { Array($0) }
            let t = try NumpyFormat.decode(bytes)
            #expect(t.dtype == .float64 && t.shape == [1, 2] && t.scalars(as: Double.self) == [1.5, -2])
        }
    }
}

/// Buffer reuse: a released intermediate is written in place by an elementwise op.
@Suite struct MemoryReuseTests {
    @Test func unaryOpWritesReleasedInputInPlace() throws {
        // Neg's output dies at Relu, so Relu may reuse its buffer; the graph input itself must never be written.
        let graph = Graph(nodes: [Node(opType: "Neg", inputs: ["x"], outputs: ["t"]), Node(opType: "Relu", inputs: ["t"], outputs: ["y"])],
                          inputs: [ValueInfo(name: "x", elementType: .float32, shape: [.fixed(4)])],
                          outputs: [ValueInfo(name: "y", elementType: .float32, shape: [.fixed(4)])])
        let model = try CompiledModel(model: Model(graph: graph))
        let x = TestSupport.f([4], [1, -2, 3, -4])
        let y = try model.run(["x": x])["y"]!
        #expect(y.scalars(as: Float.self) == [0, 2, 0, 4])
        #expect(x.scalars(as: Float.self) == [1, -2, 3, -4])
    }

    @Test func reluKernelReusesAHandedOverBuffer() throws {
        let ctx = OpContext(node: Node(opType: "Relu", inputs: ["t"], outputs: ["y"]), opset: 17, constants: [:], activation: .none)
        let kernel = try operatorTable["Relu"]!(ctx).kernel
        var inputs = KernelInputs(values: [TestSupport.f([3], [-1, 2, -3])])
        let address = inputs.values[0]!.storage.pointer
        let y = try kernel(&inputs)[0]
        #expect(y.scalars(as: Float.self) == [0, 2, 0])
        #expect(y.storage.pointer == address)
        // A tensor still referenced elsewhere is copied, never overwritten.
        let add = try operatorTable["Add"]!(OpContext(node: Node(opType: "Add", inputs: ["a", "b"], outputs: ["y"]), opset: 17, constants: [:], activation: .none)).kernel
        var pair = KernelInputs(values: [TestSupport.f([2, 2], [1, 2, 3, 4]), TestSupport.f([2], [10, 20])])
        let sumAddress = pair.values[0]!.storage.pointer
        let sum = try add(&pair)[0]
        #expect(sum.scalars(as: Float.self) == [11, 22, 13, 24] && sum.storage.pointer == sumAddress)
        var flipped = KernelInputs(values: [TestSupport.f([2], [10, 20]), TestSupport.f([2, 2], [1, 2, 3, 4])])
        let sub = try operatorTable["Sub"]!(OpContext(node: Node(opType: "Sub", inputs: ["a", "b"], outputs: ["y"]), opset: 17, constants: [:], activation: .none)).kernel
        #expect(try sub(&flipped)[0].scalars(as: Float.self) == [9, 18, 7, 16])
        let kept = TestSupport.f([2], [-5, 5])
        var shared = KernelInputs(values: [kept])
        _ = try kernel(&shared)
        #expect(kept.scalars(as: Float.self) == [-5, 5])
    }
}

/// Unusual but legal inputs and malformed models end in results or `EngineError`, never a crash.
@Suite struct RobustnessTests {
    @Test(arguments: OnnxRuntimeFixtureTests.models) func emptyBatchRunsOrFailsCleanly(_ name: String) throws {
        let (model, feeds, _) = try OnnxRuntimeFixtureTests.load(name)
        let input = try #require(feeds.first)
        let empty = Tensor(dtype: input.value.dtype, shape: [0] + input.value.shape.dropFirst())
        do {
            let results = try model.run([input.key: empty])
            for (_, value) in results where value.rank > 0 { #expect(value.count == 0 || value.shape[0] != 0) }
        } catch let error as EngineError {
            #expect(!error.message.isEmpty)
        }
    }

    @Test func mismatchedWeightsAreReportedNotTrapped() throws {
        let graph = Graph(nodes: [Node(name: "conv", opType: "Conv", inputs: ["x", "w"], outputs: ["y"])],
                          initializers: [(name: "w", tensor: TestSupport.f([2, 3, 1, 1], [1, 1, 1, 1, 1, 1]))],
                          inputs: [ValueInfo(name: "x", elementType: .float32, shape: [.symbolic("N"), .symbolic("C"), .fixed(2), .fixed(2)])],
                          outputs: [ValueInfo(name: "y", elementType: .float32, shape: nil)])
        let model = try CompiledModel(model: Model(graph: graph))
        #expect { try model.run(["x": Tensor(dtype: .float32, shape: [1, 4, 2, 2])]) } throws: {
            guard let e = $0 as? EngineError else { return false }
            return e.message.contains("conv") && e.message.contains("4") && e.message.contains("3")
        }
        let reshape = Graph(nodes: [Node(opType: "Reshape", inputs: ["x", "s"], outputs: ["y"])],
                            initializers: [(name: "s", tensor: TestSupport.i([2], [5, -1]))],
                            inputs: [ValueInfo(name: "x", elementType: .float32, shape: [.symbolic("N")])],
                            outputs: [ValueInfo(name: "y", elementType: .float32, shape: nil)])
        let r = try CompiledModel(model: Model(graph: reshape))
        #expect(throws: EngineError.self) { try r.run(["x": Tensor(dtype: .float32, shape: [7])]) }
        #expect(try r.run(["x": Tensor(dtype: .float32, shape: [10])])["y"]!.shape == [5, 2])
    }

    @Test func danglingInputsAndMissingOutputsAreInvalidModels() {
        let dangling = Graph(nodes: [Node(opType: "Relu", inputs: ["nowhere"], outputs: ["y"])], outputs: [ValueInfo(name: "y")])
        #expect { try CompiledModel(model: Model(graph: dangling)) } throws: { ($0 as? EngineError)?.code == .invalidModel }
        let noProducer = Graph(inputs: [ValueInfo(name: "x", elementType: .float32, shape: [.fixed(1)])], outputs: [ValueInfo(name: "z")])
        #expect { try CompiledModel(model: Model(graph: noProducer)) } throws: { ($0 as? EngineError)?.code == .invalidModel }
    }
}

/// Packed Conv weights are the only copy the compiled model keeps.
@Suite struct WeightOwnershipTests {
    @Test func unpackedConvWeightsAreReleasedAfterCompilation() throws {
        weak var weightStorage: TensorStorage?
        var compiled: CompiledModel?
        do {
            let w = TestSupport.f([2, 1, 3, 3], (0..<18).map { Float($0) })
            weightStorage = w.storage
            let graph = Graph(nodes: [Node(name: "conv", opType: "Conv", inputs: ["x", "w"], outputs: ["c"]), Node(opType: "Relu", inputs: ["c"], outputs: ["y"])],
                              initializers: [(name: "w", tensor: w)],
                              inputs: [ValueInfo(name: "x", elementType: .float32, shape: [.symbolic("N"), .fixed(1), .fixed(3), .fixed(3)])],
                              outputs: [ValueInfo(name: "y", elementType: .float32, shape: nil)])
            compiled = try CompiledModel(model: Model(graph: graph))
        }
        #expect(weightStorage == nil)
        let y = try compiled!.run(["x": Tensor(shape: [1, 1, 3, 3], scalars: [Float](repeating: 1, count: 9))])["y"]!
        #expect(y.scalars(as: Float.self) == [36, 117])
    }
}

/// Public dtype conversion used by `osprey predict`.
@Suite struct ConversionTests {
    @Test func convertsWithCastSemantics() throws {
        let d = Tensor(shape: [3], scalars: [1.9, -1.9, 0.0])
        #expect(try d.converted(to: .float32).scalars(as: Float.self) == [1.9, -1.9, 0])
        #expect(try d.converted(to: .int64).scalars(as: Int64.self) == [1, -1, 0])
        #expect(try d.converted(to: .bool).scalars(as: Bool.self) == [true, true, false])
        #expect(throws: EngineError.self) { try Tensor(shape: [1], strings: [[65]]).converted(to: .float32) }
    }
}

/// Shapes that depend on values are never served from the per-signature cache.
@Suite struct ShapeCacheTests {
    @Test func valueDependentShapesAreRecomputed() throws {
        // n = int(max(x)); y = Shape(Range(0, n, 1)); the input shape is the same on both runs, the answer is not.
        let graph = Graph(nodes: [Node(opType: "ReduceMax", inputs: ["x"], outputs: ["m"], attributes: ["keepdims": .int(0)]),
                                  Node(opType: "Cast", inputs: ["m"], outputs: ["n"], attributes: ["to": .int(7)]),
                                  Node(opType: "Range", inputs: ["zero", "n", "one"], outputs: ["r"]),
                                  Node(opType: "Shape", inputs: ["r"], outputs: ["y"])],
                          initializers: [(name: "zero", tensor: Tensor(scalar: Int64(0))), (name: "one", tensor: Tensor(scalar: Int64(1)))],
                          inputs: [ValueInfo(name: "x", elementType: .float32, shape: [.fixed(2)])],
                          outputs: [ValueInfo(name: "y", elementType: .int64, shape: [.fixed(1)])])
        let model = try CompiledModel(model: Model(opsetImports: ["": 13], graph: graph))
        #expect(try model.run(["x": TestSupport.f([2], [3, 1])])["y"]!.scalars(as: Int64.self) == [3])
        #expect(try model.run(["x": TestSupport.f([2], [5, 1])])["y"]!.scalars(as: Int64.self) == [5])
    }
}
