import Testing
import CKernelShim
@testable import Engine
import TestSupport


extension SeededGenerator {
    /// `count` floats uniform in [-1, 1).
    mutating func floats(_ count: Int) -> [Float] {
        (0..<count).map { _ in Float.random(in: -1..<1, using: &self) }
    }
}

/// Runs `body` once for each set of C float-kernel bodies this CPU can run: the AVX-512F ones where it has them (named
/// "avx512"), then the AVX2 + FMA ones with AVX-512 switched off ("avx2"), so both are tested on an AVX-512 machine.
func forEachFloatKernelBody(_ body: (String) -> Void) {
    defer { _ = osprey_float_avx512_enable(1) }
    if osprey_float_avx512_enable(1) == 1 { body("avx512") }
    _ = osprey_float_avx512_enable(0)
    body("avx2")
}

/// Expects every element within 1e-4 relative (absolute near zero) of the reference, naming the first mismatch.
func expectClose(_ actual: [Float], _ expected: [Float], _ context: @autoclosure () -> String,
                 sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(actual.count == expected.count, "\(context()): count", sourceLocation: sourceLocation)
    for i in 0..<min(actual.count, expected.count) {
        let a = actual[i], e = expected[i]
        if a == e { continue }
        if !(abs(a - e) <= 1e-4 * max(1, abs(e))) {
            Issue.record("\(context()): element \(i) is \(a), expected \(e)", sourceLocation: sourceLocation)
            return
        }
    }
}

/// Every activation, with parameters that exercise both sides of each kink.
let allActivations: [Activation] = [
    .none, .relu, .leakyRelu(alpha: 0.1), .clip(min: 0, max: 6), .clip(min: -0.5, max: 0.25), .sigmoid,
    .hardSigmoid(alpha: 0.2, beta: 0.5), .hardSwish, .tanh, .silu, .gelu, .geluTanh, .mish,
]

/// `convolutionReference` of `g` on these arrays (`bias` and `residual` optional): the output the fast kernels must match.
func convolutionReferenceOutput(_ g: ConvGeometry, input: [Float], weights: [Float], bias: [Float]?, residual: [Float]?,
                                activation: Activation) -> [Float] {
    var expected = [Float](repeating: 0, count: g.batch * g.outChannels * g.outHeight * g.outWidth)
    input.withUnsafeBufferPointer { i in
        weights.withUnsafeBufferPointer { w in
            (bias ?? []).withUnsafeBufferPointer { b in
                (residual ?? []).withUnsafeBufferPointer { r in
                    expected.withUnsafeMutableBufferPointer {
                        convolutionReference(g, input: i.baseAddress!, weights: w.baseAddress!, bias: bias == nil ? nil : b.baseAddress,
                                             activation: activation, output: $0.baseAddress!, residual: residual == nil ? nil : r.baseAddress)
                    }
                }
            }
        }
    }
    return expected
}
