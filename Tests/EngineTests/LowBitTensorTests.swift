import Foundation
import Testing
import Tensor
import ONNX
@testable import Engine

/// int4 / uint4 / float8 tensors through the data-movement operators, and a blocked int4 DequantizeLinear of constant
/// weights folded away at load.
@Suite struct LowBitTensorTests {
    private typealias T = TestSupport

    /// `bytes` (one per element) retagged as `dtype`.
    static func tensor(_ dtype: DType, _ shape: [Int], _ bytes: [UInt8]) -> Tensor {
        let u = Tensor(shape: shape, scalars: bytes)
        return Tensor(dtype: dtype, shape: shape, storage: u.storage)
    }

    static func bytes(_ t: Tensor) -> [UInt8] { t.withUnsafeBytes { Array($0) } }

    /// Each operator moves the one-byte elements exactly as it moves uint8 ones and keeps the dtype.
    @Test(arguments: [DType.int4, .uint4, .float8e4m3fn, .float8e5m2fnuz])
    func dataMovementCarriesTheType(_ dtype: DType) throws {
        let values: [UInt8] = dtype == .int4 ? [0xF8, 0xFF, 0, 1, 7, 0xFA] : [0, 1, 7, 8, 15, 12]
        let cases: [(String, [(String, Tensor)], [String: Attribute], Set<String>)] = [
            ("Transpose", [], ["perm": .ints([1, 0])], []),
            ("Reshape", [("s", T.i([1], [6]))], [:], ["s"]),
            ("Identity", [], [:], []),
            ("Flatten", [], ["axis": .int(0)], []),
            ("Unsqueeze", [("a", T.i([1], [0]))], [:], ["a"]),
            ("Gather", [("i", T.i([2], [1, 0]))], ["axis": .int(0)], ["i"]),
            ("Slice", [("st", T.i([1], [1])), ("en", T.i([1], [3])), ("ax", T.i([1], [1]))], [:], ["st", "en", "ax"]),
            ("Concat", [("x2", Self.tensor(.uint8, [2, 3], values))], ["axis": .int(0)], []),
            ("Expand", [("sh", T.i([3], [2, 2, 3]))], [:], ["sh"]),
            ("Tile", [("r", T.i([2], [1, 2]))], [:], ["r"]),
        ]
        for (op, extra, attributes, constants) in cases {
            func run(_ type: DType) throws -> Tensor {
                let retyped = extra.map { name, t in name == "x2" ? (name, Self.tensor(type, t.shape, Self.bytes(t))) : (name, t) }
                return try T.runNode(op, [("x", Self.tensor(type, [2, 3], values))] + retyped, attributes: attributes,
                                     opset: 21, constants: constants)[0]
            }
            let expected = try run(.uint8), actual = try run(dtype)
            #expect(actual.dtype == dtype, "\(op)")
            #expect(actual.shape == expected.shape && Self.bytes(actual) == Self.bytes(expected), "\(op) on \(dtype)")
        }
    }

    /// The float32 DequantizeLinear (per channel and blocked, 4- and 8-bit) equals its double-precision reference.
    @Test(arguments: [DType.int4, .uint4, .int8, .uint8]) func dequantizeFastMatchesReference(_ dtype: DType) throws {
        let ctx = OpContext(node: Node(opType: "DequantizeLinear", inputs: ["x", "s", "z"], outputs: ["y"]), opset: 21, constants: [:], activation: .none)
        let range = dtype == .int4 ? -8...7 : dtype == .uint4 ? 0...15 : dtype == .int8 ? -128...127 : 0...255
        var rng = SystemRandomNumberGenerator()
        let x = try castTensor(Tensor(shape: [3, 70, 5], scalars: (0..<1050).map { _ in Double(Int.random(in: range, using: &rng)) }), to: dtype, ctx)
        for (axis, blockSize) in [(1, 32), (1, 7), (0, 2), (2, 5), (1, 0)] {
            var shape = x.shape
            shape[axis] = blockSize == 0 ? shape[axis] : (shape[axis] + blockSize - 1) / blockSize
            if blockSize == 0 { shape = [shape[axis]] }
            let n = shape.reduce(1, *)
            let scale = Tensor(shape: shape, scalars: (0..<n).map { _ in Float.random(in: 1e-3...2, using: &rng) })
            let zero = try castTensor(Tensor(shape: shape, scalars: (0..<n).map { _ in Double(Int.random(in: range, using: &rng)) }), to: dtype, ctx)
            let fast = try #require(try dequantizeLinearFast(ctx, x, scale: scale, zeroPoint: zero, axis: axis, blockSize: blockSize))
            let reference = try dequantizeLinearReference(ctx, x, scale: scale, zeroPoint: zero, axis: axis, blockSize: blockSize)
            #expect(fast.scalars(as: Float.self) == reference.scalars(as: Float.self), "axis \(axis), blocks of \(blockSize)")
        }
    }

    /// DequantizeLinear(int4 constant, block_size=2, axis=0) -> MatMul: folded into float weights at load (no
    /// DequantizeLinear step runs), with the values of the per-block reference.
    @Test func blockedInt4WeightsFoldAtLoad() throws {
        // W: 4 x 2 int4, blocks of 2 rows along axis 0, so scale and zero point are 2 x 2.
        let q = Self.tensor(.int4, [4, 2], [1, 0xFF, 2, 0xFE, 7, 0xF8, 0, 3])
        let scale = T.f([2, 2], [0.5, 0.25, 2, 1])
        let zero = Self.tensor(.int4, [2, 2], [1, 0, 0xFF, 2])
        let node = Node(name: "dq", opType: "DequantizeLinear", inputs: ["q", "s", "z"], outputs: ["w"],
                        attributes: ["axis": .int(0), "block_size": .int(2)])
        let matmul = Node(name: "mm", opType: "MatMul", inputs: ["x", "w"], outputs: ["y"])
        let graph = Graph(name: "g", nodes: [node, matmul], initializers: [("q", q), ("s", scale), ("z", zero)],
                          inputs: [ValueInfo(name: "x", elementType: .float32, shape: [.fixed(1), .fixed(4)])],
                          outputs: [ValueInfo(name: "y")])
        let model = try CompiledModel(model: Model(opsetImports: ["": 21], graph: graph))
        let x = T.f([1, 4], [1, 2, 3, 4])
        let y = T.floats(try model.run(["x": x])["y"]!)
        // Column 0: (1-1)*.5, (2-1)*.5, (7+1)*2, (0+1)*2; column 1: (-1-0)*.25, (-2-0)*.25, (-8-2)*1, (3-2)*1.
        let w: [[Float]] = [[0, -0.25], [0.5, -0.5], [16, -10], [2, 1]]
        let expected = (0..<2).map { c in (0..<4).reduce(Float(0)) { $0 + Float($1 + 1) * w[$1][c] } }
        #expect(T.close(y, expected), "\(y) vs \(expected)")
        let ops = try model.profile(["x": x]).map(\.opType)
        #expect(!ops.contains("DequantizeLinear"), "\(ops)")
    }
}
