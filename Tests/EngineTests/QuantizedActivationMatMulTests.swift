import Testing
import Tensor
import ONNX
@testable import Engine
import TestSupport

private typealias T = TestSupport

/// QLinearMatMul with a B computed at run time (attention): the packed int16 path against the general path, and the
/// QDQ rewrite of `DQ(a), DQ(b) -> MatMul -> Q` against the float graph.
@Suite struct QuantizedActivationMatMulTests {
    static let ctx = OpContext(node: Node(opType: "QLinearMatMul", inputs: [], outputs: ["y"]), opset: 21, constants: [:], activation: .none)

    static func bytes(_ shape: [Int], _ dtype: DType, _ rng: inout SeededGenerator) -> Tensor {
        let count = shape.reduce(1, *)
        if dtype == .int8 { return Tensor(shape: shape, scalars: (0..<count).map { _ in Int8.random(in: .min ... .max, using: &rng) }) }
        return Tensor(shape: shape, scalars: (0..<count).map { _ in UInt8.random(in: 0 ... .max, using: &rng) })
    }

    static func zero(_ value: Int, _ dtype: DType) -> Tensor {
        dtype == .int8 ? Tensor(scalar: Int8(value)) : Tensor(scalar: UInt8(value + 128))
    }

    /// (A, B, Y) types of the cases.
    static let typeCases: [(DType, DType, DType)] = [(.uint8, .uint8, .uint8), (.int8, .uint8, .int8), (.uint8, .int8, .uint8)]

    @Test(arguments: 0..<3) func packedPathMatchesTheGeneralPath(_ index: Int) throws {
        let (at, bt, yt) = Self.typeCases[index]
        var rng = SeededGenerator(seed: 51)
        // Batch broadcasting, odd K, N off the 16-column panel.
        for (aShape, bShape) in [([2, 3, 5, 7], [3, 7, 19]), ([1, 4, 9, 32], [1, 4, 32, 16]), ([6, 33], [33, 40])] {
            let a = Self.bytes(aShape, at, &rng), b = Self.bytes(bShape, bt, &rng)
            let aZero = Self.zero(3, at), bZero = Self.zero(-9, bt), yZero = Self.zero(-2, yt)
            let aScale = Tensor(scalar: Float(0.021)), bScale = Tensor(scalar: Float(0.037)), yScale = Tensor(scalar: Float(0.9))
            let fast = try #require(try qlinearMatMulRuntimeB(a: a, aScale: aScale, aZero: aZero, b: b, bScale: bScale, bZero: bZero,
                                                              yScale: yScale, yZero: yZero, Self.ctx))
            let sums = try #require(try fastIntegerMatMul(a, zero: aZero, b, zero: bZero, packed: nil, Self.ctx))
            // Per-row scales take the general per-element requantization.
            let m = aShape[aShape.count - 2]
            let general = try #require(requantizedMatMulSums(sums, aScale: [Double](repeating: 0.021, count: m), bScale: [Double(Float(0.037))],
                                                             yScale: Double(Float(0.9)), yZero: yZero))
            #expect(fast.shape == general.shape && fast.dtype == yt, "\(aShape) x \(bShape)")
            #expect(fast.doubles == general.doubles, "\(aShape) x \(bShape)")
        }
    }

    /// x [N, 4, 6] and w [N, 6, 5] (both activations) -> Q -> DQ -> MatMul -> Q -> DQ -> y.
    private static func model() -> Model {
        let inits: [(name: String, tensor: Tensor)] = [
            ("xs", Tensor(scalar: Float(0.02))), ("xz", Tensor(scalar: UInt8(128))),
            ("ws", Tensor(scalar: Float(0.03))), ("wz", Tensor(scalar: UInt8(120))),
            ("ys", Tensor(scalar: Float(0.05))), ("yz", Tensor(scalar: UInt8(125))),
        ]
        let nodes = [
            Node(opType: "QuantizeLinear", inputs: ["x", "xs", "xz"], outputs: ["xq"]),
            Node(opType: "DequantizeLinear", inputs: ["xq", "xs", "xz"], outputs: ["xd"]),
            Node(opType: "QuantizeLinear", inputs: ["w", "ws", "wz"], outputs: ["wq"]),
            Node(opType: "DequantizeLinear", inputs: ["wq", "ws", "wz"], outputs: ["wd"]),
            Node(opType: "MatMul", inputs: ["xd", "wd"], outputs: ["p"]),
            Node(opType: "QuantizeLinear", inputs: ["p", "ys", "yz"], outputs: ["pq"]),
            Node(opType: "DequantizeLinear", inputs: ["pq", "ys", "yz"], outputs: ["y"]),
        ]
        let inputs = [ValueInfo(name: "x", elementType: .float32, shape: [.symbolic("N"), .fixed(4), .fixed(6)]),
                      ValueInfo(name: "w", elementType: .float32, shape: [.symbolic("N"), .fixed(6), .fixed(5)])]
        return Model(opsetImports: ["": 17], graph: Graph(name: "qdq-attention", nodes: nodes, initializers: inits, inputs: inputs, outputs: [ValueInfo(name: "y")]))
    }

    @Test func qdqMatMulOfTwoActivationsRunsAsQLinearMatMul() throws {
        let fused = try CompiledModel(model: Self.model(), baseDirectory: nil, fuseResiduals: true)
        let plain = try CompiledModel(model: Self.model(), baseDirectory: nil, fuseResiduals: true, fuseChains: false)
        var rng = SeededGenerator(seed: 53)
        for batch in [1, 3] {
            let feeds = ["x": Tensor(shape: [batch, 4, 6], scalars: rng.floats(batch * 24).map { $0 * 2 }),
                         "w": Tensor(shape: [batch, 6, 5], scalars: rng.floats(batch * 30).map { $0 * 3 })]
            let a = T.floats(try fused.run(feeds)["y"]!), b = T.floats(try plain.run(feeds)["y"]!)
            // One step of y's scale: the float product may round a tie the other way.
            #expect(zip(a, b).allSatisfy { abs($0 - $1) <= 0.05 * 1.001 }, "batch \(batch)")
        }
        let kinds = Set(try fused.profile(["x": Tensor(shape: [1, 4, 6], scalars: rng.floats(24)), "w": Tensor(shape: [1, 6, 5], scalars: rng.floats(30))]).map(\.opType))
        #expect(kinds.contains("QLinearMatMul") && !kinds.contains("MatMul"), "\(kinds)")
    }
}
