import CKernelShim

/// c[i * ldc + j] = sum_p a[i * lda + p] * b[p * ldb + j] for i < m, j < n: one small row-major product (an attention
/// head's Q K^T or P V) with both operands read in place by the 6x16 strip kernel.
///
/// OpenBLAS packs both operands and zeroes C on every call; a head's operands (128 x 32 and 32 x 128 in MiniLM) fit
/// in L1 as they are, so the packing was a third of its time. Only a last strip narrower than 16 columns is copied
/// (into zero-padded scratch), so no read passes the end of B's rows.
func smallMatmul(m: Int, n: Int, k: Int, a: UnsafePointer<Float>, lda: Int, b: UnsafePointer<Float>, ldb: Int,
                 c: UnsafeMutablePointer<Float>, ldc: Int) {
    guard m > 0, n > 0 else { return }
    guard k > 0 else {
        for i in 0..<m { (c + i * ldc).initialize(repeating: 0, count: n) }
        return
    }
    let whole = n / 16, rest = n - whole * 16
    let bands = (m + 5) / 6
    for band in 0..<bands {
        let (row, count) = bandRows(band, rows: m)
        // Strips in pairs (one AVX-512 call reads each A value once for both), an odd last one alone.
        for s in stride(from: 0, to: whole - 1, by: 2) {
            osprey_sgemm_strip_pair(count, k, a + row * lda, lda, b + s * 16, ldb, 16, nil, c + row * ldc + s * 16, ldc, 0)
        }
        if whole % 2 == 1 {
            let s = whole - 1
            osprey_sgemm_strip(count, k, a + row * lda, lda, b + s * 16, ldb, nil, c + row * ldc + s * 16, ldc, 0)
        }
    }
    guard rest > 0 else { return }
    // The narrow last strip: its columns copied into 16-wide rows, the product into a 6 x 16 tile, then `rest` lanes out.
    withThreadScratch(k * 16 + 96, slot: .tile) { scratch in
        let strip = scratch, tile = scratch + k * 16
        for p in 0..<k {
            let line = strip + p * 16
            line.update(from: b + p * ldb + whole * 16, count: rest)
            (line + rest).update(repeating: 0, count: 16 - rest)
        }
        for band in 0..<bands {
            let (row, count) = bandRows(band, rows: m)
            osprey_sgemm_strip(count, k, a + row * lda, lda, strip, 16, nil, tile, 16, 0)
            for r in 0..<count { (c + (row + r) * ldc + whole * 16).update(from: tile + r * 16, count: rest) }
        }
    }
}
