import Testing
import Tensor
import CKernelShim
import ONNX
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

    /// The packed constant-B product against its triple-loop twin: short last bands and strips, strided A, every
    /// epilogue combination, long depths, one and two threads (band and strip splits; an odd strip count split by pairs;
    /// 200 x 1100 of A, too large for a 1 MB L2 beside a column block, split by bands although B is wider).
    @Test func packedMatmulMatchesReference() {
        var rng = SeededGenerator(seed: 5)
        defer { EngineThreads.configure(threads: 2) }
        for threads in [1, 2] {
            EngineThreads.configure(threads: threads)
            for (rows, columns, depth) in [(1, 1, 1), (7, 20, 3), (13, 48, 33), (49, 768, 40), (200, 96, 120), (6, 16, 4096),
                                           (9, 17, 2), (10, 33, 17), (11, 64, 5), (128, 32, 9), (20, 48, 1000), (13, 32, 600), (5, 80, 3), (8, 112, 2), (13, 80, 3100),
                                           (30, 200, 200), (200, 208, 1100)] {
                for (withBias, withResidual, activation) in [(false, false, Activation.none), (true, false, .gelu), (true, true, .relu),
                                                            (false, true, .none)] {
                    let lda = depth + 3
                    let a = rng.floats(rows * lda), b = rng.floats(depth * columns)
                    let bias = withBias ? rng.floats(columns) : nil, residual = withResidual ? rng.floats(rows * columns) : nil
                    let packed = PackedMatrixB(b, depth: depth, columns: columns)
                    var plain = [Float](repeating: .nan, count: rows * columns)
                    packedMatmulReference(a, lda: lda, rows: rows, b: b, depth: depth, columns: columns, bias: bias, residual: residual,
                                          activation: activation, out: &plain)
                    forEachFloatKernelBody { body in
                        var fast = [Float](repeating: .nan, count: rows * columns)
                        packedMatmul(a, lda: lda, rows: rows, packed, bias: bias, residual: residual, activation: activation, out: &fast)
                        expectClose(fast, plain, "\(body) packed \(rows)x\(columns)x\(depth) bias \(withBias) residual \(withResidual) \(activation) threads \(threads)")
                    }
                }
            }
        }
    }

    /// The in-place small product (attention heads) against sgemm's triple-loop twin: every short band (1-5 rows),
    /// narrow last strips, strided operands and C, odd and zero depths; columns of C past n stay untouched.
    @Test func smallMatmulMatchesReference() {
        var rng = SeededGenerator(seed: 11)
        for (m, n, k) in [(1, 1, 1), (2, 16, 3), (3, 17, 8), (4, 5, 31), (5, 40, 2), (6, 32, 64), (13, 128, 32), (128, 32, 128),
                          (7, 48, 0), (20, 15, 257), (5, 64, 3), (9, 80, 1), (4, 100, 7)] {
            let lda = k + 3, ldb = n + 5, ldc = n + 2
            let a = rng.floats(m * lda), b = rng.floats(max(1, k) * ldb)
            let c = rng.floats(m * ldc)
            var plain = c
            sgemmReference(transposeA: false, transposeB: false, m: m, n: n, k: k, alpha: 1, a: a, lda: lda, b: b, ldb: ldb,
                           beta: 0, c: &plain, ldc: ldc)
            forEachFloatKernelBody { body in
                var fast = c
                smallMatmul(m: m, n: n, k: k, a: a, lda: lda, b: b, ldb: ldb, c: &fast, ldc: ldc)
                expectClose(fast, plain, "\(body) small \(m)x\(n)x\(k)")
            }
        }
    }

    /// Batched per-head MatMul (attention's Q K^T and P V shapes, which run through smallMatmul) at the tests' two
    /// threads against each head's triple-loop product: the heads the threads share come out as the serial loop's.
    @Test func batchedHeadProductsMatchPerHeadReference() throws {
        var rng = SeededGenerator(seed: 13)
        let ctx = OpContext(node: Node(opType: "MatMul", inputs: ["a", "b"], outputs: ["y"]), opset: 17, constants: [:], activation: .none)
        for (heads, m, n, k) in [(12, 197, 197, 64), (12, 197, 64, 197), (3, 37, 21, 9), (5, 130, 130, 70)] {
            let a = rng.floats(heads * m * k), b = rng.floats(heads * k * n)
            var expected = [Float](repeating: 0, count: heads * m * n)
            for h in 0..<heads {
                a.withUnsafeBufferPointer { ap in b.withUnsafeBufferPointer { bp in expected.withUnsafeMutableBufferPointer { cp in
                    sgemmReference(transposeA: false, transposeB: false, m: m, n: n, k: k, alpha: 1, a: ap.baseAddress! + h * m * k, lda: k,
                                   b: bp.baseAddress! + h * k * n, ldb: n, beta: 0, c: cp.baseAddress! + h * m * n, ldc: n)
                } } }
            }
            let y = try matmul(Tensor(shape: [1, heads, m, k], scalars: a), Tensor(shape: [1, heads, k, n], scalars: b), ctx)
            #expect(y.shape == [1, heads, m, n])
            expectClose(y.scalars(as: Float.self), expected, "\(heads) heads \(m)x\(n)x\(k)")
        }
    }

    /// The 16-column strip kernel itself, each body against a plain loop: every row count 1-6, depths 1-9 (each
    /// remainder of the depth chains) and long, B rows packed (16 apart) or strided in place, with and without a start
    /// row, GELU (erf 1, tanh form 2) in registers (where the CPU runs a vector body), tile rows past `rows` left untouched.
    @Test func stripKernelMatchesAPlainLoop() {
        var rng = SeededGenerator(seed: 13)
        for rows in 1...6 {
            for depth in [1, 2, 3, 4, 5, 7, 9, 64, 131] {
                for ldb in [16, 37] {
                    for withStart in [false, true] {
                        for gelu: Int32 in [0, 1, 2] where gelu == 0 || hasFastLogisticKernel {
                            let lda = depth + 2, ldt = 21
                            let a = rng.floats(rows * lda), b = rng.floats(depth * ldb), start = rng.floats(16)
                            var expected = [Float](repeating: -7, count: 6 * ldt)
                            for r in 0..<rows {
                                for j in 0..<16 {
                                    var sum: Float = withStart ? start[j] : 0
                                    for p in 0..<depth { sum += a[r * lda + p] * b[p * ldb + j] }
                                    expected[r * ldt + j] = gelu == 1 ? Activation.gelu(sum) : gelu == 2 ? Activation.geluTanh(sum) : sum
                                }
                            }
                            forEachFloatKernelBody { body in
                                var tile = [Float](repeating: -7, count: 6 * ldt)
                                start.withUnsafeBufferPointer { s in
                                    osprey_sgemm_strip(rows, depth, a, lda, b, ldb, withStart ? s.baseAddress : nil, &tile, ldt, gelu)
                                }
                                expectClose(tile, expected, "\(body) strip rows \(rows) depth \(depth) ldb \(ldb) start \(withStart) gelu \(gelu)")
                            }
                        }
                    }
                }
            }
        }
    }

    /// The two-strip kernel, each body against a plain loop: row counts 1-6, depths 1-9 and long, two packed strips
    /// (`depth * 16` apart) or 32 columns of B in place (16 apart, strided rows), with and without start and GELU (either form).
    @Test func stripPairKernelMatchesAPlainLoop() {
        var rng = SeededGenerator(seed: 17)
        for rows in 1...6 {
            for depth in [1, 2, 3, 4, 5, 7, 64, 131] {
                for packed in [true, false] {
                    for (withStart, gelu) in [(false, 0), (true, 0), (true, 1), (true, 2)] as [(Bool, Int32)] where gelu == 0 || hasFastLogisticKernel {
                        let lda = depth + 1, ldt = 35, ldb = packed ? 16 : 41, second = packed ? depth * 16 : 16
                        let a = rng.floats(rows * lda), b = rng.floats(2 * depth * max(16, ldb)), start = rng.floats(32)
                        var expected = [Float](repeating: -7, count: 6 * ldt)
                        for r in 0..<rows {
                            for j in 0..<32 {
                                var sum: Float = withStart ? start[j] : 0
                                for p in 0..<depth { sum += a[r * lda + p] * b[(j < 16 ? 0 : second) + p * ldb + j % 16] }
                                expected[r * ldt + j] = gelu == 1 ? Activation.gelu(sum) : gelu == 2 ? Activation.geluTanh(sum) : sum
                            }
                        }
                        forEachFloatKernelBody { body in
                            var tile = [Float](repeating: -7, count: 6 * ldt)
                            start.withUnsafeBufferPointer { s in
                                osprey_sgemm_strip_pair(rows, depth, a, lda, b, ldb, second, withStart ? s.baseAddress : nil, &tile, ldt, gelu)
                            }
                            expectClose(tile, expected, "\(body) pair rows \(rows) depth \(depth) packed \(packed) start \(withStart) gelu \(gelu)")
                        }
                    }
                }
            }
        }
    }

    /// Every permutation of rank 2-4 shapes (with size-1 axes) that reads as batched matrices: the tiled transpose (the
    /// AVX tiles where the CPU has them) and its portable twin equal the generic strided copy; NCHW <-> NHWC are recognised.
    @Test func blockedTransposeMatchesTheStridedCopy() {
        var rng = SeededGenerator(seed: 7)
        EngineThreads.configure(threads: 2)
        func permutations(_ n: Int) -> [[Int]] {
            n == 1 ? [[0]] : permutations(n - 1).flatMap { p in (0...p.count).map { i in var q = p; q.insert(n - 1, at: i); return q } }
        }
        var recognised = 0
        for shape in [[37, 70], [1, 96, 9, 11], [2, 40, 3, 33], [3, 1, 5, 64], [2, 5, 7], [1, 1, 50], [2, 16, 24]] {
            let x = Tensor(shape: shape, scalars: rng.floats(shape.reduce(1, *)))
            for perm in permutations(shape.count) {
                guard let m = transposeAsMatrices(shape: shape, perm: perm) else { continue }
                recognised += 1
                let expected = stridedCopy(x, shape: perm.map { shape[$0] }, strides: perm.map { x.strides[$0] }, offset: 0)
                var fast = [UInt32](repeating: 0, count: x.count)
                x.withUnsafeBytes { src in
                    blockedTranspose(src.baseAddress!.assumingMemoryBound(to: UInt32.self), &fast, outer: m.outer, rows: m.rows, columns: m.columns)
                }
                #expect(fast.map { Float(bitPattern: $0) } == expected.scalars(as: Float.self), "\(shape) perm \(perm)")
                var portable = [UInt32](repeating: 0, count: x.count)
                x.withUnsafeBytes { src in
                    blockedTransposePortable(src.baseAddress!.assumingMemoryBound(to: UInt32.self), &portable, outer: m.outer, rows: m.rows,
                                             columns: m.columns)
                }
                #expect(portable == fast, "portable \(shape) perm \(perm)")
            }
        }
        #expect(recognised > 10)
        let toChannelsLast = transposeAsMatrices(shape: [1, 96, 56, 56], perm: [0, 2, 3, 1])
        #expect(toChannelsLast.map { [$0.outer, $0.rows, $0.columns] } == [1, 96, 3136])
        let toPlanes = transposeAsMatrices(shape: [2, 56, 56, 96], perm: [0, 3, 1, 2])
        #expect(toPlanes.map { [$0.outer, $0.rows, $0.columns] } == [2, 3136, 96])
    }
}
