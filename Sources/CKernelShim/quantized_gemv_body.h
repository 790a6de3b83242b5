// The vector bodies of the row GEMM (quantized_gemv.c), included once per instruction set. The includer defines
// QBODY(name) (the body's name for this set), QBODY_TARGET (its target attribute) and QBODY_DOT4(acc, u, s): acc plus,
// per int32 lane, the four products of u's unsigned bytes and s's signed bytes (AVX2: vpmaddubsw + vpmaddwd + add,
// exact only for |s| <= 64; VNNI: one vpdpbusd, exact for any bytes).

/// `rows` (<= TILE_ROWS) rows of x times one 16-column panel, every k quad: acc[r] = sums of columns 0-7, 8-15.
/// Constant `rows` and `flip` specialise the inlined body (unrolled rows, no XOR for uint8 activations).
__attribute__((target(QBODY_TARGET), always_inline))
static inline void QBODY(tile)(int rows, int kquads, int k, const uint8_t *x, size_t ldx, uint8_t flip, const uint8_t *panel,
                               __m256i init0, __m256i init1, __m256i acc[TILE_ROWS][2]) {
    const __m256i ones = _mm256_set1_epi16(1);
    (void)ones;
    for (int r = 0; r < rows; r++) { acc[r][0] = init0; acc[r][1] = init1; }
    int whole = k / 4;
    int q = 0;
    for (; q < whole; q++) {
        const uint8_t *p = panel + (size_t)q * 64;
        __m256i w0 = _mm256_loadu_si256((const __m256i *)p), w1 = _mm256_loadu_si256((const __m256i *)(p + 32));
        for (int r = 0; r < rows; r++) {
            int32_t four;
            memcpy(&four, x + (size_t)r * ldx + 4 * q, 4);
            __m256i v = _mm256_set1_epi32(four);
            if (flip) v = _mm256_xor_si256(v, _mm256_set1_epi8((char)0x80));
            acc[r][0] = QBODY_DOT4(acc[r][0], v, w0);
            acc[r][1] = QBODY_DOT4(acc[r][1], v, w1);
        }
    }
    for (; q < kquads; q++) {
        const uint8_t *p = panel + (size_t)q * 64;
        __m256i w0 = _mm256_loadu_si256((const __m256i *)p), w1 = _mm256_loadu_si256((const __m256i *)(p + 32));
        for (int r = 0; r < rows; r++) {
            __m256i v = _mm256_set1_epi32(quad_at(x + (size_t)r * ldx, k, q, flip));
            acc[r][0] = QBODY_DOT4(acc[r][0], v, w0);
            acc[r][1] = QBODY_DOT4(acc[r][1], v, w1);
        }
    }
}

/// Row tiles of TILE_ROWS rows (then the rest) of x against every panel, each stored through the vector epilogue.
__attribute__((target(QBODY_TARGET), always_inline))
static inline void QBODY(rows)(int m, int n, int k, const uint8_t *x, int ldx, uint8_t flip, const uint8_t *packed,
                               const osprey_qepilogue *ep, const osprey_qdequantize *dq, void *out, int ldo, int size) {
    int kquads = (k + 3) / 4;
    for (int j = 0; j * PANEL < n; j++) {
        int cols = n - j * PANEL < PANEL ? n - j * PANEL : PANEL, c0 = j * PANEL;
        const uint8_t *panel = packed + (size_t)j * kquads * 64;
        // The panel's epilogue parameters as 16 lanes (zero past N); the bias starts the sums.
        _Alignas(32) int32_t bias[PANEL] = {0};
        _Alignas(32) float scale[PANEL] = {0}, fbias[PANEL] = {0}, dbias[PANEL] = {0};
        panel_parameters(ep, dq, c0, cols, bias, scale, fbias, dbias);
        __m256i b0 = _mm256_load_si256((const __m256i *)bias), b1 = _mm256_load_si256((const __m256i *)(bias + 8));
        for (int i = 0; i < m; i += TILE_ROWS) {
            int rows = m - i < TILE_ROWS ? m - i : TILE_ROWS;
            const uint8_t *xr = x + (size_t)i * ldx;
            __m256i acc[TILE_ROWS][2];
            if (rows == TILE_ROWS) QBODY(tile)(TILE_ROWS, kquads, k, xr, (size_t)ldx, flip, panel, b0, b1, acc);
            else QBODY(tile)(rows, kquads, k, xr, (size_t)ldx, flip, panel, b0, b1, acc);
            for (int r = 0; r < rows; r++)
                store16_avx2(ep->kind, ep->zero_point, scale, fbias, dq != NULL, dq ? dq->scale : 0, dq ? dq->zero : 0, dq && dq->bias, dbias,
                             acc[r][0], acc[r][1], cols, (char *)out + ((size_t)(i + r) * ldo + c0) * size);
        }
    }
}

__attribute__((target(QBODY_TARGET)))
static void QBODY(gemv)(int m, int n, int k, const uint8_t *x, int ldx, uint8_t flip, const uint8_t *packed,
                        const osprey_qepilogue *ep, const osprey_qdequantize *dq, void *out, int ldo, int size) {
    // Separate bodies for int8 (flipped) and uint8 activations.
    if (flip) QBODY(rows)(m, n, k, x, ldx, 0x80, packed, ep, dq, out, ldo, size);
    else QBODY(rows)(m, n, k, x, ldx, 0, packed, ep, dq, out, ldo, size);
}
