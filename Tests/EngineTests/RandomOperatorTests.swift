import Testing
import Tensor
import ONNX
@testable import Engine

/// The random generators: ranges, moments, seeding, dtypes, and that they are never folded into constants.
@Suite struct RandomOperatorTests {
    typealias T = TestSupport

    static func model(_ op: String, _ attributes: [String: Attribute], input: ValueInfo? = nil) throws -> CompiledModel {
        let node = Node(name: "r", opType: op, inputs: input.map { [$0.name] } ?? [], outputs: ["y"], attributes: attributes)
        let graph = Graph(name: "g", nodes: [node], initializers: [], inputs: input.map { [$0] } ?? [], outputs: [ValueInfo(name: "y")])
        return try CompiledModel(model: Model(opsetImports: ["": 17], graph: graph))
    }

    @Test func uniformStaysInRangeAndDrawsAnewEachRun() throws {
        let m = try Self.model("RandomUniform", ["shape": .ints([4000]), "low": .float(-2), "high": .float(3)])
        let a = try m.run([:])["y"]!, b = try m.run([:])["y"]!
        #expect(a.shape == [4000] && a.dtype == .float32)
        let values = a.scalars(as: Float.self)
        #expect(values.allSatisfy { $0 >= -2 && $0 < 3 })
        let mean = values.reduce(0, +) / Float(values.count)
        #expect(abs(mean - 0.5) < 0.15, "mean \(mean)")
        #expect(a.scalars(as: Float.self) != b.scalars(as: Float.self), "a constant: the node was folded")
    }

    @Test func normalHasItsMomentsAndSeedsReproduce() throws {
        let attributes: [String: Attribute] = ["shape": .ints([2, 5000]), "mean": .float(1), "scale": .float(2), "seed": .float(7), "dtype": .int(11)]
        let first = try Self.model("RandomNormal", attributes), second = try Self.model("RandomNormal", attributes)
        let a = try first.run([:])["y"]!
        #expect(a.dtype == .float64 && a.shape == [2, 5000])
        let b = try second.run([:])["y"]!
        #expect(a.scalars(as: Double.self) == b.scalars(as: Double.self), "same seed, same first draw")
        let v = a.scalars(as: Double.self)
        let mean = v.reduce(0, +) / Double(v.count)
        let sd = (v.map { ($0 - mean) * ($0 - mean) }.reduce(0, +) / Double(v.count)).squareRoot()
        #expect(abs(mean - 1) < 0.1 && abs(sd - 2) < 0.1, "mean \(mean) sd \(sd)")
    }

    @Test func likeVariantsFollowTheInput() throws {
        let x = ValueInfo(name: "x", elementType: .float64, shape: [.fixed(3), .fixed(4)])
        let feeds = ["x": Tensor(shape: [3, 4], scalars: [Double](repeating: 0, count: 12))]
        let uniform = try Self.model("RandomUniformLike", [:], input: x).run(feeds)["y"]!
        #expect(uniform.shape == [3, 4] && uniform.dtype == .float64)
        let normal = try Self.model("RandomNormalLike", ["dtype": .int(1)], input: x).run(feeds)["y"]!
        #expect(normal.shape == [3, 4] && normal.dtype == .float32)
    }

    @Test func bernoulliAndMultinomialRespectCertainOutcomes() throws {
        let p = ValueInfo(name: "p", elementType: .float32, shape: [.fixed(6)])
        let bernoulli = try Self.model("Bernoulli", ["dtype": .int(7)], input: p)
        let y = try bernoulli.run(["p": T.f([6], [0, 1, 0, 1, 1, 0])])["y"]!
        #expect(y.dtype == .int64 && y.scalars(as: Int64.self) == [0, 1, 0, 1, 1, 0])
        let logits = ValueInfo(name: "l", elementType: .float32, shape: [.fixed(2), .fixed(3)])
        let multinomial = try Self.model("Multinomial", ["sample_size": .int(50), "dtype": .int(7)], input: logits)
        let picks = try multinomial.run(["l": T.f([2, 3], [-100, 0, -100, -100, -100, 5])])["y"]!
        #expect(picks.shape == [2, 50])
        #expect(picks.scalars(as: Int64.self) == [Int64](repeating: 1, count: 50) + [Int64](repeating: 2, count: 50))
    }

    @Test func badAttributesFailAtLoad() {
        #expect(throws: EngineError.self) { try Self.model("RandomUniform", ["shape": .ints([2]), "dtype": .int(7)]) }
        #expect(throws: EngineError.self) { try Self.model("RandomNormal", [:]) }
        #expect(throws: EngineError.self) { try Self.model("Multinomial", ["dtype": .int(1)], input: ValueInfo(name: "x", elementType: .float32, shape: nil)) }
    }
}
