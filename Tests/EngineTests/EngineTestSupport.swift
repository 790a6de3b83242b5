import Foundation
import Testing
import Tensor
import ONNX
@testable import Engine
import TestSupport

/// Helpers shared by the engine tests: graph building, running one node, tolerant comparison.
enum TestSupport {
    /// A fixture directory's `input_NAME.npy` files as feeds and its `output_NAME.npy` files as expected outputs.
    static func fixtureTensors(in dir: String) throws -> (feeds: [String: Tensor], expected: [String: Tensor]) {
        var feeds: [String: Tensor] = [:], expected: [String: Tensor] = [:]
        for file in try FileManager.default.contentsOfDirectory(atPath: dir) where file.hasSuffix(".npy") {
            let stem = String(file.dropLast(4))
            if stem.hasPrefix("input_") { feeds[String(stem.dropFirst(6))] = try npy(dir + "/" + file) }
            if stem.hasPrefix("output_") { expected[String(stem.dropFirst(7))] = try npy(dir + "/" + file) }
        }
        return (feeds, expected)
    }

    /// `Tests/Fixtures/engine`.
    static let fixtures: String = {
        let file = #filePath
        let tests = file.components(separatedBy: "/EngineTests/")[0]
        return tests + "/Fixtures/engine"
    }()

    /// A float32 tensor.
    static func f(_ shape: [Int], _ values: [Float]) -> Tensor { Tensor(shape: shape, scalars: values) }

    /// An int64 tensor.
    static func i(_ shape: [Int], _ values: [Int64]) -> Tensor { Tensor(shape: shape, scalars: values) }

    /// Runs one node with `inputs` as graph inputs (or initializers when `constant`), returning its outputs in order.
    static func runNode(_ op: String, _ inputs: [(String, Tensor)], outputs: [String] = ["y"], attributes: [String: Attribute] = [:],
                        opset: Int64 = 17, constants: Set<String> = []) throws -> [Tensor] {
        let node = Node(name: "n", opType: op, inputs: inputs.map(\.0), outputs: outputs, attributes: attributes)
        let graphInputs = inputs.filter { !constants.contains($0.0) && !$0.0.isEmpty }
            .map { ValueInfo(name: $0.0, elementType: $0.1.dtype, shape: $0.1.shape.map { .fixed($0) }) }
        let inits = inputs.filter { constants.contains($0.0) }.map { (name: $0.0, tensor: $0.1) }
        let graph = Graph(name: "g", nodes: [node], initializers: inits, inputs: graphInputs,
                          outputs: outputs.filter { !$0.isEmpty }.map { ValueInfo(name: $0) })
        let model = try CompiledModel(model: Model(opsetImports: ["": opset], graph: graph))
        var feeds: [String: Tensor] = [:]
        for (name, t) in inputs where !constants.contains(name) && !name.isEmpty { feeds[name] = t }
        let result = try model.run(feeds)
        return outputs.filter { !$0.isEmpty }.map { result[$0]! }
    }

    /// Floats of a float32 tensor.
    static func floats(_ t: Tensor) -> [Float] { t.scalars(as: Float.self) }

    /// The fusion tests' common check: `model` compiled with and without the chain fusions, run at batch 1 and 3 on 1
    /// and 2 threads on the same seeded input `x` (`input(batch, &rng)`), gives the same outputs within `close`;
    /// returns the fused plan's step kinds on a batch of 1. `label` names the case in failures.
    static func fusedStepKindsMatchingUnfused(_ model: Model, seed: UInt64, label: String = "",
                                              input: (Int, inout SeededGenerator) -> Tensor) throws -> Set<String> {
        let fused = try CompiledModel(model: model, baseDirectory: nil, fuseResiduals: true)
        let plain = try CompiledModel(model: model, baseDirectory: nil, fuseResiduals: true, fuseChains: false)
        var rng = SeededGenerator(seed: seed)
        defer { EngineThreads.configure(threads: 2) }
        for threads in [1, 2] {
            EngineThreads.configure(threads: threads)
            for batch in [1, 3] {
                let x = input(batch, &rng)
                let a = try fused.run(["x": x]), b = try plain.run(["x": x])
                for name in b.keys {
                    #expect(a[name]?.shape == b[name]!.shape, "\(name) \(label)")
                    #expect(close(floats(a[name]!), floats(b[name]!)), "\(name) batch \(batch) threads \(threads) \(label)")
                }
            }
        }
        return Set(try fused.profile(["x": input(1, &rng)]).map(\.opType))
    }

    /// True when `actual` is within 1e-4*max|ref|+1e-5 of `expected` elementwise.
    static func close(_ actual: [Float], _ expected: [Float], relative: Float = 1e-4, absolute: Float = 1e-5) -> Bool {
        guard actual.count == expected.count else { return false }
        let scale = expected.reduce(Float(0)) { $1.isFinite ? max($0, abs($1)) : $0 }
        let tolerance = relative * scale + absolute
        return zip(actual, expected).allSatisfy { a, e in (a.isNaN && e.isNaN) || a == e || abs(a - e) <= tolerance }
    }

    /// Reads a fixture `.npy`.
    static func npy(_ path: String) throws -> Tensor { try NumpyFormat.read(path: path) }
}
