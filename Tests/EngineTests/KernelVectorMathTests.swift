import Foundation
import Testing
@testable import Engine

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
