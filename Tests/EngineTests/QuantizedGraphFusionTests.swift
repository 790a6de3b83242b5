import Testing
import Tensor
import ONNX
@testable import Engine
import TestSupport

private typealias T = TestSupport

/// QDQ graphs as onnxruntime's quantize_static writes them, compiled with the QDQ rewrite and without it: the
/// integer operators must give the float path's result within one quantization step of the output.
@Suite struct QuantizedGraphFusionTests {
    /// x -> Q -> DQ -> Conv(DQ w, DQ bias) -> Q -> DQ -> Add(DQ(Q(x))) -> Q -> DQ -> GlobalAveragePool -> Q -> DQ
    /// -> Flatten -> Q -> DQ -> y, plus (when `extraReader`) a second reader of the Conv's float output.
    private static func model(extraReader: Bool) -> Model {
        let c = 4
        var rng = SeededGenerator(seed: 31)
        let xs: Float = 0.05, ws = (0..<c).map { _ in Float.random(in: 0.004...0.01, using: &rng) }
        let inits: [(name: String, tensor: Tensor)] = [
            ("xs", Tensor(shape: [], scalars: [xs])), ("xz", Tensor(shape: [], scalars: [UInt8(120)])),
            ("w", Tensor(shape: [c, c, 3, 3], scalars: (0..<(c * c * 9)).map { _ in Int8.random(in: -64...64, using: &rng) })),
            ("ws", Tensor(shape: [c], scalars: ws)), ("wz", Tensor(shape: [c], scalars: [Int8](repeating: 0, count: c))),
            ("b", Tensor(shape: [c], scalars: (0..<c).map { _ in Int32.random(in: -2000...2000, using: &rng) })),
            ("bs", Tensor(shape: [c], scalars: ws.map { $0 * xs })),
            ("ys", Tensor(shape: [], scalars: [Float(0.08)])), ("yz", Tensor(shape: [], scalars: [UInt8(110)])),
            ("ss", Tensor(shape: [], scalars: [Float(0.1)])), ("sz", Tensor(shape: [], scalars: [UInt8(100)])),
            ("gs", Tensor(shape: [], scalars: [Float(0.02)])), ("gz", Tensor(shape: [], scalars: [UInt8(90)])),
        ]
        var nodes = [
            Node(opType: "QuantizeLinear", inputs: ["x", "xs", "xz"], outputs: ["xq"]),
            Node(opType: "DequantizeLinear", inputs: ["xq", "xs", "xz"], outputs: ["xd"]),
            Node(opType: "DequantizeLinear", inputs: ["w", "ws", "wz"], outputs: ["wd"], attributes: ["axis": .int(0)]),
            Node(opType: "DequantizeLinear", inputs: ["b", "bs"], outputs: ["bd"], attributes: ["axis": .int(0)]),
            Node(opType: "Conv", inputs: ["xd", "wd", "bd"], outputs: ["conv"], attributes: ["pads": .ints([1, 1, 1, 1])]),
            Node(opType: "QuantizeLinear", inputs: ["conv", "ys", "yz"], outputs: ["cq"]),
            Node(opType: "DequantizeLinear", inputs: ["cq", "ys", "yz"], outputs: ["cd"]),
            Node(opType: "Add", inputs: ["cd", "xd"], outputs: ["sum"]),
            Node(opType: "QuantizeLinear", inputs: ["sum", "ss", "sz"], outputs: ["sq"]),
            Node(opType: "DequantizeLinear", inputs: ["sq", "ss", "sz"], outputs: ["sd"]),
            Node(opType: "GlobalAveragePool", inputs: ["sd"], outputs: ["gap"]),
            Node(opType: "QuantizeLinear", inputs: ["gap", "gs", "gz"], outputs: ["gq"]),
            Node(opType: "DequantizeLinear", inputs: ["gq", "gs", "gz"], outputs: ["gd"]),
            Node(opType: "Flatten", inputs: ["gd"], outputs: ["flat"]),
            Node(opType: "QuantizeLinear", inputs: ["flat", "gs", "gz"], outputs: ["fq"]),
            Node(opType: "DequantizeLinear", inputs: ["fq", "gs", "gz"], outputs: ["y"]),
        ]
        var outputs = [ValueInfo(name: "y")]
        if extraReader {
            nodes.append(Node(opType: "Relu", inputs: ["conv"], outputs: ["r"]))
            outputs.append(ValueInfo(name: "r"))
        }
        let inputs = [ValueInfo(name: "x", elementType: .float32, shape: [.symbolic("N"), .fixed(c), .fixed(7), .fixed(9)])]
        return Model(opsetImports: ["": 17], graph: Graph(name: "qdq", nodes: nodes, initializers: inits, inputs: inputs, outputs: outputs))
    }

    private static func run(_ model: Model) throws -> (kinds: Set<String>, maxDiff: Float) {
        let fused = try CompiledModel(model: model, baseDirectory: nil, fuseResiduals: true)
        let plain = try CompiledModel(model: model, baseDirectory: nil, fuseResiduals: true, fuseChains: false)
        var rng = SeededGenerator(seed: 32)
        var worst: Float = 0
        for batch in [1, 2] {
            let x = Tensor(shape: [batch, 4, 7, 9], scalars: rng.floats(batch * 4 * 63).map { $0 * 4 })
            let a = try fused.run(["x": x]), b = try plain.run(["x": x])
            for (name, expected) in b {
                #expect(a[name]!.shape == expected.shape, "\(name)")
                worst = max(worst, zip(T.floats(a[name]!), T.floats(expected)).map { abs($0 - $1) }.max() ?? 0)
            }
        }
        let kinds = Set(try fused.profile(["x": Tensor(shape: [1, 4, 7, 9], scalars: rng.floats(4 * 63))]).map(\.opType))
        return (kinds, worst)
    }

    @Test func qdqConvAddPoolAndFlattenRunAsIntegerOperators() throws {
        let (kinds, diff) = try Self.run(Self.model(extraReader: false))
        #expect(kinds.isSuperset(of: ["QLinearConv", "QLinearAdd", "QLinearGlobalAveragePool", "Flatten"]), "\(kinds)")
        #expect(!kinds.contains("Conv"), "\(kinds)")
        // One step of the output scale (0.02): rounding ties in the float path may land one step away.
        #expect(diff <= 0.02 * 1.001, "max diff \(diff)")
    }

    @Test func aConvWhoseFloatOutputHasAnotherReaderStaysFloat() throws {
        let (kinds, diff) = try Self.run(Self.model(extraReader: true))
        #expect(kinds.contains("Conv") && !kinds.contains("QLinearConv"), "\(kinds)")
        #expect(kinds.contains("QLinearAdd"), "\(kinds)")
        #expect(diff <= 0.02 * 1.001, "max diff \(diff)")
    }

    /// x -> Q -> DQ -> Gemm(DQ w per output column, DQ int32 bias, transB) -> Q -> DQ -> y: the classifier head of a QDQ CNN.
    private static func gemmModel(bias: Bool) -> Model {
        let (k, n) = (40, 12)
        var rng = SeededGenerator(seed: 33)
        let xs: Float = 0.04, ws = (0..<n).map { _ in Float.random(in: 0.004...0.01, using: &rng) }
        var inits: [(name: String, tensor: Tensor)] = [
            ("xs", Tensor(shape: [], scalars: [xs])), ("xz", Tensor(shape: [], scalars: [UInt8(120)])),
            ("w", Tensor(shape: [n, k], scalars: (0..<(n * k)).map { _ in Int8.random(in: -64...64, using: &rng) })),
            ("ws", Tensor(shape: [n], scalars: ws)), ("wz", Tensor(shape: [n], scalars: [Int8](repeating: 0, count: n))),
            ("ys", Tensor(shape: [], scalars: [Float(0.05)])), ("yz", Tensor(shape: [], scalars: [UInt8(128)])),
        ]
        var nodes = [
            Node(opType: "QuantizeLinear", inputs: ["x", "xs", "xz"], outputs: ["xq"]),
            Node(opType: "DequantizeLinear", inputs: ["xq", "xs", "xz"], outputs: ["xd"]),
            Node(opType: "DequantizeLinear", inputs: ["w", "ws", "wz"], outputs: ["wd"], attributes: ["axis": .int(0)]),
        ]
        var gemmInputs = ["xd", "wd"]
        if bias {
            inits += [("b", Tensor(shape: [n], scalars: (0..<n).map { _ in Int32.random(in: -3000...3000, using: &rng) })),
                      ("bs", Tensor(shape: [n], scalars: ws.map { $0 * xs }))]
            nodes.append(Node(opType: "DequantizeLinear", inputs: ["b", "bs"], outputs: ["bd"], attributes: ["axis": .int(0)]))
            gemmInputs.append("bd")
        }
        nodes += [
            Node(opType: "Gemm", inputs: gemmInputs, outputs: ["g"], attributes: ["transB": .int(1)]),
            Node(opType: "QuantizeLinear", inputs: ["g", "ys", "yz"], outputs: ["gq"]),
            Node(opType: "DequantizeLinear", inputs: ["gq", "ys", "yz"], outputs: ["y"]),
        ]
        let inputs = [ValueInfo(name: "x", elementType: .float32, shape: [.symbolic("N"), .fixed(k)])]
        return Model(opsetImports: ["": 17], graph: Graph(name: "qdq-gemm", nodes: nodes, initializers: inits, inputs: inputs, outputs: [ValueInfo(name: "y")]))
    }

    @Test func qdqGemmRunsAsQGemm() throws {
        for bias in [true, false] {
            let model = Self.gemmModel(bias: bias)
            let fused = try CompiledModel(model: model, baseDirectory: nil, fuseResiduals: true)
            let plain = try CompiledModel(model: model, baseDirectory: nil, fuseResiduals: true, fuseChains: false)
            var rng = SeededGenerator(seed: 34)
            for batch in [1, 3, 9] {
                let x = Tensor(shape: [batch, 40], scalars: rng.floats(batch * 40).map { $0 * 4 })
                let a = try fused.run(["x": x])["y"]!, b = try plain.run(["x": x])["y"]!
                #expect(a.shape == b.shape)
                let diff = zip(T.floats(a), T.floats(b)).map { abs($0 - $1) }.max() ?? 0
                // One step of the output scale (0.05): rounding ties in the float path may land one step away.
                #expect(diff <= 0.05 * 1.001, "bias \(bias) batch \(batch): max diff \(diff)")
            }
            let kinds = Set(try fused.profile(["x": Tensor(shape: [1, 40], scalars: rng.floats(40))]).map(\.opType))
            #expect(kinds.contains("QGemm") && !kinds.contains("Gemm"), "\(kinds)")
        }
    }
}
