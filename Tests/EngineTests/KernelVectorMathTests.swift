import Foundation
import Testing
@testable import Engine
import TestSupport

@Suite struct KernelVectorMathTests {
    @Test func vectorExpMatchesFoundation() {
        var worst: Float = 0
        var x: Float = -87
        while x < 88 {
            var lanes = FloatVector()
            for i in 0..<FloatVector.scalarCount { lanes[i] = x + Float(i) * 0.0137 }
            let e = vectorExp(lanes)
            for i in 0..<FloatVector.scalarCount {
                let expected = Foundation.exp(lanes[i])
                worst = max(worst, abs(e[i] - expected) / expected)
            }
            x += 0.25
        }
        #expect(worst < 1e-6, "worst relative error \(worst)")
        #expect(vectorExp(FloatVector(repeating: 1000))[0].isFinite)
        #expect(vectorExp(FloatVector(repeating: -1000))[0] >= 0)
    }

    /// Worst absolute error of `vector` against `scalar` over [-30, 30] and a few far values.
    private func worstError(_ vector: (FloatVector) -> FloatVector, _ scalar: (Float) -> Float) -> Float {
        var worst: Float = 0
        var points: [Float] = stride(from: -30 as Float, to: 30, by: 0.0071).map { $0 }
        points += [-1000, -88, -20.5, 0, 1e-6, -1e-6, 20.5, 88, 1000]
        var i = 0
        while i < points.count {
            var lanes = FloatVector()
            for k in 0..<FloatVector.scalarCount { lanes[k] = points[min(i + k, points.count - 1)] }
            let got = vector(lanes)
            for k in 0..<FloatVector.scalarCount {
                let expected = scalar(lanes[k])
                worst = max(worst, abs(got[k] - expected) / max(1, abs(expected)))
            }
            i += FloatVector.scalarCount
        }
        return worst
    }

    @Test func transcendentalsMatchFoundation() {
        #expect(worstError(vectorErf, { Foundation.erf($0) }) < 1e-6)
        #expect(worstError(vectorTanh, { Foundation.tanh($0) }) < 1e-6)
        #expect(worstError(vectorSigmoid, { 1 / (1 + Foundation.exp(-$0)) }) < 1e-6)
        #expect(worstError(vectorMish, { Activation.mish($0) }) < 1e-6)
        for activation in [Activation.silu, .gelu, .geluTanh] {
            #expect(worstError({ activation.vector($0) }, { activation($0) }) < 1e-6, "\(activation)")
        }
    }

    @Test func softmaxMatchesReference() {
        var rng = SeededGenerator(seed: 12)
        for (rows, columns) in [(1, 1), (3, 5), (2, 16), (4, 1000), (2, 37)] {
            let input = rng.floats(rows * columns).map { $0 * 20 }
            var fast = input, plain = input
            softmaxRows(&fast, rows: rows, columns: columns)
            softmaxRowsReference(&plain, rows: rows, columns: columns)
            expectClose(fast, plain, "softmax \(rows)x\(columns)")
        }
    }
}
