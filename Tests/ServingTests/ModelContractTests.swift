import Testing
import Engine
import Tensor
@testable import Serving

/// The one check every request's tensors get, whatever protocol brought them (moved here from the V2 codec's
/// binding and ServedVersion's validation, wordings unified on ServedVersion's).
@Suite struct ModelContractTests {
    private let contract = ModelContract(model: "m", inputs: [
        TensorSpec(name: "image", dtype: .float32, shape: [.symbolic("N"), .fixed(3), .fixed(2)]),
        TensorSpec(name: "ids", dtype: .int64, shape: [.symbolic("N")]),
    ], outputs: [TensorSpec(name: "y", dtype: .float32, shape: [.symbolic("N")])], maxBatchSize: 4)

    private func image(_ shape: [Int]) -> Tensor { Tensor(dtype: .float32, shape: shape) }
    private func ids(_ n: Int) -> Tensor { Tensor(shape: [n], scalars: [Int32](repeating: 7, count: n)) }
    private func message(_ feeds: [String: Tensor]) -> String? {
        do { _ = try contract.bind(feeds); return nil } catch ServingError.invalidInput(let message) { return message } catch { return "wrong error \(error)" }
    }

    @Test func bindsInModelOrderAndWidens() throws {
        let bound = try contract.bind(["ids": ids(2), "image": image([2, 3, 2])])
        #expect(bound.feeds["image"]?.dtype == .float32 && bound.feeds["ids"]?.dtype == .int64)
        #expect(bound.feeds["ids"]?.scalars(as: Int64.self) == [7, 7])
        #expect(bound.rows == 2)
    }

    @Test func reportsMismatchesWithExpectedAndGot() {
        #expect(message(["image": image([2, 3, 2])]) == "missing input 'ids': model 'm' expects inputs [image, ids]")
        #expect(message(["image": image([2, 3, 2]), "ids": ids(2), "extra": Tensor(dtype: .float32, shape: [1])])
                == "unknown input 'extra': model 'm' expects inputs [image, ids]")
        #expect(message(["image": image([2, 3, 3]), "ids": ids(2)]) == "input 'image': expected shape [N, 3, 2], got [2, 3, 3] (dimension 2 must be 2)")
        #expect(message(["image": image([3, 2]), "ids": ids(2)]) == "input 'image': expected rank 3 shape [N, 3, 2], got rank 2 shape [3, 2]")
        #expect(message(["image": image([2, 3, 2]), "ids": ids(3)]) == "dimension 'N' is 2 in input 'image' but 3 in input 'ids'")
        #expect(message(["image": Tensor(dtype: .float64, shape: [1, 3, 2]), "ids": ids(1)]) == "input 'image': expected dtype float32, got float64")
        #expect(message(["image": image([5, 3, 2]), "ids": ids(5)]) == "batch size must be between 1 and 4 (max_batch_size), got 5")
    }

    @Test func unknownOutputsAreNamed() throws {
        try contract.checkOutputs(["y"])
        #expect(throws: ServingError.invalidInput("unknown output 'nope': model 'm' has outputs [y]")) { try contract.checkOutputs(["y", "nope"]) }
    }

    @Test func losslessConversion() throws {
        let int32 = Tensor(shape: [2], scalars: [Int32(-3), 4])
        #expect(int32.losslesslyConverted(to: .int64)?.scalars(as: Int64.self) == [-3, 4])
        #expect(int32.losslesslyConverted(to: .float64)?.scalars(as: Double.self) == [-3, 4])
        #expect(int32.losslesslyConverted(to: .float32) == nil, "INT32 -> FP32 is not lossless")
        #expect(throws: ServingError.invalidInput("input 'x': expected dtype float32, got int32")) {
            try ModelContract.converted(int32, to: TensorSpec(name: "x", dtype: .float32, shape: [.fixed(2)]))
        }
        #expect(Tensor(shape: [1], scalars: [Int64(1)]).losslesslyConverted(to: .float32) == nil)
        let f = Tensor(shape: [1], scalars: [Float(0.1)])
        #expect(f.losslesslyConverted(to: .float64)?.scalars(as: Double.self) == [Double(Float(0.1))])
    }
}
