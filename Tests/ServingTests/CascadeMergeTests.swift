import Tensor
import Testing
@testable import Serving

/// The cascade's pure parts: per-row gather and merge, top-1 probabilities, the compatibility check and the cycle
/// refusal at load (the request path end to end is in APITests/CascadeTests.swift, on real models).
@Suite struct CascadeMergeTests {
    private func matrix(_ rows: [[Float]]) -> Tensor { Tensor(shape: [rows.count, rows[0].count], scalars: rows.flatMap { $0 }) }

    @Test func mergePutsTheTargetRowsBackInOrder() {
        let first = matrix([[0, 0], [1, 1], [2, 2], [3, 3], [4, 4]])
        let target = matrix([[10, 10], [30, 30], [40, 40]])
        let merged = Inference.mergeRows(first, target, at: [1, 3, 4])
        #expect(merged.shape == [5, 2])
        #expect(merged.scalars(as: Float.self) == [0, 0, 10, 10, 2, 2, 30, 30, 40, 40])
        #expect(Inference.mergeRows(first, matrix([[9, 9]]), at: [0]).scalars(as: Float.self) == [9, 9, 1, 1, 2, 2, 3, 3, 4, 4])
        let all = Inference.mergeRows(matrix([[0], [1]]), matrix([[5], [6]]), at: [0, 1])
        #expect(all.scalars(as: Float.self) == [5, 6])
    }

    @Test func gatherTakesTheEscalatedRowsOfEveryKindOfInput() {
        let x = Tensor(shape: [4, 1, 2], scalars: [Float](stride(from: 0, to: 8, by: 1)))
        let picked = Inference.gather(x, rows: [0, 2, 3])
        #expect(picked.shape == [3, 1, 2])
        #expect(picked.scalars(as: Float.self) == [0, 1, 4, 5, 6, 7])
        let images = Tensor(shape: [3], strings: [[1], [2, 2], [3, 3, 3]])
        #expect(Inference.gather(images, rows: [2, 0]).strings == [[3, 3, 3], [1]])
    }

    @Test func topProbabilityPerRow() {
        let p = matrix([[0.1, 0.7, 0.2], [0.5, 0.25, 0.25]])
        let top = Inference.topProbabilities(p)
        #expect(top.count == 2)
        #expect(abs(top[0] - 0.7) < 1e-6 && abs(top[1] - 0.5) < 1e-6)
        let broken = Inference.topProbabilities(matrix([[.nan, 0.3], [.nan, .nan]]))
        #expect(abs(broken[0] - 0.3) < 1e-6 && broken[1].isNaN, "NaN is ignored; a row of NaN stays NaN (and escalates)")
    }

    @Test func targetAnswersMustHaveTheSameClassesAndLabels() throws {
        let mine = [matrix([[0, 1, 0], [1, 0, 0]])]
        let good = CascadeAnswer(outputs: [matrix([[0, 0, 1]])], labels: ["a", "b", "c"], answeredBy: ["big/1"])
        try Inference.checkCompatible(good, with: mine, labels: ["a", "b", "c"], rows: 1)
        try Inference.checkCompatible(good, with: mine, labels: [], rows: 1)
        let wide = CascadeAnswer(outputs: [matrix([[0, 0, 1, 0]])], labels: [], answeredBy: ["big/1"])
        #expect(throws: CascadeMismatch.self) { try Inference.checkCompatible(wide, with: mine, labels: [], rows: 1) }
        #expect(throws: CascadeMismatch.self) { try Inference.checkCompatible(good, with: mine, labels: [], rows: 2) }
        let renamed = CascadeAnswer(outputs: good.outputs, labels: ["x", "y", "z"], answeredBy: ["big/1"])
        #expect(throws: CascadeMismatch.self) { try Inference.checkCompatible(renamed, with: mine, labels: ["a", "b", "c"], rows: 1) }
        let doubles = CascadeAnswer(outputs: [Tensor(shape: [1, 3], scalars: [0.0, 0, 1])], labels: [], answeredBy: ["big/1"])
        #expect(throws: CascadeMismatch.self) { try Inference.checkCompatible(doubles, with: mine, labels: [], rows: 1) }
    }

    @Test func reportSaysWhetherAnyRowEscalatedOrFoundNoTarget() {
        let report = CascadeReport(answeredBy: ["s/1", "b/2"], firstScores: [0.9, 0.2], outcomes: [.kept, .escalated])
        #expect(report.cascaded && !report.unavailable)
        let stuck = CascadeReport(answeredBy: ["s/1"], firstScores: [0.2], outcomes: [.unavailable])
        #expect(!stuck.cascaded && stuck.unavailable)
    }

    @Test func aConfigClosingACycleIsRefusedNamingIt() throws {
        let registry = ModelRegistry(repositoryPath: "/nonexistent", loader: fakeLoader())
        let toA = try ModelConfig(json: Array(#"{"cascade": {"model": "a", "min_confidence": 0.5}}"#.utf8))
        let refusal = registry.cascadeCycleRefusal(model: "c", version: 3, config: toA, others: ["a": "b", "b": "c"])
        #expect(refusal?.description == "model 'c' version 3 failed to load: config.json cascade forms a cycle with the loaded models: c -> a -> b -> c")
        #expect(registry.cascadeCycleRefusal(model: "c", version: 1, config: toA, others: ["a": "b"]) == nil, "a chain that ends is fine")
        #expect(registry.cascadeCycleRefusal(model: "a", version: 1, config: toA, others: [:])?.description.hasSuffix("a -> a") == true)
        #expect(registry.cascadeCycleRefusal(model: "c", version: 1, config: ModelConfig(), others: ["a": "c"]) == nil)
    }
}
