import Testing
@testable import Engine
import TestSupport

@Suite struct KernelMatrixTests {
    /// Every transpose combination, strided leading dimensions, beta 0 and 1, small and pool-split sizes.
    @Test func sgemmMatchesReference() {
        var rng = SeededGenerator(seed: 3)
        EngineThreads.configure(threads: 2)
        for (m, n, k) in [(1, 1, 1), (3, 5, 7), (17, 33, 9), (40, 130, 210), (150, 40, 200)] {
            for transposeA in [false, true] {
                for transposeB in [false, true] {
                    for beta: Float in [0, 1] {
                        let lda = (transposeA ? m : k) + 2, ldb = (transposeB ? k : n) + 1, ldc = n + 3
                        let a = rng.floats((transposeA ? k : m) * lda), b = rng.floats((transposeB ? n : k) * ldb)
                        let c = rng.floats(m * ldc)
                        var fast = c, plain = c
                        sgemm(transposeA: transposeA, transposeB: transposeB, m: m, n: n, k: k, alpha: 0.5, a: a, lda: lda, b: b, ldb: ldb,
                              beta: beta, c: &fast, ldc: ldc)
                        sgemmReference(transposeA: transposeA, transposeB: transposeB, m: m, n: n, k: k, alpha: 0.5, a: a, lda: lda, b: b,
                                       ldb: ldb, beta: beta, c: &plain, ldc: ldc)
                        expectClose(fast, plain, "sgemm \(m)x\(n)x\(k) tA \(transposeA) tB \(transposeB) beta \(beta)")
                    }
                }
            }
        }
    }
}
