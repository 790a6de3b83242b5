// The vector GEMM bodies of the convolutions (quantized_conv.c), included once per instruction set. The includer
// defines QBODY(name), QBODY_TARGET, QBODY_DOT4(acc, u, s) (acc plus the four u8 x s8 products per int32 lane, as in
// quantized_gemv_body.h) and QBODY_DOT2(acc, a, b) (acc plus the two int16 x int16 products per lane: vpmaddwd + add,
// or VNNI's vpdpwssd).

// One 6 x 16 register tile over all k steps; each step reads 4 bytes per row of A, broadcast to every lane: a quad
// of int8 (`wide` 0: the u8 panel's quads times the s8 quad) or a pair of int16 (`wide` 1: the panel's 16 columns x
// 2 int16), added into the accumulators.
__attribute__((target(QBODY_TARGET), always_inline))
static inline void QBODY(gemm_tile)(int wide, int rows, int steps, const uint8_t *a, size_t lda, const uint8_t *panel, const int32_t *bias,
                                    __m256i acc[TILE_ROWS][2]) {
    const __m256i ones = _mm256_set1_epi16(1);
    (void)ones;
    // The sums start from the rows' bias (the epilogue then adds none).
    for (int r = 0; r < rows; r++) acc[r][0] = acc[r][1] = bias ? _mm256_set1_epi32(bias[r]) : _mm256_setzero_si256();
    const uint8_t *b = panel;
    for (int q = 0; q < steps; q++, b += 64) {
        __m256i b0 = _mm256_loadu_si256((const __m256i *)b), b1 = _mm256_loadu_si256((const __m256i *)(b + 32));
        for (int r = 0; r < rows; r++) {
            int32_t four;
            memcpy(&four, a + (size_t)r * lda + 4 * q, sizeof four);
            __m256i x = _mm256_set1_epi32(four);
            acc[r][0] = wide ? QBODY_DOT2(acc[r][0], x, b0) : QBODY_DOT4(acc[r][0], b0, x);
            acc[r][1] = wide ? QBODY_DOT2(acc[r][1], x, b1) : QBODY_DOT4(acc[r][1], b1, x);
        }
    }
}

/// One 16-column panel (64 bytes per k step: a u8 quad or an int16 pair per column; `cols` valid from column c0)
/// times every row tile of A (`lda` bytes per row), each tile stored through the epilogue.
__attribute__((target(QBODY_TARGET)))
static void QBODY(panel)(int wide, int m, int steps, const uint8_t *a, size_t lda, const uint8_t *panel, int c0, int cols,
                         const osprey_qepilogue *ep, void *out, int ldo) {
    const osprey_qepilogue e = tile_epilogue(ep);
    int bytes = cols == PANEL && requantizes_rows(ep);
    for (int i = 0; i < m; i += TILE_ROWS) {
        const row_tile t = row_tile_at(ep, a, lda, m, i, TILE_ROWS);
        __m256i acc[TILE_ROWS][2];
        // Constant arguments specialise the inlined tile (operand kind, unrolled full-tile row loop).
        // Every row count its own body: a run-time count would keep the accumulators in memory.
#define TILE_BODIES(W)                                                                          \
        switch (t.rows) {                                                                       \
        case 6: QBODY(gemm_tile)(W, 6, steps, t.a, lda, panel, t.bias, acc); break;             \
        case 5: QBODY(gemm_tile)(W, 5, steps, t.a, lda, panel, t.bias, acc); break;             \
        case 4: QBODY(gemm_tile)(W, 4, steps, t.a, lda, panel, t.bias, acc); break;             \
        case 3: QBODY(gemm_tile)(W, 3, steps, t.a, lda, panel, t.bias, acc); break;             \
        case 2: QBODY(gemm_tile)(W, 2, steps, t.a, lda, panel, t.bias, acc); break;             \
        default: QBODY(gemm_tile)(W, 1, steps, t.a, lda, panel, t.bias, acc); break;            \
        }
        if (wide) { TILE_BODIES(1) } else { TILE_BODIES(0) }
#undef TILE_BODIES
        int r = 0;
        if (bytes)
            for (; r + 1 < t.rows; r += 2)
                requantize_pair_avx2(&e, i + r, acc[r], acc[r + 1], (uint8_t *)out + (size_t)(i + r) * ldo + c0, ldo);
        for (; r < t.rows; r++) store_row_avx2(&e, i + r, c0, cols, acc[r][0], acc[r][1], out, ldo);
    }
}
