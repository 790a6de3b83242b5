import Foundation
import CKernelShim
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
        for (rows, columns) in [(1, 1), (3, 5), (2, 16), (4, 1000), (2, 37), (3, 8), (2, 24), (128, 128), (2, 32), (3, 47)] {
            let input = rng.floats(rows * columns).map { $0 * 20 }
            var plain = input
            softmaxRowsReference(&plain, rows: rows, columns: columns)
            forEachFloatKernelBody { body in
                var fast = input
                softmaxRows(&fast, rows: rows, columns: columns)
                expectClose(fast, plain, "\(body) softmax \(rows)x\(columns)")
                var copied = [Float](repeating: .nan, count: input.count)
                softmaxRows(&copied, rows: rows, columns: columns, from: input)
                expectClose(copied, plain, "\(body) softmax from a source \(rows)x\(columns)")
            }
            var portable = input
            softmaxRowsPortable(&portable, rows: rows, columns: columns, nanFill: nil)
            expectClose(portable, plain, "portable softmax \(rows)x\(columns)")
        }
    }

    /// Rows holding a NaN or +inf, or only -inf, come out NaN, or the fill value with nanFill, in both bodies;
    /// a row with some -inf (a masked position) is an ordinary row.
    @Test func softmaxBrokenRowsBecomeNaNOrTheFill() {
      // 19 and 45 columns: vector parts of 16 and 32 (AVX2's 8 and 16) lanes and tails for both bodies.
      for columns in [19, 45] {
        var input = [Float](repeating: 0.5, count: 5 * columns)
        input[3] = .nan                                          // row 0: NaN in the vector part
        input[columns + columns - 1] = .infinity                 // row 1: +inf in the tail
        for j in 0..<columns { input[2 * columns + j] = -.infinity }  // row 2: all -inf
        input[3 * columns + 2] = -.infinity                      // row 3: one masked position
        input[4 * columns + columns - 2] = .nan                  // row 4: NaN in the tail
        for fill: Float? in [nil, 0] {
          forEachFloatKernelBody { body in
            var fast = input, portable = input
            softmaxRows(&fast, rows: 5, columns: columns, nanFill: fill)
            softmaxRowsPortable(&portable, rows: 5, columns: columns, nanFill: fill)
            for (name, out) in [("fast " + body, fast), ("portable", portable)] {
                for r in [0, 1, 2, 4] {
                    let row = out[(r * columns)..<((r + 1) * columns)]
                    #expect(row.allSatisfy { fill == nil ? $0.isNaN : $0 == fill }, "\(name) row \(r) fill \(String(describing: fill))")
                }
                #expect(out[3 * columns + 2] < 1e-30 && abs(out[(3 * columns)..<(4 * columns)].reduce(0, +) - 1) < 1e-5, "\(name) masked row")
            }
          }
        }
      }
    }

    /// The C GELU (elementwise and in the packed product's registers) against the scalar erf GELU.
    @Test func cGeluMatchesTheScalarGelu() {
        guard osprey_float_activations_fast() == 1 else { return }
        var points: [Float] = stride(from: -12 as Float, to: 12, by: 0.0037).map { $0 }
        points += [-1000, -88, 0, 1e-6, -1e-6, 88, 1000]
        forEachFloatKernelBody { body in
            // The odd count leaves a tail for both bodies.
            var got = points
            osprey_gelu_f32(&got, got.count)
            var worst: Float = 0
            for (x, y) in zip(points, got) { worst = max(worst, abs(y - Activation.gelu(x)) / max(1, abs(Activation.gelu(x)))) }
            #expect(worst < 1e-6, "\(body) worst error \(worst)")
        }
    }
}
