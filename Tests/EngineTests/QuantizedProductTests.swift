import Testing
import Tensor
import ONNX
@testable import Engine
import TestSupport

/// MatMulInteger, QLinearMatMul, ConvInteger and QLinearConv on the integer GEMM give exactly what the reference
/// paths give. Convolutions take the GEMM only with constant weights, so the reference run feeds them as inputs;
/// matrix products take it always, so the reference run passes zero points as [1, n] matrices, which only the
/// reference path accepts.
@Suite struct QuantizedProductTests {
    private func bytes<T: FixedWidthInteger & TensorScalar>(_ shape: [Int], _ rng: inout SeededGenerator, _ range: ClosedRange<T>) -> Tensor {
        Tensor(shape: shape, scalars: (0..<shape.reduce(1, *)).map { _ in T.random(in: range, using: &rng) })
    }

    /// Runs `op` once with the weight inputs as initializers and once as graph inputs (zero points named in
    /// `reshapedZeros` turned into [1, n] matrices for the second run); both must agree exactly.
    private func agree(_ op: String, _ inputs: [(String, Tensor)], weights: Set<String>, reshapedZeros: Set<String> = [],
                       attributes: [String: Attribute] = [:], _ label: String) throws {
        let fast = try TestSupport.runNode(op, inputs, attributes: attributes, constants: weights)[0]
        let referenceInputs = inputs.map { name, t in (name, reshapedZeros.contains(name) ? t.reshaped([1, t.count]) : t) }
        let plain = try TestSupport.runNode(op, referenceInputs, attributes: attributes)[0]
        #expect(fast.shape == plain.shape, "\(label): shape")
        #expect(fast.dtype == plain.dtype, "\(label): dtype")
        switch fast.dtype {
        case .int32: #expect(fast.scalars(as: Int32.self) == plain.scalars(as: Int32.self), "\(label)")
        case .uint8: #expect(fast.scalars(as: UInt8.self) == plain.scalars(as: UInt8.self), "\(label)")
        default: #expect(fast.scalars(as: Int8.self) == plain.scalars(as: Int8.self), "\(label)")
        }
    }

    @Test func matMulsMatchTheReference() throws {
        var rng = SeededGenerator(seed: 5)
        for (aShape, bShape) in [([3, 7], [7, 5]), ([2, 4, 33], [33, 18]), ([1, 300], [300, 40]), ([6], [6, 3])] {
            let a: Tensor = bytes(aShape, &rng, UInt8(0)...255)
            let b: Tensor = bytes(bShape, &rng, Int8(-128)...127)
            let n = bShape.last!
            try agree("MatMulInteger", [("a", a), ("b", b), ("az", Tensor(scalar: UInt8(131))), ("bz", Tensor(scalar: Int8(0)))],
                      weights: ["b", "bz"], reshapedZeros: ["az", "bz"], "MatMulInteger \(aShape) x \(bShape)")
            let perColumn: Tensor = bytes([n], &rng, Int8(-9)...9)
            try agree("MatMulInteger", [("a", a), ("b", b), ("az", Tensor(scalar: UInt8(7))), ("bz", perColumn)],
                      weights: ["b", "bz"], reshapedZeros: ["az", "bz"], "MatMulInteger per-column zero points \(aShape) x \(bShape)")
            try agree("QLinearMatMul", [("a", a), ("as", Tensor(scalar: Float(0.02))), ("az", Tensor(scalar: UInt8(120))),
                                        ("b", b), ("bs", Tensor(scalar: Float(0.01))), ("bz", Tensor(scalar: Int8(0))),
                                        ("ys", Tensor(scalar: Float(0.5))), ("yz", Tensor(scalar: UInt8(128)))],
                      weights: ["b", "bs", "bz"], reshapedZeros: ["az", "bz"], "QLinearMatMul \(aShape) x \(bShape)")
        }
    }

    @Test func convolutionsMatchTheReference() throws {
        var rng = SeededGenerator(seed: 9)
        // (channels, out channels, groups, kernel, stride, pad, dilation, size)
        for (c, m, g, kernel, stride, pad, dilation, size) in [(3, 8, 1, 3, 1, 1, 1, 9), (8, 8, 8, 3, 2, 1, 1, 10), (4, 6, 2, 1, 1, 0, 1, 7),
                                                              (2, 5, 1, 5, 2, 2, 1, 11), (3, 4, 1, 3, 1, 2, 2, 8)] {
            let x: Tensor = bytes([2, c, size, size + 1], &rng, UInt8(0)...255)
            let w: Tensor = bytes([m, c / g, kernel, kernel], &rng, Int8(-128)...127)
            let attributes: [String: Attribute] = ["kernel_shape": .ints([Int64(kernel), Int64(kernel)]), "strides": .ints([Int64(stride), Int64(stride)]),
                                                   "pads": .ints([Int64(pad), Int64(pad), Int64(pad), Int64(pad)]),
                                                   "dilations": .ints([Int64(dilation), Int64(dilation)]), "group": .int(Int64(g))]
            let label = "c \(c) m \(m) group \(g) kernel \(kernel) stride \(stride) pad \(pad) dilation \(dilation)"
            try agree("ConvInteger", [("x", x), ("w", w), ("xz", Tensor(scalar: UInt8(100))), ("wz", Tensor(scalar: Int8(3)))],
                      weights: ["w", "wz"], attributes: attributes, "ConvInteger \(label)")
            let bias = Tensor(shape: [m], scalars: (0..<m).map { _ in Int32.random(in: -5000...5000, using: &rng) })
            let perChannel = Tensor(shape: [m], scalars: (0..<m).map { _ in Float.random(in: 0.001...0.01, using: &rng) })
            try agree("QLinearConv", [("x", x), ("xs", Tensor(scalar: Float(0.03))), ("xz", Tensor(scalar: UInt8(100))),
                                      ("w", w), ("ws", perChannel), ("wz", Tensor(shape: [m], scalars: [Int8](repeating: 0, count: m))),
                                      ("ys", Tensor(scalar: Float(0.2))), ("yz", Tensor(scalar: UInt8(128))), ("b", bias)],
                      weights: ["w", "ws", "wz", "b"], attributes: attributes, "QLinearConv \(label)")
        }
    }
}
