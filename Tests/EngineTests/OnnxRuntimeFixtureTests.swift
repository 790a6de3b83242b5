import Foundation
import Testing
import Tensor
import ONNX
@testable import Engine

/// Small exported-style models compared against onnxruntime outputs made by `Tests/Fixtures/engine/make_fixtures.py`.
@Suite struct OnnxRuntimeFixtureTests {
    static let models = ["cnn", "mlp", "shapes", "legacy"]

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
        #expect(model.cachedPlanCount <= 1)
    }

    @Test(arguments: models) func batchEqualsSingleRuns(_ name: String) throws {
        let (model, feeds, _) = try Self.load(name)
        let input = try #require(feeds.first)
        let batched = try model.run(feeds)
        for row in 0..<input.value.shape[0] {
            let single = try model.run([input.key: Tensor.concatenatingRows([input.value.rows(row..<(row + 1))])])
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
        #expect(model.info.opsets[""] == 13)
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
