import CKernelShim
import Testing
import Tensor
import ONNX
@testable import Engine
import TestSupport

private typealias T = TestSupport

/// quantize_static's `QLinearMatMul -> DequantizeLinear [-> Add bias]`, compiled with the fused dequantizing epilogue
/// and without it: the floats must be equal bit for bit (same requantization, same float operations).
@Suite(.serialized) struct QuantizedMatMulDequantizationTests {
    /// x [N, 7, K] quantized once and read by three products: uint8 output with a bias Add (bias first, as exported),
    /// int8 output without one, and full-range weights (outside the u8 x s8 kernel: the fallback). `dequantizedAlsoOutput`
    /// makes the first DequantizeLinear's result a graph output too.
    private static func model(k: Int = 37, n: Int = 20, dequantizedAlsoOutput: Bool = false) -> Model {
        var rng = SeededGenerator(seed: 31)
        func weights(_ range: ClosedRange<Int8>) -> Tensor { Tensor(shape: [k, n], scalars: (0..<(k * n)).map { _ in Int8.random(in: range, using: &rng) }) }
        let inits: [(name: String, tensor: Tensor)] = [
            ("xs", Tensor(scalar: Float(0.021))), ("xz", Tensor(scalar: UInt8(121))),
            ("w1", weights(-64...64)), ("w1s", Tensor(shape: [n], scalars: (0..<n).map { _ in Float.random(in: 0.002...0.02, using: &rng) })),
            ("w1z", Tensor(scalar: Int8(0))), ("y1s", Tensor(scalar: Float(0.043))), ("y1z", Tensor(scalar: UInt8(127))),
            ("d1s", Tensor(scalar: Float(0.043))), ("d1z", Tensor(scalar: UInt8(127))), ("bias", Tensor(shape: [n], scalars: rng.floats(n))),
            ("w2", weights(-64...64)), ("w2s", Tensor(scalar: Float(0.011))), ("w2z", Tensor(scalar: Int8(0))),
            ("y2s", Tensor(scalar: Float(0.051))), ("y2z", Tensor(scalar: Int8(-4))), ("d2s", Tensor(scalar: Float(0.037))), ("d2z", Tensor(scalar: Int8(-4))),
            ("w3", weights(-128...127)), ("w3s", Tensor(scalar: Float(0.007))), ("w3z", Tensor(scalar: Int8(0))),
            ("y3s", Tensor(scalar: Float(0.08))), ("y3z", Tensor(scalar: UInt8(128))),
        ]
        let nodes = [
            Node(opType: "QuantizeLinear", inputs: ["x", "xs", "xz"], outputs: ["q"]),
            Node(opType: "QLinearMatMul", inputs: ["q", "xs", "xz", "w1", "w1s", "w1z", "y1s", "y1z"], outputs: ["p1"]),
            Node(opType: "DequantizeLinear", inputs: ["p1", "d1s", "d1z"], outputs: ["d1"]),
            Node(opType: "Add", inputs: ["bias", "d1"], outputs: ["y1"]),
            Node(opType: "QLinearMatMul", inputs: ["q", "xs", "xz", "w2", "w2s", "w2z", "y2s", "y2z"], outputs: ["p2"]),
            Node(opType: "DequantizeLinear", inputs: ["p2", "d2s", "d2z"], outputs: ["y2"]),
            Node(opType: "QLinearMatMul", inputs: ["q", "xs", "xz", "w3", "w3s", "w3z", "y3s", "y3z"], outputs: ["p3"]),
            Node(opType: "DequantizeLinear", inputs: ["p3", "y3s"], outputs: ["d3"]),
            Node(opType: "Add", inputs: ["d3", "bias"], outputs: ["y3"]),
        ]
        let inputs = [ValueInfo(name: "x", elementType: .float32, shape: [.symbolic("N"), .fixed(7), .fixed(k)])]
        let outputs = (["y1", "y2", "y3"] + (dequantizedAlsoOutput ? ["d1"] : [])).map { ValueInfo(name: $0) }
        return Model(opsetImports: ["": 13], graph: Graph(name: "qdq", nodes: nodes, initializers: inits, inputs: inputs, outputs: outputs))
    }

    /// Runs fused (AVX2 and portable bodies) and unfused on batches 1 and 2, expects equal outputs, returns the fused step kinds.
    private static func check(_ model: Model, k: Int = 37) throws -> [String: Int] {
        let fused = try CompiledModel(model: model, baseDirectory: nil, fuseResiduals: true)
        let plain = try CompiledModel(model: model, baseDirectory: nil, fuseResiduals: true, fuseChains: false)
        var rng = SeededGenerator(seed: 32)
        for batch in [1, 2] {
            let feeds = ["x": Tensor(shape: [batch, 7, k], scalars: rng.floats(batch * 7 * k).map { $0 * 2.5 + 0.2 })]
            let a = try fused.run(feeds), b = try plain.run(feeds)
            osprey_qkernels_force_portable(1)
            let portable = try fused.run(feeds)
            osprey_qkernels_force_portable(0)
            for (name, expected) in b {
                #expect(a[name]!.shape == expected.shape, "\(name)")
                #expect(T.floats(a[name]!) == T.floats(expected), "\(name): fused vs unfused")
                #expect(T.floats(portable[name]!) == T.floats(expected), "\(name): portable fused vs unfused")
            }
        }
        let feeds = ["x": Tensor(shape: [1, 7, k], scalars: rng.floats(7 * k))]
        return Dictionary(uniqueKeysWithValues: try fused.profile(feeds).map { ($0.opType, $0.nodes) })
    }

    @Test func productDequantizationAndBiasBecomeOneNode() throws {
        let kinds = try Self.check(Self.model())
        #expect(kinds == ["QuantizeLinear": 1, dequantizedQLinearMatMulOp: 3], "\(kinds)")
    }

    @Test func biasAddOfAGraphOutputStays() throws {
        // d1 is an output: its product and DequantizeLinear fuse, the Add reading it stays.
        let kinds = try Self.check(Self.model(dequantizedAlsoOutput: true))
        #expect(kinds == ["QuantizeLinear": 1, dequantizedQLinearMatMulOp: 3, "Add": 1], "\(kinds)")
    }
}
