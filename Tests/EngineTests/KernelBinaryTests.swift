import Testing
import Tensor
@testable import Engine
import TestSupport

/// The specialised broadcasting kernel against the generic closure path (`broadcastBinary`), its reference twin.
@Suite struct KernelBinaryTests {
    /// Shape pairs of every class: same shape, scalar either side, per-channel NCHW, trailing axis, both broadcast,
    /// rank mismatch, and sizes large enough to be split across threads.
    static let shapePairs: [([Int], [Int])] = [
        ([2, 3, 5, 7], [2, 3, 5, 7]), ([2, 3, 5, 7], []), ([1], [4, 3, 17]), ([2, 16, 9, 11], [1, 16, 1, 1]), ([16, 1, 1], [2, 16, 9, 11]),
        ([3, 40, 120], [120]), ([3, 40, 1], [3, 1, 33]), ([5, 1, 7], [1, 6, 1]), ([2, 64, 48, 40], [1, 64, 1, 1]),
        ([2, 64, 48, 40], [2, 64, 48, 40]), ([300_000], [1]), ([8, 100, 100], [100]), ([1, 1, 1], [1]),
    ]

    @Test(arguments: [1, 2])
    func everyShapeClassMatchesTheGenericPath(threads: Int) throws {
        EngineThreads.configure(threads: threads)
        defer { EngineThreads.configure(threads: 2) }
        var rng = SeededGenerator(seed: 21)
        let ctx = OpContext(node: .init(opType: "Add", inputs: [], outputs: []), opset: 17, constants: [:], activation: .none)
        let ops: [(FloatBinaryOperation, (Float, Float) -> Float)] = [(.add, +), (.subtract, -), (.multiply, *), (.divide, /)]
        for (aShape, bShape) in Self.shapePairs {
            let a = Tensor(shape: aShape, scalars: rng.floats(aShape.reduce(1, *)))
            let b = Tensor(shape: bShape, scalars: rng.floats(bShape.reduce(1, *)).map { $0 + 2 })
            for (op, scalar) in ops {
                let expected = try broadcastBinary(a, b, ctx, scalar)
                var inputs = KernelInputs(values: [a, b])
                let got = try #require(try floatArithmetic(op, &inputs, ctx))
                #expect(got.shape == expected.shape, "\(aShape) \(op) \(bShape)")
                #expect(got.scalars(as: Float.self) == expected.scalars(as: Float.self), "\(aShape) \(op) \(bShape)")
            }
        }
    }

    @Test func writesIntoTheOperandWithTheOutputShapeWithoutTouchingTheOther() throws {
        let ctx = OpContext(node: .init(opType: "Sub", inputs: [], outputs: []), opset: 17, constants: [:], activation: .none)
        let a = Tensor(shape: [3], scalars: [1, 2, 3] as [Float]), b = Tensor(shape: [2, 3], scalars: [10, 20, 30, 40, 50, 60] as [Float])
        var inputs = KernelInputs(values: [a, b])
        let got = try #require(try floatArithmetic(.subtract, &inputs, ctx))
        #expect(got.scalars(as: Float.self) == [-9, -18, -27, -39, -48, -57])
        #expect(a.scalars(as: Float.self) == [1, 2, 3] && b.scalars(as: Float.self) == [10, 20, 30, 40, 50, 60])
    }
}

/// The vectorised Softmax against the scalar one, its reference twin.
@Suite struct SoftmaxFastPathTests {
    @Test(arguments: [1, 2])
    func lastAndInnerAxesMatchTheScalarPath(threads: Int) {
        EngineThreads.configure(threads: threads)
        defer { EngineThreads.configure(threads: 2) }
        var rng = SeededGenerator(seed: 51)
        for (outer, dim, inner) in [(1, 16, 8400), (3, 5, 37), (2, 1, 16), (4, 97, 1), (40, 40, 1), (1, 7, 3), (2, 16, 33)] {
            let x = Tensor(shape: [outer, dim, inner], scalars: rng.floats(outer * dim * inner).map { $0 * 12 })
            let fast = softmaxFast(x, outer: outer, dim: dim, inner: inner)
            let plain = softmax(x, outer: outer, dim: dim, inner: inner, log: false)
            #expect(TestSupport.close(fast.scalars(as: Float.self), plain.scalars(as: Float.self)), "\(outer) \(dim) \(inner)")
        }
    }
}
