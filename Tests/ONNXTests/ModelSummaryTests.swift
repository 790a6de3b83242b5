import Testing
import Tensor
@testable import ONNX

@Suite struct ModelSummaryTests {
    @Test func summarisesTheFixture() throws {
        let summary = ModelSummary(try Model(contentsOf: Fixtures.path("initializers.onnx")))
        #expect(summary.producerName == "osprey-fixtures")
        #expect(summary.irVersion == 7)
        #expect(summary.domain == "ai.osprey.test")
        #expect(summary.modelVersion == 3)
        #expect(summary.graphName == "inits")
        #expect(summary.opsets.map(\.domain) == ["ai.onnx", "com.example"])
        // `w` is listed as a graph input but has an initializer: not something clients feed.
        #expect(summary.inputs.map(\.name) == ["x"])
        #expect(summary.inputs[0].type == "float32")
        #expect(summary.inputs[0].shape == [.name("batch"), .size(4)])
        #expect(summary.outputs[0].shape == [.name("batch"), .size(-1)])
        #expect(summary.operatorCounts.map(\.op) == ["Mul", "Relu"])
        #expect(summary.metadata.count == 2)
        let model = try Model(contentsOf: Fixtures.path("initializers.onnx"))
        #expect(summary.parameterCount == model.graph.initializers.reduce(0) { $0 + $1.tensor.count })
        #expect(summary.parameterBytes > 0)
    }

    @Test func countsSubgraphOperatorsAndNamesDomains() throws {
        let summary = ModelSummary(try Model(contentsOf: Fixtures.path("attributes.onnx")))
        let counts = Dictionary(uniqueKeysWithValues: summary.operatorCounts.map { ($0.op, $0.count) })
        // then/else of If (2) + g and graphs (3) on the custom node.
        #expect(counts["Constant"] == 5)
        #expect(counts["If"] == 1)
        #expect(counts["com.example:Everything"] == 1)
        #expect(summary.outputs[1].type == "sequence")
        #expect(summary.outputs[1].shape == nil)
    }
}
