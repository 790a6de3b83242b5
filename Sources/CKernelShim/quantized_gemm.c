// Integer GEMM for quantized operators: int16 operands (8-bit values minus their zero points), int32 accumulation.
//
// vpmaddwd multiplies 16 int16 pairs and adds each pair into an int32 lane: exact for |x| <= 255 (two products of
// at most 65025 sum to 130050), where vpmaddubsw's u8 x s8 pairs saturate at 32767. Each step broadcasts one
// A pair (a(r, 2p), a(r, 2p + 1)) to all lanes and multiplies it with a packed B row of 16 columns x 2.
#include "include/quantized_gemm.h"
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>

// Rows of A per register tile; with 16 columns (two vectors) that is 12 accumulators, as the float kernel uses.
#define TILE_ROWS 6

// One register tile: `rows` (<= TILE_ROWS) rows of A against a 16-column panel over all k pairs. Always inlined, so
// the call with the constant TILE_ROWS unrolls into 12 register accumulators.
__attribute__((target("avx2"), always_inline))
static inline void tile_body(int rows, int kpairs, const int16_t *a, int lda, const int16_t *panel, __m256i acc[TILE_ROWS][2]) {
    for (int r = 0; r < TILE_ROWS; r++) { acc[r][0] = _mm256_setzero_si256(); acc[r][1] = _mm256_setzero_si256(); }
    const int16_t *b = panel;
    for (int p = 0; p < kpairs; p++, b += 2 * OSPREY_QGEMM_PANEL) {
        __m256i b0 = _mm256_loadu_si256((const __m256i *)b);
        __m256i b1 = _mm256_loadu_si256((const __m256i *)(b + 16));
        for (int r = 0; r < rows; r++) {
            int32_t pair;
            memcpy(&pair, a + r * lda + 2 * p, sizeof pair);
            __m256i x = _mm256_set1_epi32(pair);
            acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(x, b0));
            acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(x, b1));
        }
    }
}

__attribute__((target("avx2")))
static inline void tile_avx2(int rows, int kpairs, const int16_t *a, int lda, const int16_t *panel, int32_t *out, int ldo, int cols) {
    __m256i acc[TILE_ROWS][2];
    if (rows == TILE_ROWS) tile_body(TILE_ROWS, kpairs, a, lda, panel, acc); else tile_body(rows, kpairs, a, lda, panel, acc);
    for (int r = 0; r < rows; r++) {
        if (cols == OSPREY_QGEMM_PANEL) {
            _mm256_storeu_si256((__m256i *)(out + r * ldo), acc[r][0]);
            _mm256_storeu_si256((__m256i *)(out + r * ldo + 8), acc[r][1]);
        } else {
            int32_t row[OSPREY_QGEMM_PANEL];
            _mm256_storeu_si256((__m256i *)row, acc[r][0]);
            _mm256_storeu_si256((__m256i *)(row + 8), acc[r][1]);
            memcpy(out + r * ldo, row, (size_t)cols * sizeof(int32_t));
        }
    }
}

__attribute__((target("avx2")))
static void gemm_avx2(int m, int n, int kpairs, const int16_t *a, int lda, const int16_t *packed_b, int32_t *c, int ldc) {
    int panels = (n + OSPREY_QGEMM_PANEL - 1) / OSPREY_QGEMM_PANEL;
    size_t panel_size = (size_t)kpairs * 2 * OSPREY_QGEMM_PANEL;
    for (int j = 0; j < panels; j++) {
        int cols = n - j * OSPREY_QGEMM_PANEL < OSPREY_QGEMM_PANEL ? n - j * OSPREY_QGEMM_PANEL : OSPREY_QGEMM_PANEL;
        for (int i = 0; i < m; i += TILE_ROWS) {
            int rows = m - i < TILE_ROWS ? m - i : TILE_ROWS;
            tile_avx2(rows, kpairs, a + (size_t)i * lda, lda, packed_b + j * panel_size, c + (size_t)i * ldc + j * OSPREY_QGEMM_PANEL,
                      ldc, cols);
        }
    }
}

static int has_avx2(void) {
    static int cached = -1;
    if (cached < 0) { __builtin_cpu_init(); cached = __builtin_cpu_supports("avx2") ? 1 : 0; }
    return cached;
}
#else
static int has_avx2(void) { return 0; }
#endif

// Portable path: the same panel walk in plain C (auto-vectorised where the compiler can).
static void gemm_portable(int m, int n, int kpairs, const int16_t *a, int lda, const int16_t *packed_b, int32_t *c, int ldc) {
    int panels = (n + OSPREY_QGEMM_PANEL - 1) / OSPREY_QGEMM_PANEL;
    size_t panel_size = (size_t)kpairs * 2 * OSPREY_QGEMM_PANEL;
    for (int j = 0; j < panels; j++) {
        int cols = n - j * OSPREY_QGEMM_PANEL < OSPREY_QGEMM_PANEL ? n - j * OSPREY_QGEMM_PANEL : OSPREY_QGEMM_PANEL;
        const int16_t *panel = packed_b + j * panel_size;
        for (int i = 0; i < m; i++) {
            int32_t acc[OSPREY_QGEMM_PANEL] = {0};
            const int16_t *row = a + (size_t)i * lda;
            for (int p = 0; p < kpairs; p++) {
                const int16_t *b = panel + (size_t)p * 2 * OSPREY_QGEMM_PANEL;
                for (int col = 0; col < OSPREY_QGEMM_PANEL; col++) {
                    acc[col] += (int32_t)row[2 * p] * b[2 * col] + (int32_t)row[2 * p + 1] * b[2 * col + 1];
                }
            }
            memcpy(c + (size_t)i * ldc + j * OSPREY_QGEMM_PANEL, acc, (size_t)cols * sizeof(int32_t));
        }
    }
}

void osprey_qgemm_s16(int m, int n, int kpairs, const int16_t *a, int lda, const int16_t *packed_b, int32_t *c, int ldc) {
    if (m <= 0 || n <= 0) return;
    if (kpairs <= 0) {
        for (int i = 0; i < m; i++) memset(c + (size_t)i * ldc, 0, (size_t)n * sizeof(int32_t));
        return;
    }
#if defined(__x86_64__)
    if (has_avx2()) { gemm_avx2(m, n, kpairs, a, lda, packed_b, c, ldc); return; }
#endif
    gemm_portable(m, n, kpairs, a, lda, packed_b, c, ldc);
}

int osprey_qgemm_uses_avx2(void) { return has_avx2(); }
