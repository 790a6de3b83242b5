import Testing
import Tensor
import ONNX
@testable import Engine
import TestSupport

private typealias T = TestSupport

/// `run(stacking:)`: a batch given in parts (requests' rows, each in its own buffer), the first step reading each part
/// where it is, against the same rows stacked into one batch.
@Suite struct PartwiseEntryTests {
    /// `x`'s rows in `sizes` parts, each copied into a buffer of its own, as rows of separate requests arrive.
    static func separateParts(_ x: Tensor, sizes: [Int]) -> [Tensor] {
        var start = 0
        return sizes.map { size in
            defer { start += size }
            let window = x.rows(start..<(start + size))
            return Tensor(shape: window.shape, scalars: window.scalars(as: Float.self))
        }
    }

    /// Runs the parts twice (the first run learns the entry step's output shape, the second allocates it beforehand)
    /// and compares every output with the stacked batch's.
    static func expectPartsMatchStacked(_ model: CompiledModel, _ x: Tensor, sizes: [Int], label: String) throws {
        let stacked = try model.run(["x": x])
        for pass in 1...2 {
            let parts = separateParts(x, sizes: sizes).map { ["x": $0] }
            let got = try model.run(stacking: parts)
            for (name, want) in stacked {
                let value = try #require(got[name], "\(label) \(name)")
                #expect(value.shape == want.shape, "\(label) \(name) sizes \(sizes) pass \(pass)")
                #expect(T.close(T.floats(value), T.floats(want)), "\(label) \(name) sizes \(sizes) pass \(pass)")
            }
        }
    }

    static let sizes: [[Int]] = [[1, 1, 1, 1], [2, 1, 1], [1, 3]]

    @Test(arguments: [false, true]) func aChannelsLastStemReadsEachPartWhereItIs(scaleFirst: Bool) throws {
        let model = try CompiledModel(model: ChannelsLastTests.mobileBlock(scaleFirst: scaleFirst), baseDirectory: nil, fuseResiduals: true)
        #expect(model.partwiseInputs == ["x"])
        var rng = SeededGenerator(seed: 5)
        let x = Tensor(shape: [4, 3, 10, 9], scalars: rng.floats(4 * 270))
        for sizes in Self.sizes { try Self.expectPartsMatchStacked(model, x, sizes: sizes, label: "mobile block") }
    }

    @Test(arguments: ConvPoolFusionTests.cases.prefix(2)) func aStemConvAndItsPoolReadEachPartWhereItIs(_ c: ConvPoolFusionTests.Case) throws {
        let model = try CompiledModel(model: ConvPoolFusionTests.model(c), baseDirectory: nil)
        #expect(model.partwiseInputs == ["x"], "\(c)")
        var rng = SeededGenerator(seed: 6)
        let x = Tensor(shape: [4, c.inChannels, c.height, c.width], scalars: rng.floats(4 * c.inChannels * c.height * c.width))
        for sizes in Self.sizes { try Self.expectPartsMatchStacked(model, x, sizes: sizes, label: "\(c)") }
    }

    /// x -> Conv -> y, and x -> ReduceMean -> Add onto it: x has two readers, so its parts are stacked.
    @Test func anInputWithTwoReadersIsStacked() throws {
        var rng = SeededGenerator(seed: 8)
        let inits: [(name: String, tensor: Tensor)] = [
            ("w", Tensor(shape: [4, 3, 3, 3], scalars: rng.floats(108))), ("b", Tensor(shape: [4], scalars: rng.floats(4))),
        ]
        let nodes = [
            Node(opType: "Conv", inputs: ["x", "w", "b"], outputs: ["c"], attributes: ["pads": .ints([1, 1, 1, 1])]),
            Node(opType: "ReduceMean", inputs: ["x"], outputs: ["m"], attributes: ["axes": .ints([1]), "keepdims": .int(1)]),
            Node(opType: "Add", inputs: ["c", "m"], outputs: ["y"]),
        ]
        let inputs = [ValueInfo(name: "x", elementType: .float32, shape: [.symbolic("N"), .fixed(3), .fixed(6), .fixed(5)])]
        let model = try CompiledModel(model: Model(opsetImports: ["": 17], graph: Graph(name: "two", nodes: nodes, initializers: inits,
                                                                                         inputs: inputs, outputs: [ValueInfo(name: "y")])),
                                      baseDirectory: nil)
        #expect(model.partwiseInputs.isEmpty)
        let x = Tensor(shape: [3, 3, 6, 5], scalars: rng.floats(270))
        try Self.expectPartsMatchStacked(model, x, sizes: [1, 2], label: "two readers")
    }

    /// Rows that are consecutive in one buffer (one request's) run as a view of it and give the batch's outputs.
    @Test func adjacentPartsGiveTheStackedOutputs() throws {
        let model = try CompiledModel(model: ChannelsLastTests.mobileBlock(scaleFirst: false), baseDirectory: nil, fuseResiduals: true)
        var rng = SeededGenerator(seed: 10)
        let x = Tensor(shape: [3, 3, 10, 9], scalars: rng.floats(810))
        let stacked = try model.run(["x": x])
        let got = try model.run(stacking: [["x": x.rows(0..<1)], ["x": x.rows(1..<3)]])
        for (name, want) in stacked { #expect(T.floats(got[name]!) == T.floats(want), "\(name)") }
    }

    @Test func partsThatDoNotStackAreRefused() throws {
        let model = try CompiledModel(model: ChannelsLastTests.mobileBlock(scaleFirst: false), baseDirectory: nil, fuseResiduals: true)
        let parts = [["x": Tensor(dtype: .float32, shape: [1, 3, 10, 9])], ["x": Tensor(dtype: .float32, shape: [1, 3, 11, 9])]]
        #expect(throws: EngineError.self) { try model.run(stacking: parts) }
        let missing = [["x": Tensor(dtype: .float32, shape: [1, 3, 10, 9])], [:]]
        #expect(throws: EngineError.self) { try model.run(stacking: missing) }
    }
}
