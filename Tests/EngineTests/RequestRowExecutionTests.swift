import Testing
import ONNX
import Tensor
@testable import Engine

/// `runRequestRows` (one row per part, read where each request holds it) against `runSplittingRows` on the stacked batch.
@Suite struct RequestRowExecutionTests {
    static func bytes(_ tensor: Tensor) -> [UInt8] { tensor.withUnsafeBytes { Array($0) } }

    /// `feeds` cut into requests of `sizes` rows each (the sizes sum to the feeds' rows), each in its own storage as
    /// a decoded request is (the first keeps the batch's).
    static func requests(_ feeds: [String: Tensor], sizes: [Int]) -> [[String: Tensor]] {
        var start = 0
        return sizes.map { size in
            defer { start += size }
            return feeds.mapValues { Tensor.concatenatingRows([$0.rows(start..<(start + size))]) }
        }
    }

    @Test(arguments: OnnxRuntimeFixtureTests.models) func outputsEqualTheStackedBatchs(_ name: String) throws {
        let (model, fixtureFeeds, _) = try OnnxRuntimeFixtureTests.load(name)
        let feeds = RowSplitExecutionTests.widened(fixtureFeeds, copies: 3)
        let rows = feeds.values.first!.shape[0]
        // Mixed row counts: one-row requests (outputs as the part left them) and longer ones (their rows stitched).
        let sizes = rows >= 4 ? [1, 2, 1, rows - 4].filter { $0 > 0 } : [1, rows - 1]
        let requests = Self.requests(feeds, sizes: sizes)
        let stacked = try model.runSplittingRows(feeds, parts: rows)
        let answers = try #require(try model.runRequestRows(requests, parts: rows), "\(name)")
        #expect(answers.count == sizes.count)
        var start = 0
        for (answer, size) in zip(answers, sizes) {
            #expect(Set(answer.keys) == Set(stacked.keys), "\(name)")
            for (output, value) in stacked {
                let actual = try #require(answer[output])
                let expected = value.rows(start..<(start + size))
                #expect(actual.shape == expected.shape && actual.dtype == expected.dtype, "\(name).\(output) rows \(start)+\(size)")
                // The same 1-thread run of the same row either way: bit for bit.
                #expect(Self.bytes(actual) == Self.bytes(expected), "\(name).\(output) rows \(start)+\(size)")
            }
            start += size
        }
    }

    @Test func anotherScheduleOrUnstackableRequestsRunNothing() throws {
        let (model, fixtureFeeds, _) = try OnnxRuntimeFixtureTests.load("cnn")
        let feeds = RowSplitExecutionTests.widened(fixtureFeeds, copies: 3)
        let rows = feeds.values.first!.shape[0]
        let requests = Self.requests(feeds, sizes: [1, rows - 1])
        #expect(try model.runRequestRows(requests, parts: 2) == nil, "two row ranges are not one row per part")
        #expect(try model.runRequestRows([requests[0]], parts: 1) == nil, "a lone row")
        let name = feeds.keys.first!
        var renamed = requests
        renamed[1] = ["other": requests[1][name]!]
        #expect(try model.runRequestRows(renamed, parts: rows) == nil, "different feed names")
        var reshaped = requests
        let tensor = requests[1][name]!
        reshaped[1] = [name: tensor.reshaped([tensor.shape[0], tensor.count / tensor.shape[0]])]
        #expect(try model.runRequestRows(reshaped, parts: rows) == nil, "different trailing shapes")
        var empty = requests
        empty[1] = [name: tensor.rows(0..<0)]
        #expect(try model.runRequestRows(empty, parts: rows) == nil, "a request without rows")
    }

    @Test func stackableRowsCountsEachRequest() {
        let a = Tensor(shape: [2, 3], scalars: [Float](repeating: 1, count: 6))
        let b = Tensor(shape: [1, 3], scalars: [Float](repeating: 2, count: 3))
        #expect(CompiledModel.stackableRows([["x": a], ["x": b]]) == [2, 1])
        #expect(CompiledModel.stackableRows([["x": a], ["x": b.reshaped([3])]]) == nil)
        #expect(CompiledModel.stackableRows([["x": a], ["x": b, "y": b]]) == nil)
        #expect(CompiledModel.stackableRows([]) == nil)
    }

    /// x [N, 4] -> Relu -> y [N, 4], and when `withSummary`, also ReduceSum over the rows -> s declared [1, 4].
    private static func reluModel(withSummary: Bool) throws -> CompiledModel {
        var nodes = [Node(name: "r", opType: "Relu", inputs: ["x"], outputs: ["y"])]
        var outputs = [ValueInfo(name: "y", elementType: .float32, shape: [.symbolic("N"), .fixed(4)])]
        if withSummary {
            nodes.append(Node(name: "s", opType: "ReduceSum", inputs: ["y"], outputs: ["s"], attributes: ["axes": .ints([0]), "keepdims": .int(1)]))
            outputs.append(ValueInfo(name: "s", elementType: .float32, shape: [.fixed(1), .fixed(4)]))
        }
        let graph = Graph(name: "relu", nodes: nodes, initializers: [],
                          inputs: [ValueInfo(name: "x", elementType: .float32, shape: [.symbolic("N"), .fixed(4)])], outputs: outputs)
        return try CompiledModel(model: Model(opsetImports: ["": 11], graph: graph))
    }

    @Test func anOutputDeclaredWithoutABatchAxisRunsNothing() throws {
        let x = Tensor(shape: [3, 4], scalars: (0..<12).map { Float($0) - 6 })
        let requests = Self.requests(["x": x], sizes: [1, 2])
        let rowwise = try #require(try Self.reluModel(withSummary: false).runRequestRows(requests, parts: 3))
        #expect(rowwise.map { $0["y"]!.scalars(as: Float.self) } == [[0, 0, 0, 0], [0, 0, 0, 1, 2, 3, 4, 5]])
        #expect(try Self.reluModel(withSummary: true).runRequestRows(requests, parts: 3) == nil)
    }
}
