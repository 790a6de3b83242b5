// Integer kernels of the quantized operators: u8 x s8 and int16 GEMMs with a fused requantization epilogue, byte
// im2col and panel packing, a depthwise kernel, and QLinearAdd / QLinearMul. Every kernel has an AVX2 body chosen at
// run time (cpuid) and a portable body; the portable bodies are the reference the tests compare against.
//
// Requantization rounds with the current rounding mode (round half to even by default), as onnxruntime's
// MlasRequantizeOutput does (cvtps2dq / nearbyintf): float(acc + bias) * scale, + zero point, saturated.
#include "include/quantized_conv.h"
#include "include/quantized_gemm.h"
#include <math.h>
#include <string.h>

#define TILE_ROWS 6
#define PANEL 16

static int cpu_has_avx2(void) {
#if defined(__x86_64__)
    static int cached = -1;
    if (cached < 0) { __builtin_cpu_init(); cached = __builtin_cpu_supports("avx2") ? 1 : 0; }
    return cached;
#else
    return 0;
#endif
}

int osprey_qconv_uses_avx2(void) { return cpu_has_avx2(); }

// ---- scalar epilogue (portable bodies, partial tiles) ----

static inline int32_t saturate(int32_t v, int32_t lo, int32_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/// Stores `count` sums of row r starting at column c0 through the epilogue.
static void store_row_scalar(const osprey_qepilogue *ep, int r, int c0, int count, const int32_t *acc, void *out, int ldo) {
    int32_t bias = ep->bias ? ep->bias[r] : 0;
    for (int i = 0; i < count; i++) {
        int c = c0 + i;
        size_t at = ep->transposed ? (size_t)c * ldo + r : (size_t)r * ldo + c;
        int32_t v = acc[i] + bias;
        switch (ep->kind) {
        case OSPREY_QOUT_INT32: ((int32_t *)out)[at] = v; break;
        case OSPREY_QOUT_F32: ((float *)out)[at] = (float)v * ep->scale[r] + (ep->float_bias ? ep->float_bias[r] : 0.0f); break;
        default: {
            int32_t q = (int32_t)nearbyintf((float)v * ep->scale[r]) + ep->zero_point;
            if (ep->kind == OSPREY_QOUT_U8) ((uint8_t *)out)[at] = (uint8_t)saturate(q, 0, 255);
            else ((int8_t *)out)[at] = (int8_t)saturate(q, -128, 127);
        }
        }
    }
}

#if defined(__x86_64__)
#include <immintrin.h>

/// The epilogue of row r over 16 sums (two vectors of 8), written contiguously to `o` in the output type.
__attribute__((target("avx2"), always_inline))
static inline void epilogue16_avx2(const osprey_qepilogue *ep, int r, __m256i v0, __m256i v1, void *o) {
    __m256i bias = _mm256_set1_epi32(ep->bias ? ep->bias[r] : 0);
    v0 = _mm256_add_epi32(v0, bias);
    v1 = _mm256_add_epi32(v1, bias);
    if (ep->kind == OSPREY_QOUT_INT32) {
        _mm256_storeu_si256((__m256i *)o, v0);
        _mm256_storeu_si256((__m256i *)((int32_t *)o + 8), v1);
        return;
    }
    __m256 scale = _mm256_set1_ps(ep->scale[r]);
    __m256 f0 = _mm256_mul_ps(_mm256_cvtepi32_ps(v0), scale), f1 = _mm256_mul_ps(_mm256_cvtepi32_ps(v1), scale);
    if (ep->kind == OSPREY_QOUT_F32) {
        __m256 fb = _mm256_set1_ps(ep->float_bias ? ep->float_bias[r] : 0.0f);
        _mm256_storeu_ps((float *)o, _mm256_add_ps(f0, fb));
        _mm256_storeu_ps((float *)o + 8, _mm256_add_ps(f1, fb));
        return;
    }
    // cvtps2dq rounds half to even (default MXCSR); int32 -> int16 -> 8-bit packs saturate.
    __m256i zp = _mm256_set1_epi32(ep->zero_point);
    __m256i q0 = _mm256_add_epi32(_mm256_cvtps_epi32(f0), zp), q1 = _mm256_add_epi32(_mm256_cvtps_epi32(f1), zp);
    __m256i p16 = _mm256_permute4x64_epi64(_mm256_packs_epi32(q0, q1), 0xD8);
    __m128i lo = _mm256_castsi256_si128(p16), hi = _mm256_extracti128_si256(p16, 1);
    _mm_storeu_si128((__m128i *)o, ep->kind == OSPREY_QOUT_U8 ? _mm_packus_epi16(lo, hi) : _mm_packs_epi16(lo, hi));
}

/// Stores one row of a tile (two vectors of 8 int32 sums, `cols` valid) through the epilogue. Partial and
/// transposed rows (MatMul as W^T x A^T: the row's results go to `cols` output rows) go through a 64-byte buffer.
__attribute__((target("avx2"), always_inline))
static inline void store_row_avx2(const osprey_qepilogue *ep, int r, int c0, int cols, __m256i v0, __m256i v1, void *out, int ldo) {
    size_t size = ep->kind == OSPREY_QOUT_U8 || ep->kind == OSPREY_QOUT_S8 ? 1 : 4;
    if (cols == PANEL && !ep->transposed) { epilogue16_avx2(ep, r, v0, v1, (char *)out + ((size_t)r * ldo + c0) * size); return; }
    _Alignas(32) char tmp[PANEL * 4];
    epilogue16_avx2(ep, r, v0, v1, tmp);
    if (!ep->transposed) { memcpy((char *)out + ((size_t)r * ldo + c0) * size, tmp, (size_t)cols * size); return; }
    char *o = (char *)out + ((size_t)c0 * ldo + r) * size;
    if (size == 1) for (int i = 0; i < cols; i++) o[(size_t)i * ldo] = tmp[i];
    else for (int i = 0; i < cols; i++) memcpy(o + (size_t)i * ldo * 4, tmp + 4 * i, 4);
}

// One 6 x 16 register tile over all k quads: vpmaddubsw (u8 panel x broadcast s8 quad) into int16 pair sums,
// vpmaddwd with ones into int32 lanes, add.
__attribute__((target("avx2"), always_inline))
static inline void u8s8_tile(int rows, int kquads, const int8_t *a, int lda, const uint8_t *panel, __m256i acc[TILE_ROWS][2]) {
    const __m256i ones = _mm256_set1_epi16(1);
    for (int r = 0; r < TILE_ROWS; r++) { acc[r][0] = _mm256_setzero_si256(); acc[r][1] = _mm256_setzero_si256(); }
    const uint8_t *b = panel;
    for (int q = 0; q < kquads; q++, b += 4 * PANEL) {
        __m256i b0 = _mm256_loadu_si256((const __m256i *)b), b1 = _mm256_loadu_si256((const __m256i *)(b + 32));
        for (int r = 0; r < rows; r++) {
            int32_t quad;
            memcpy(&quad, a + (size_t)r * lda + 4 * q, sizeof quad);
            __m256i x = _mm256_set1_epi32(quad);
            acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(_mm256_maddubs_epi16(b0, x), ones));
            acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(_mm256_maddubs_epi16(b1, x), ones));
        }
    }
}

__attribute__((target("avx2")))
static void u8s8_avx2(int m, int n, int kquads, const int8_t *a, int lda, const uint8_t *packed_b, const osprey_qepilogue *ep, void *out, int ldo) {
    int panels = (n + PANEL - 1) / PANEL;
    size_t panel_size = (size_t)kquads * 4 * PANEL;
    for (int j = 0; j < panels; j++) {
        int cols = n - j * PANEL < PANEL ? n - j * PANEL : PANEL;
        for (int i = 0; i < m; i += TILE_ROWS) {
            int rows = m - i < TILE_ROWS ? m - i : TILE_ROWS;
            __m256i acc[TILE_ROWS][2];
            if (rows == TILE_ROWS) u8s8_tile(TILE_ROWS, kquads, a + (size_t)i * lda, lda, packed_b + j * panel_size, acc);
            else u8s8_tile(rows, kquads, a + (size_t)i * lda, lda, packed_b + j * panel_size, acc);
            for (int r = 0; r < rows; r++) store_row_avx2(ep, i + r, j * PANEL, cols, acc[r][0], acc[r][1], out, ldo);
        }
    }
}

// One 6 x 16 tile of int16 pairs: broadcast an A pair, vpmaddwd with a packed B row of 16 columns x 2.
__attribute__((target("avx2"), always_inline))
static inline void s16_tile(int rows, int kpairs, const int16_t *a, int lda, const int16_t *panel, __m256i acc[TILE_ROWS][2]) {
    for (int r = 0; r < TILE_ROWS; r++) { acc[r][0] = _mm256_setzero_si256(); acc[r][1] = _mm256_setzero_si256(); }
    const int16_t *b = panel;
    for (int p = 0; p < kpairs; p++, b += 2 * PANEL) {
        __m256i b0 = _mm256_loadu_si256((const __m256i *)b), b1 = _mm256_loadu_si256((const __m256i *)(b + 16));
        for (int r = 0; r < rows; r++) {
            int32_t pair;
            memcpy(&pair, a + (size_t)r * lda + 2 * p, sizeof pair);
            __m256i x = _mm256_set1_epi32(pair);
            acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(x, b0));
            acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(x, b1));
        }
    }
}

__attribute__((target("avx2")))
static void s16_avx2(int m, int n, int kpairs, const int16_t *a, int lda, const int16_t *packed_b, const osprey_qepilogue *ep, void *out, int ldo) {
    int panels = (n + PANEL - 1) / PANEL;
    size_t panel_size = (size_t)kpairs * 2 * PANEL;
    for (int j = 0; j < panels; j++) {
        int cols = n - j * PANEL < PANEL ? n - j * PANEL : PANEL;
        for (int i = 0; i < m; i += TILE_ROWS) {
            int rows = m - i < TILE_ROWS ? m - i : TILE_ROWS;
            __m256i acc[TILE_ROWS][2];
            if (rows == TILE_ROWS) s16_tile(TILE_ROWS, kpairs, a + (size_t)i * lda, lda, packed_b + j * panel_size, acc);
            else s16_tile(rows, kpairs, a + (size_t)i * lda, lda, packed_b + j * panel_size, acc);
            for (int r = 0; r < rows; r++) store_row_avx2(ep, i + r, j * PANEL, cols, acc[r][0], acc[r][1], out, ldo);
        }
    }
}
#endif

// ---- portable GEMM bodies (the reference twins of the AVX2 ones) ----

static void u8s8_portable(int m, int n, int kquads, const int8_t *a, int lda, const uint8_t *packed_b, const osprey_qepilogue *ep, void *out, int ldo) {
    int panels = (n + PANEL - 1) / PANEL;
    size_t panel_size = (size_t)kquads * 4 * PANEL;
    for (int j = 0; j < panels; j++) {
        int cols = n - j * PANEL < PANEL ? n - j * PANEL : PANEL;
        const uint8_t *panel = packed_b + j * panel_size;
        for (int i = 0; i < m; i++) {
            int32_t acc[PANEL] = {0};
            const int8_t *row = a + (size_t)i * lda;
            for (int q = 0; q < kquads; q++)
                for (int c = 0; c < PANEL; c++)
                    for (int t = 0; t < 4; t++) acc[c] += (int32_t)panel[(size_t)q * 4 * PANEL + 4 * c + t] * row[4 * q + t];
            store_row_scalar(ep, i, j * PANEL, cols, acc, out, ldo);
        }
    }
}

static void s16_portable(int m, int n, int kpairs, const int16_t *a, int lda, const int16_t *packed_b, const osprey_qepilogue *ep, void *out, int ldo) {
    int panels = (n + PANEL - 1) / PANEL;
    size_t panel_size = (size_t)kpairs * 2 * PANEL;
    for (int j = 0; j < panels; j++) {
        int cols = n - j * PANEL < PANEL ? n - j * PANEL : PANEL;
        const int16_t *panel = packed_b + j * panel_size;
        for (int i = 0; i < m; i++) {
            int32_t acc[PANEL] = {0};
            const int16_t *row = a + (size_t)i * lda;
            for (int p = 0; p < kpairs; p++) {
                const int16_t *b = panel + (size_t)p * 2 * PANEL;
                for (int c = 0; c < PANEL; c++) acc[c] += (int32_t)row[2 * p] * b[2 * c] + (int32_t)row[2 * p + 1] * b[2 * c + 1];
            }
            store_row_scalar(ep, i, j * PANEL, cols, acc, out, ldo);
        }
    }
}

/// 1 forces the portable bodies (tests compare the two); 0 picks by the CPU.
static int force_portable = 0;
void osprey_qkernels_force_portable(int on) { force_portable = on; }

void osprey_qgemm_u8s8(int m, int n, int kquads, const int8_t *a, int lda, const uint8_t *packed_b, const osprey_qepilogue *ep, void *out, int ldo) {
    if (m <= 0 || n <= 0) return;
#if defined(__x86_64__)
    if (!force_portable && cpu_has_avx2()) { u8s8_avx2(m, n, kquads, a, lda, packed_b, ep, out, ldo); return; }
#endif
    u8s8_portable(m, n, kquads, a, lda, packed_b, ep, out, ldo);
}

void osprey_qgemm_s16_epilogue(int m, int n, int kpairs, const int16_t *a, int lda, const int16_t *packed_b, const osprey_qepilogue *ep, void *out, int ldo) {
    if (m <= 0 || n <= 0) return;
#if defined(__x86_64__)
    if (!force_portable && cpu_has_avx2()) { s16_avx2(m, n, kpairs, a, lda, packed_b, ep, out, ldo); return; }
#endif
    s16_portable(m, n, kpairs, a, lda, packed_b, ep, out, ldo);
}

// ---- packing ----

void osprey_qpack_u8(int k, int n, const uint8_t *b, int ldb, int flip, uint8_t *packed) {
    int kquads = (k + 3) / 4, panels = (n + PANEL - 1) / PANEL;
    uint8_t x = flip ? 0x80 : 0;
    for (int j = 0; j < panels; j++) {
        int cols = n - j * PANEL < PANEL ? n - j * PANEL : PANEL;
        uint8_t *panel = packed + (size_t)j * kquads * 4 * PANEL;
        for (int q = 0; q < kquads; q++) {
            uint8_t *dst = panel + (size_t)q * 4 * PANEL;
            const uint8_t *src[4];
            for (int t = 0; t < 4; t++) src[t] = 4 * q + t < k ? b + (size_t)(4 * q + t) * ldb + j * PANEL : NULL;
            if (cols == PANEL && src[3]) {
                for (int c = 0; c < PANEL; c++) {
                    dst[4 * c] = src[0][c] ^ x; dst[4 * c + 1] = src[1][c] ^ x; dst[4 * c + 2] = src[2][c] ^ x; dst[4 * c + 3] = src[3][c] ^ x;
                }
            } else {
                memset(dst, 0, 4 * PANEL);
                for (int t = 0; t < 4; t++)
                    if (src[t]) for (int c = 0; c < cols; c++) dst[4 * c + t] = src[t][c] ^ x;
            }
        }
    }
}

void osprey_qpack_u8_rows(int k, int n, const uint8_t *a, int lda, int flip, uint8_t *packed) {
    int kquads = (k + 3) / 4, panels = (n + PANEL - 1) / PANEL;
    uint8_t x = flip ? 0x80 : 0;
    memset(packed, 0, (size_t)panels * kquads * 4 * PANEL);
    for (int c = 0; c < n; c++) {
        const uint8_t *row = a + (size_t)c * lda;
        uint8_t *dst = packed + (size_t)(c / PANEL) * kquads * 4 * PANEL + 4 * (c % PANEL);
        for (int q = 0; q < kquads; q++) {
            uint8_t *d = dst + (size_t)q * 4 * PANEL;
            int left = k - 4 * q < 4 ? k - 4 * q : 4;
            for (int t = 0; t < left; t++) d[t] = row[4 * q + t] ^ x;
        }
    }
}

void osprey_qpack_s16(int k, int n, const void *b, int ldb, int is_signed, int32_t zero, int16_t *packed) {
    int kpairs = (k + 1) / 2, panels = (n + PANEL - 1) / PANEL;
    memset(packed, 0, (size_t)panels * kpairs * 2 * PANEL * sizeof(int16_t));
    for (int r = 0; r < k; r++) {
        const uint8_t *u = (const uint8_t *)b + (size_t)r * ldb;
        const int8_t *s = (const int8_t *)b + (size_t)r * ldb;
        for (int c = 0; c < n; c++) {
            int32_t v = (is_signed ? (int32_t)s[c] : (int32_t)u[c]) - zero;
            packed[(size_t)(c / PANEL) * kpairs * 2 * PANEL + (size_t)(r / 2) * 2 * PANEL + 2 * (c % PANEL) + (r & 1)] = (int16_t)v;
        }
    }
}

void osprey_im2col_u8(const uint8_t *x, int c, int h, int w, int kh, int kw, int sh, int sw, int dh, int dw,
                      int pt, int pl, int oh, int ow, uint8_t pad, uint8_t *out) {
    size_t columns = (size_t)oh * ow;
    for (int ic = 0; ic < c; ic++) {
        const uint8_t *plane = x + (size_t)ic * h * w;
        for (int ky = 0; ky < kh; ky++) {
            for (int kx = 0; kx < kw; kx++) {
                uint8_t *row = out + ((size_t)(ic * kh + ky) * kw + kx) * columns;
                for (int oy = 0; oy < oh; oy++) {
                    int iy = oy * sh - pt + ky * dh;
                    uint8_t *dst = row + (size_t)oy * ow;
                    if (iy < 0 || iy >= h) { memset(dst, pad, ow); continue; }
                    const uint8_t *src = plane + (size_t)iy * w;
                    int x0 = kx * dw - pl;
                    if (sw == 1) {
                        // Columns [lo, hi) read inside the row; the rest is padding.
                        int lo = x0 < 0 ? -x0 : 0, hi = w - x0 < ow ? w - x0 : ow;
                        if (hi < lo) hi = lo;
                        if (lo > ow) lo = ow;
                        if (lo > 0) memset(dst, pad, lo);
                        if (hi > lo) memcpy(dst + lo, src + x0 + lo, hi - lo);
                        if (ow > hi) memset(dst + hi, pad, ow - hi);
                    } else {
                        for (int ox = 0; ox < ow; ox++) {
                            int ix = ox * sw + x0;
                            dst[ox] = ix >= 0 && ix < w ? src[ix] : pad;
                        }
                    }
                }
            }
        }
    }
}

// ---- depthwise ----

// Scratch layout: a padded copy of the plane minus x_zero (padding 0; int32 in the portable body, int16 in the AVX2
// one), each row split into SW phases (phase p, index i holds padded column i * SW + p) so that every tap reads
// contiguous values for consecutive outputs, then (portable) one output row of sums.
static inline void depthwise_geometry(int oh, int ow, int kh, int kw, int sh, int sw, int dh, int dw, int *ph, int *phase_len) {
    *ph = (oh - 1) * sh + (kh - 1) * dh + 1;
    int pw = (ow - 1) * sw + (kw - 1) * dw + 1;
    *phase_len = (pw + sw - 1) / sw;
}

int osprey_qdepthwise_scratch(int h, int w, int kh, int kw, int sh, int sw, int dh, int dw, int pt, int pl, int oh, int ow) {
    (void)h; (void)w; (void)pt; (void)pl;
    int ph, len;
    depthwise_geometry(oh, ow, kh, kw, sh, sw, dh, dw, &ph, &len);
    // + 64: the AVX2 kernel reads whole 16-lane vectors past the last output of a row.
    return ph * sw * len + ow + 64;
}

/// Fills the padded, phase-split copy of the plane.
static void depthwise_pad(const uint8_t *x, int is_signed, int32_t x_zero, int h, int w, int pt, int pl, int ph, int sw, int len, int32_t *padded) {
    int row_len = sw * len;
    for (int py = 0; py < ph; py++) {
        int32_t *row = padded + (size_t)py * row_len;
        int iy = py - pt;
        if (iy < 0 || iy >= h) { memset(row, 0, (size_t)row_len * sizeof(int32_t)); continue; }
        const uint8_t *su = x + (size_t)iy * w;
        const int8_t *ss = (const int8_t *)su;
        for (int p = 0; p < sw; p++) {
            int32_t *dst = row + p * len;
            for (int i = 0; i < len; i++) {
                int ix = i * sw + p - pl;
                dst[i] = ix >= 0 && ix < w ? (is_signed ? (int32_t)ss[ix] : (int32_t)su[ix]) - x_zero : 0;
            }
        }
    }
}

// The window sums of one output row; STORE writes them through the epilogue.
#define DEPTHWISE_ROWS(STORE)                                                                          \
    int ph, len;                                                                                       \
    depthwise_geometry(oh, ow, kh, kw, sh, sw, dh, dw, &ph, &len);                                     \
    int row_len = sw * len;                                                                            \
    int32_t *padded = scratch, *acc = scratch + (size_t)ph * row_len;                                  \
    depthwise_pad(x, is_signed, x_zero, h, w, pt, pl, ph, sw, len, padded);                            \
    for (int oy = 0; oy < oh; oy++) {                                                                  \
        for (int ox = 0; ox < ow; ox++) acc[ox] = 0;                                                   \
        for (int ky = 0; ky < kh; ky++) {                                                              \
            const int32_t *row = padded + (size_t)(oy * sh + ky * dh) * row_len;                       \
            for (int kx = 0; kx < kw; kx++) {                                                          \
                int col = kx * dw;                                                                     \
                const int32_t *src = row + (col % sw) * len + col / sw;                                \
                int32_t wv = weights[ky * kw + kx];                                                    \
                for (int ox = 0; ox < ow; ox++) acc[ox] += wv * src[ox];                               \
            }                                                                                          \
        }                                                                                              \
        STORE(ep, oy * ow, ow, acc, out);                                                              \
    }

static void store_sums_scalar(const osprey_qepilogue *ep, int c0, int count, const int32_t *acc, void *out) {
    store_row_scalar(ep, 0, c0, count, acc, out, 0);
}

static void depthwise_portable(const uint8_t *x, int is_signed, int32_t x_zero, int h, int w, const int32_t *weights, int kh, int kw,
                               int sh, int sw, int dh, int dw, int pt, int pl, int oh, int ow,
                               const osprey_qepilogue *ep, void *out, int32_t *scratch) {
    DEPTHWISE_ROWS(store_sums_scalar)
}

#if defined(__x86_64__)
/// The padded, phase-split plane of the AVX2 kernel as int16 (x - x_zero fits: |x - x_zero| <= 255).
__attribute__((target("avx2")))
static void depthwise_pad16(const uint8_t *x, int is_signed, int32_t x_zero, int h, int w, int pt, int pl, int ph, int sw, int len, int16_t *padded) {
    int row_len = sw * len;
    // Phase p's index i reads column i * sw + p - pl: inside the row for i in [first[p], last[p]).
    int first[8], last[8];
    if (sw > 8) return;
    for (int p = 0; p < sw; p++) {
        int a = pl - p, i0 = a <= 0 ? 0 : (a + sw - 1) / sw, i1 = (w + pl - p + sw - 1) / sw;
        if (i1 > len) i1 = len;
        if (i0 > i1) i0 = i1;
        first[p] = i0;
        last[p] = i1;
    }
    for (int py = 0; py < ph; py++) {
        int16_t *row = padded + (size_t)py * row_len;
        int iy = py - pt;
        if (iy < 0 || iy >= h) { memset(row, 0, (size_t)row_len * sizeof(int16_t)); continue; }
        const uint8_t *su = x + (size_t)iy * w;
        const int8_t *ss = (const int8_t *)su;
        for (int p = 0; p < sw; p++) {
            int16_t *dst = row + p * len;
            int i0 = first[p], i1 = last[p];
            for (int i = 0; i < i0; i++) dst[i] = 0;
            const int off = p - pl;
            if (is_signed) for (int i = i0; i < i1; i++) dst[i] = (int16_t)((int32_t)ss[i * sw + off] - x_zero);
            else for (int i = i0; i < i1; i++) dst[i] = (int16_t)((int32_t)su[i * sw + off] - x_zero);
            for (int i = i1; i < len; i++) dst[i] = 0;
        }
    }
}

// AVX2 depthwise: taps taken in pairs, the two source vectors interleaved (vpunpck{l,h}wd) and multiplied with the
// broadcast weight pair by vpmaddwd, 16 outputs per step (the unpack order is undone before the epilogue).
#define DEPTHWISE_MAX_TAPS 64
__attribute__((target("avx2")))
static int depthwise_avx2(const uint8_t *x, int is_signed, int32_t x_zero, int h, int w, const int32_t *weights, int kh, int kw,
                          int sh, int sw, int dh, int dw, int pt, int pl, int oh, int ow,
                          const osprey_qepilogue *ep, void *out, int32_t *scratch) {
    int taps = kh * kw;
    if (taps > DEPTHWISE_MAX_TAPS || sw > 8) return 0;
    int ph, len;
    depthwise_geometry(oh, ow, kh, kw, sh, sw, dh, dw, &ph, &len);
    int row_len = sw * len;
    int16_t *padded = (int16_t *)scratch;
    depthwise_pad16(x, is_signed, x_zero, h, w, pt, pl, ph, sw, len, padded);
    int offsets[DEPTHWISE_MAX_TAPS + 1];
    int32_t pairs[DEPTHWISE_MAX_TAPS / 2 + 1];
    for (int t = 0; t < taps; t++) {
        int ky = t / kw, kx = t % kw, col = kx * dw;
        offsets[t] = ky * dh * row_len + (col % sw) * len + col / sw;
    }
    for (int t = 0; t < taps; t += 2) {
        int32_t w0 = weights[t], w1 = t + 1 < taps ? weights[t + 1] : 0;
        pairs[t / 2] = (int32_t)(((uint32_t)(uint16_t)(int16_t)w1 << 16) | (uint16_t)(int16_t)w0);
    }
    if (taps & 1) offsets[taps] = offsets[taps - 1];  // pairs the last tap with a zero weight
    const __m256i zero = _mm256_setzero_si256();
    for (int oy = 0; oy < oh; oy++) {
        const int16_t *base = padded + (size_t)oy * sh * row_len;
        for (int ox = 0; ox < ow; ox += PANEL) {
            __m256i lo = zero, hi = zero;
            for (int t = 0; t < taps; t += 2) {
                __m256i a = _mm256_loadu_si256((const __m256i *)(base + offsets[t] + ox));
                __m256i b = _mm256_loadu_si256((const __m256i *)(base + offsets[t + 1] + ox));
                __m256i wp = _mm256_set1_epi32(pairs[t / 2]);
                lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_unpacklo_epi16(a, b), wp));
                hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_unpackhi_epi16(a, b), wp));
            }
            // lo holds outputs 0-3 and 8-11, hi 4-7 and 12-15.
            __m256i v0 = _mm256_permute2x128_si256(lo, hi, 0x20), v1 = _mm256_permute2x128_si256(lo, hi, 0x31);
            store_row_avx2(ep, 0, oy * ow + ox, ow - ox < PANEL ? ow - ox : PANEL, v0, v1, out, 0);
        }
    }
    return 1;
}
#endif

void osprey_qdepthwise(const uint8_t *x, int is_signed, int32_t x_zero, int h, int w, const int32_t *weights, int kh, int kw,
                       int sh, int sw, int dh, int dw, int pt, int pl, int oh, int ow,
                       const osprey_qepilogue *ep, void *out, int32_t *scratch) {
#if defined(__x86_64__)
    if (!force_portable && cpu_has_avx2() &&
        depthwise_avx2(x, is_signed, x_zero, h, w, weights, kh, kw, sh, sw, dh, dw, pt, pl, oh, ow, ep, out, scratch)) return;
#endif
    depthwise_portable(x, is_signed, x_zero, h, w, weights, kh, kw, sh, sw, dh, dw, pt, pl, oh, ow, ep, out, scratch);
}

// ---- elementwise ----

__attribute__((always_inline))
static inline void binary_body(int is_mul, int is_signed, long count, const uint8_t *a, float sa, int32_t za,
                               const uint8_t *b, float sb, int32_t zb, float sc, int32_t zc, uint8_t *out) {
    float ra = sa / sc, rb = sb / sc, rab = sa * sb / sc;
    int32_t lo = is_signed ? -128 : 0, hi = is_signed ? 127 : 255;
    for (long i = 0; i < count; i++) {
        float va = (float)((is_signed ? (int32_t)(int8_t)a[i] : (int32_t)a[i]) - za);
        float vb = (float)((is_signed ? (int32_t)(int8_t)b[i] : (int32_t)b[i]) - zb);
        float r = is_mul ? va * vb * rab : va * ra + vb * rb;
        int32_t q = (int32_t)nearbyintf(r) + zc;
        out[i] = (uint8_t)saturate(q, lo, hi);
    }
}

#if defined(__x86_64__)
__attribute__((target("avx2")))
static void binary_avx2(int is_mul, int is_signed, long count, const uint8_t *a, float sa, int32_t za,
                        const uint8_t *b, float sb, int32_t zb, float sc, int32_t zc, uint8_t *out) {
    binary_body(is_mul, is_signed, count, a, sa, za, b, sb, zb, sc, zc, out);
}
#endif

void osprey_qlinear_binary(int is_mul, int is_signed, long count, const uint8_t *a, float sa, int32_t za,
                           const uint8_t *b, float sb, int32_t zb, float sc, int32_t zc, uint8_t *out) {
#if defined(__x86_64__)
    if (!force_portable && cpu_has_avx2()) { binary_avx2(is_mul, is_signed, count, a, sa, za, b, sb, zb, sc, zc, out); return; }
#endif
    binary_body(is_mul, is_signed, count, a, sa, za, b, sb, zb, sc, zc, out);
}

void osprey_qplane_sums(const uint8_t *x, int is_signed, long planes, long size, int32_t *sums) {
    for (long p = 0; p < planes; p++) {
        int32_t s = 0;
        const uint8_t *u = x + p * size;
        if (is_signed) for (long i = 0; i < size; i++) s += (int8_t)u[i];
        else for (long i = 0; i < size; i++) s += u[i];
        sums[p] = s;
    }
}

void osprey_qdepthwise_planes(const uint8_t *x, int is_signed, int32_t x_zero, int first, int count, int channels, int h, int w,
                              const int32_t *weights, int kh, int kw, int sh, int sw, int dh, int dw, int pt, int pl, int oh, int ow,
                              const osprey_qepilogue *ep, void *out, int32_t *scratch) {
    size_t size = ep->kind == OSPREY_QOUT_U8 || ep->kind == OSPREY_QOUT_S8 ? 1 : 4;
    for (int p = first; p < first + count; p++) {
        int c = p % channels;
        osprey_qepilogue e = *ep;
        if (e.bias) e.bias += c;
        if (e.scale) e.scale += c;
        osprey_qdepthwise(x + (size_t)p * h * w, is_signed, x_zero, h, w, weights + (size_t)c * kh * kw, kh, kw, sh, sw, dh, dw, pt, pl,
                          oh, ow, &e, (char *)out + (size_t)p * oh * ow * size, scratch);
    }
}
