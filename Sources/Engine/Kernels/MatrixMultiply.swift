import COpenBLAS

/// C = alpha * op(A) * op(B) + beta * C for row-major matrices, through OpenBLAS.
/// op(A) is M x K, op(B) is K x N, C is M x N; lda/ldb/ldc are row strides in elements.
public func sgemm(transposeA: Bool, transposeB: Bool, m: Int, n: Int, k: Int, alpha: Float,
                  a: UnsafePointer<Float>, lda: Int, b: UnsafePointer<Float>, ldb: Int,
                  beta: Float, c: UnsafeMutablePointer<Float>, ldc: Int) {
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
