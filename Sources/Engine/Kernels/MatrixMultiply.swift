import COpenBLAS

/// C = alpha * op(A) * op(B) + beta * C for row-major matrices, through OpenBLAS.
/// op(A) is M x K, op(B) is K x N, C is M x N; lda/ldb/ldc are row strides in elements.
///
/// OpenBLAS runs single-threaded (see `EngineThreads`); large products are split into one block of C per compute
/// thread, along N when the panel of A each thread re-packs is the smaller operand, else along M. OpenBLAS's own
/// threading hardly scales on the narrow products convolutions make (N = 49..196), this split does.
public func sgemm(transposeA: Bool, transposeB: Bool, m: Int, n: Int, k: Int, alpha: Float,
                  a: UnsafePointer<Float>, lda: Int, b: UnsafePointer<Float>, ldb: Int,
                  beta: Float, c: UnsafeMutablePointer<Float>, ldc: Int) {
    let threads = EngineThreads.threads
    // Below about a million multiply-adds the wake-up costs more than the second core saves.
    guard threads > 1, m * n * k >= 1 << 20, m >= 32 || n >= 32 else {
        blasSgemm(transposeA, transposeB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
        return
    }
    let alongN = n >= m || m < 32
    let extent = alongN ? n : m
    let blocks = min(threads, max(1, extent / 16))
    parallelFor(blocks) { block in
        // Block edges on multiples of 16 keep the BLAS micro-kernels on full tiles.
        let start = (extent * block / blocks) & ~15, end = block == blocks - 1 ? extent : (extent * (block + 1) / blocks) & ~15
        guard start < end else { return }
        if alongN {
            blasSgemm(transposeA, transposeB, m, end - start, k, alpha, a, lda, transposeB ? b + start * ldb : b + start, ldb,
                      beta, c + start, ldc)
        } else {
            blasSgemm(transposeA, transposeB, end - start, n, k, alpha, transposeA ? a + start : a + start * lda, lda, b, ldb,
                      beta, c + start * ldc, ldc)
        }
    }
}

/// One single-threaded OpenBLAS call.
@inline(__always)
private func blasSgemm(_ transposeA: Bool, _ transposeB: Bool, _ m: Int, _ n: Int, _ k: Int, _ alpha: Float,
                       _ a: UnsafePointer<Float>, _ lda: Int, _ b: UnsafePointer<Float>, _ ldb: Int,
                       _ beta: Float, _ c: UnsafeMutablePointer<Float>, _ ldc: Int) {
    cblas_sgemm(CblasRowMajor, transposeA ? CblasTrans : CblasNoTrans, transposeB ? CblasTrans : CblasNoTrans,
                Int32(m), Int32(n), Int32(k), alpha, a, Int32(lda), b, Int32(ldb), beta, c, Int32(ldc))
}

/// Plain triple loop with the same contract as `sgemm`: the reference twin for tests.
public func sgemmReference(transposeA: Bool, transposeB: Bool, m: Int, n: Int, k: Int, alpha: Float,
                           a: UnsafePointer<Float>, lda: Int, b: UnsafePointer<Float>, ldb: Int,
                           beta: Float, c: UnsafeMutablePointer<Float>, ldc: Int) {
    for i in 0..<m {
        for j in 0..<n {
            var sum: Float = 0
            for p in 0..<k {
                let av = transposeA ? a[p * lda + i] : a[i * lda + p]
                let bv = transposeB ? b[j * ldb + p] : b[p * ldb + j]
                sum += av * bv
            }
            c[i * ldc + j] = alpha * sum + (beta == 0 ? 0 : beta * c[i * ldc + j])
        }
    }
}
