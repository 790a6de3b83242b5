// Rows of 8-bit activations times a constant u8 x s8 weight matrix (MatMul, Gemm, the dynamic-quantization
// products). The activations are the broadcast operand (u8 quads, vpmaddubsw's unsigned side: read in place, no
// packing per call) and the weights the panels packed once (s8: |w| <= 64 on AVX2 so a pair of products cannot
// saturate, any int8 on VNNI), so every lane is an output column, at batch 1 as on 128 tokens: tiles of 6 rows x 16
// columns (8 rows x one zmm on AVX512-VNNI), the bias starting the sums and a per-column vector epilogue writing each
// output row in order. The portable body is the reference twin the tests compare with.
#include "include/quantized_conv.h"
#include <math.h>
#include <string.h>

#define PANEL 16

/// Quad q of row x (K bytes) XOR `flip`, bytes past K zero.
static inline int32_t quad_at(const uint8_t *x, int k, int q, uint8_t flip) {
    uint8_t b[4] = {0, 0, 0, 0};
    for (int t = 0; t < 4 && 4 * q + t < k; t++) b[t] = x[4 * q + t] ^ flip;
    int32_t v;
    memcpy(&v, b, 4);
    return v;
}

static inline int32_t clamp(int32_t v, int32_t lo, int32_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/// Element c of a row: acc + bias[c] through the epilogue's kind with column c's parameters; with `dq`, the 8-bit
/// value is dequantized (and biased) into a float instead of stored.
static inline void store_column(const osprey_qepilogue *ep, const osprey_qdequantize *dq, int c, int32_t acc, void *o) {
    int32_t v = acc + (ep->bias ? ep->bias[c] : 0);
    switch (ep->kind) {
    case OSPREY_QOUT_INT32: *(int32_t *)o = v; break;
    case OSPREY_QOUT_F32: *(float *)o = (float)v * ep->scale[c] + (ep->float_bias ? ep->float_bias[c] : 0.0f); break;
    default: {
        int32_t q = (int32_t)nearbyintf((float)v * ep->scale[c]) + ep->zero_point;
        q = ep->kind == OSPREY_QOUT_U8 ? clamp(q, 0, 255) : clamp(q, -128, 127);
        if (dq) {
            float y = ((float)q - dq->zero) * dq->scale;
            *(float *)o = dq->bias ? y + dq->bias[c] : y;
        } else if (ep->kind == OSPREY_QOUT_U8) *(uint8_t *)o = (uint8_t)q;
        else *(int8_t *)o = (int8_t)q;
    }
    }
}

/// Panel columns [c0, c0 + cols) of the epilogue as 16 lanes each (zero past N): the bias that starts the sums, the
/// scale, the float bias and the dequantization bias.
static inline void panel_parameters(const osprey_qepilogue *ep, const osprey_qdequantize *dq, int c0, int cols,
                                    int32_t *bias, float *scale, float *fbias, float *dbias) {
    for (int c = 0; c < cols; c++) {
        if (ep->bias) bias[c] = ep->bias[c0 + c];
        if (ep->kind != OSPREY_QOUT_INT32) scale[c] = ep->scale[c0 + c];
        if (ep->kind == OSPREY_QOUT_F32 && ep->float_bias) fbias[c] = ep->float_bias[c0 + c];
        if (dq && dq->bias) dbias[c] = dq->bias[c0 + c];
    }
}

static void gemv_portable(int m, int n, int k, const uint8_t *x, int ldx, uint8_t flip, const uint8_t *packed,
                          const osprey_qepilogue *ep, const osprey_qdequantize *dq, void *out, int ldo, int size) {
    int kquads = (k + 3) / 4;
    for (int r = 0; r < m; r++)
        for (int c = 0; c < n; c++) {
            const uint8_t *panel = packed + (size_t)(c / PANEL) * kquads * 64 + 4 * (c % PANEL);
            int32_t acc = 0;
            for (int q = 0; q < kquads; q++) {
                int32_t four = quad_at(x + (size_t)r * ldx, k, q, flip);
                const uint8_t *xb = (const uint8_t *)&four;
                for (int t = 0; t < 4; t++) acc += (int32_t)xb[t] * (int8_t)panel[(size_t)q * 64 + t];
            }
            store_column(ep, dq, c, acc, (char *)out + ((size_t)r * ldo + c) * size);
        }
}

#if defined(__x86_64__)
#include <immintrin.h>

#define TILE_ROWS 6

/// One row's 16 sums (bias included) through the epilogue with the panel's per-column scale and float bias
/// (`scale`, `fbias`: 16 lanes each), `cols` valid, to `o` in the output type. `dequant` (8-bit kinds only): the
/// saturated values become floats (q - dzero) * dscale, plus `dbias` (16 lanes) when `has_dbias`.
__attribute__((target("avx2"), always_inline))
static inline void store16_avx2(int kind, int32_t zero_point, const float *scale, const float *fbias, int dequant, float dscale,
                                float dzero, int has_dbias, const float *dbias, __m256i v0, __m256i v1, int cols, void *o) {
    _Alignas(32) char tmp[PANEL * 4];
    int size = (kind == OSPREY_QOUT_U8 || kind == OSPREY_QOUT_S8) && !dequant ? 1 : 4;
    void *dst = cols == PANEL ? o : tmp;
    if (kind == OSPREY_QOUT_INT32) {
        _mm256_storeu_si256((__m256i *)dst, v0);
        _mm256_storeu_si256((__m256i *)((int32_t *)dst + 8), v1);
    } else {
        __m256 f0 = _mm256_mul_ps(_mm256_cvtepi32_ps(v0), _mm256_load_ps(scale));
        __m256 f1 = _mm256_mul_ps(_mm256_cvtepi32_ps(v1), _mm256_load_ps(scale + 8));
        if (kind == OSPREY_QOUT_F32) {
            _mm256_storeu_ps((float *)dst, _mm256_add_ps(f0, _mm256_load_ps(fbias)));
            _mm256_storeu_ps((float *)dst + 8, _mm256_add_ps(f1, _mm256_load_ps(fbias + 8)));
        } else if (dequant) {
            // The scalar path's int32 arithmetic: rounded, + zero point (wrapping as the scalar add does), clamped.
            __m256i zp = _mm256_set1_epi32(zero_point);
            __m256i lo = _mm256_set1_epi32(kind == OSPREY_QOUT_U8 ? 0 : -128), hi = _mm256_set1_epi32(kind == OSPREY_QOUT_U8 ? 255 : 127);
            __m256i q0 = _mm256_min_epi32(_mm256_max_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(f0), zp), lo), hi);
            __m256i q1 = _mm256_min_epi32(_mm256_max_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(f1), zp), lo), hi);
            __m256 s = _mm256_set1_ps(dscale), z = _mm256_set1_ps(dzero);
            __m256 y0 = _mm256_mul_ps(_mm256_sub_ps(_mm256_cvtepi32_ps(q0), z), s), y1 = _mm256_mul_ps(_mm256_sub_ps(_mm256_cvtepi32_ps(q1), z), s);
            if (has_dbias) { y0 = _mm256_add_ps(y0, _mm256_load_ps(dbias)); y1 = _mm256_add_ps(y1, _mm256_load_ps(dbias + 8)); }
            _mm256_storeu_ps((float *)dst, y0);
            _mm256_storeu_ps((float *)dst + 8, y1);
        } else {
            // cvtps2dq rounds half to even (default MXCSR) and gives INT32_MIN where the scalar cast does; packs saturate.
            __m256i zp = _mm256_set1_epi32(zero_point);
            __m256i q0 = _mm256_add_epi32(_mm256_cvtps_epi32(f0), zp), q1 = _mm256_add_epi32(_mm256_cvtps_epi32(f1), zp);
            __m256i p16 = _mm256_permute4x64_epi64(_mm256_packs_epi32(q0, q1), 0xD8);
            __m128i lo = _mm256_castsi256_si128(p16), hi = _mm256_extracti128_si256(p16, 1);
            _mm_storeu_si128((__m128i *)dst, kind == OSPREY_QOUT_U8 ? _mm_packus_epi16(lo, hi) : _mm_packs_epi16(lo, hi));
        }
    }
    if (cols < PANEL) memcpy(o, tmp, (size_t)cols * size);
}

// The ymm bodies (quantized_gemv_body.h): AVX2 and AVX-VNNI (VEX vpdpbusd).
#define QBODY(name) name##_avx2
#define QBODY_TARGET "avx2"
#define QBODY_DOT4(acc, u, s) _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), ones))
#include "quantized_gemv_body.h"
#undef QBODY
#undef QBODY_TARGET
#undef QBODY_DOT4
#define QBODY(name) name##_avxvnni
#define QBODY_TARGET "avx2,avxvnni"
#define QBODY_DOT4(acc, u, s) _mm256_dpbusd_avx_epi32(acc, u, s)
#include "quantized_gemv_body.h"
#undef QBODY
#undef QBODY_TARGET
#undef QBODY_DOT4

// AVX512-VNNI: a 16-column panel's k quad is one zmm (64 bytes), so each row of a tile takes one vpdpbusd per quad,
// in tiles of 8 rows by two panels (16 accumulators of the 32 registers; a last odd panel 8); about 1.6-2x the ymm
// bodies' rate on this EPYC (whose 512-bit units are full width).
#define ZMM_ROWS 8
#define ZMM_TARGET "avx2,avx512f,avx512bw,avx512vl,avx512vnni"

/// Row r's k quad q (all four bytes inside the row) broadcast to every lane, each byte's top bit flipped when `flip`
/// (int8 x read as u8 + 128): the x operand of every whole quad of both tiles.
__attribute__((target(ZMM_TARGET), always_inline))
static inline __m512i whole_quad_zmm(const uint8_t *x, size_t ldx, int r, int q, uint8_t flip) {
    int32_t four;
    memcpy(&four, x + (size_t)r * ldx + 4 * q, 4);
    __m512i v = _mm512_set1_epi32(four);
    if (flip) v = _mm512_xor_si512(v, _mm512_set1_epi8((char)0x80));
    return v;
}

/// `rows` (<= ZMM_ROWS) rows of x times one panel over every k quad: acc[r] = the 16 columns' sums.
__attribute__((target(ZMM_TARGET), always_inline))
static inline void tile_zmm(int rows, int kquads, int k, const uint8_t *x, size_t ldx, uint8_t flip, const uint8_t *panel, __m512i init,
                            __m512i acc[ZMM_ROWS]) {
    for (int r = 0; r < rows; r++) acc[r] = init;
    int whole = k / 4, q = 0;
    for (; q < whole; q++) {
        __m512i w = _mm512_loadu_si512((const void *)(panel + (size_t)q * 64));
        for (int r = 0; r < rows; r++) acc[r] = _mm512_dpbusd_epi32(acc[r], whole_quad_zmm(x, ldx, r, q, flip), w);
    }
    for (; q < kquads; q++) {
        __m512i w = _mm512_loadu_si512((const void *)(panel + (size_t)q * 64));
        for (int r = 0; r < rows; r++) acc[r] = _mm512_dpbusd_epi32(acc[r], _mm512_set1_epi32(quad_at(x + (size_t)r * ldx, k, q, flip)), w);
    }
}

/// `rows` (<= ZMM_ROWS) rows of x times two adjacent panels (32 columns) over every k quad: 16 accumulators, so
/// vpdpbusd's latency is hidden and each broadcast of x feeds two products (one panel's 8 chains left the EPYC's two
/// VNNI pipes part idle).
__attribute__((target(ZMM_TARGET), always_inline))
static inline void tile2_zmm(int rows, int kquads, int k, const uint8_t *x, size_t ldx, uint8_t flip, const uint8_t *panel, size_t panel_bytes,
                             __m512i init0, __m512i init1, __m512i acc0[ZMM_ROWS], __m512i acc1[ZMM_ROWS]) {
    for (int r = 0; r < rows; r++) { acc0[r] = init0; acc1[r] = init1; }
    const uint8_t *second = panel + panel_bytes;
    int whole = k / 4, q = 0;
    for (; q < whole; q++) {
        __m512i w0 = _mm512_loadu_si512((const void *)(panel + (size_t)q * 64)), w1 = _mm512_loadu_si512((const void *)(second + (size_t)q * 64));
        for (int r = 0; r < rows; r++) {
            __m512i v = whole_quad_zmm(x, ldx, r, q, flip);
            acc0[r] = _mm512_dpbusd_epi32(acc0[r], v, w0);
            acc1[r] = _mm512_dpbusd_epi32(acc1[r], v, w1);
        }
    }
    for (; q < kquads; q++) {
        __m512i w0 = _mm512_loadu_si512((const void *)(panel + (size_t)q * 64)), w1 = _mm512_loadu_si512((const void *)(second + (size_t)q * 64));
        for (int r = 0; r < rows; r++) {
            __m512i v = _mm512_set1_epi32(quad_at(x + (size_t)r * ldx, k, q, flip));
            acc0[r] = _mm512_dpbusd_epi32(acc0[r], v, w0);
            acc1[r] = _mm512_dpbusd_epi32(acc1[r], v, w1);
        }
    }
}

/// `tile2_zmm` for 1-3 rows (a convolution's last columns: 1 on a 7 x 7 plane, 4 on 14 x 14): the k quads dealt
/// round-robin to PHASES accumulators per row and panel, summed at the end (int32 sums: the same in any order), so
/// 2 * rows * PHASES chains run instead of 2 * rows, which left the products waiting on vpdpbusd's latency.
#define SPLIT_PHASES 4
__attribute__((target(ZMM_TARGET), always_inline))
static inline void tile2_split_zmm(int rows, int phases, int kquads, int k, const uint8_t *x, size_t ldx, uint8_t flip, const uint8_t *panel,
                                   size_t panel_bytes, __m512i init0, __m512i init1, __m512i acc0[ZMM_ROWS], __m512i acc1[ZMM_ROWS]) {
    __m512i s0[SPLIT_PHASES][3], s1[SPLIT_PHASES][3];
    for (int h = 0; h < phases; h++)
        for (int r = 0; r < rows; r++) { s0[h][r] = h ? _mm512_setzero_si512() : init0; s1[h][r] = h ? _mm512_setzero_si512() : init1; }
    const uint8_t *second = panel + panel_bytes;
    int whole = k / 4, q = 0;
    for (; q + phases <= whole; q += phases)
        for (int h = 0; h < phases; h++) {
            __m512i w0 = _mm512_loadu_si512((const void *)(panel + (size_t)(q + h) * 64));
            __m512i w1 = _mm512_loadu_si512((const void *)(second + (size_t)(q + h) * 64));
            for (int r = 0; r < rows; r++) {
                int32_t four;
                memcpy(&four, x + (size_t)r * ldx + 4 * (q + h), 4);
                __m512i v = _mm512_set1_epi32(four);
                if (flip) v = _mm512_xor_si512(v, _mm512_set1_epi8((char)0x80));
                s0[h][r] = _mm512_dpbusd_epi32(s0[h][r], v, w0);
                s1[h][r] = _mm512_dpbusd_epi32(s1[h][r], v, w1);
            }
        }
    for (; q < kquads; q++) {
        __m512i w0 = _mm512_loadu_si512((const void *)(panel + (size_t)q * 64)), w1 = _mm512_loadu_si512((const void *)(second + (size_t)q * 64));
        for (int r = 0; r < rows; r++) {
            __m512i v = _mm512_set1_epi32(quad_at(x + (size_t)r * ldx, k, q, flip));
            s0[0][r] = _mm512_dpbusd_epi32(s0[0][r], v, w0);
            s1[0][r] = _mm512_dpbusd_epi32(s1[0][r], v, w1);
        }
    }
    for (int r = 0; r < rows; r++) {
        acc0[r] = s0[0][r];
        acc1[r] = s1[0][r];
        for (int h = 1; h < phases; h++) { acc0[r] = _mm512_add_epi32(acc0[r], s0[h][r]); acc1[r] = _mm512_add_epi32(acc1[r], s1[h][r]); }
    }
}

/// One row's 16 sums of a whole panel through the epilogue in one zmm (no dequantization): `store16_avx2`'s steps
/// lane for lane (int32 + zero point wrapping, then saturated to the byte type), so the same bytes.
__attribute__((target(ZMM_TARGET), always_inline))
static inline void store16_zmm(int kind, __m512i zp, __m512 scale, __m512 fbias, __m512i acc, void *o) {
    if (kind == OSPREY_QOUT_INT32) { _mm512_storeu_si512(o, acc); return; }
    __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), scale);
    if (kind == OSPREY_QOUT_F32) { _mm512_storeu_ps(o, _mm512_add_ps(f, fbias)); return; }
    __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(f), zp);
    __m128i b = kind == OSPREY_QOUT_U8 ? _mm512_cvtepi32_epi8(_mm512_min_epi32(_mm512_max_epi32(q, _mm512_setzero_si512()), _mm512_set1_epi32(255)))
                                       : _mm512_cvtsepi32_epi8(q);
    _mm_storeu_si128((__m128i *)o, b);
}

/// The sums of a tile's rows (`acc`, one panel at column c0, `cols` valid) stored through the epilogue.
__attribute__((target(ZMM_TARGET), always_inline))
static inline void store_tile_zmm(int rows, const __m512i acc[ZMM_ROWS], const osprey_qepilogue *ep, const osprey_qdequantize *dq,
                                  const float *scale, const float *fbias, const float *dbias, int cols, char *o, size_t row_bytes) {
    if (cols == PANEL && !dq) {
        __m512i zp = _mm512_set1_epi32(ep->zero_point);
        __m512 s = _mm512_load_ps(scale), fb = _mm512_load_ps(fbias);
        for (int r = 0; r < rows; r++) store16_zmm(ep->kind, zp, s, fb, acc[r], o + (size_t)r * row_bytes);
        return;
    }
    for (int r = 0; r < rows; r++)
        store16_avx2(ep->kind, ep->zero_point, scale, fbias, dq != NULL, dq ? dq->scale : 0, dq ? dq->zero : 0, dq && dq->bias, dbias,
                     _mm512_castsi512_si256(acc[r]), _mm512_extracti64x4_epi64(acc[r], 1), cols, o + (size_t)r * row_bytes);
}

__attribute__((target(ZMM_TARGET), always_inline))
static inline void rows_zmm(int m, int n, int k, const uint8_t *x, int ldx, uint8_t flip, const uint8_t *packed,
                            const osprey_qepilogue *ep, const osprey_qdequantize *dq, void *out, int ldo, int size) {
    int kquads = (k + 3) / 4;
    size_t panel_bytes = (size_t)kquads * 64;
    for (int j = 0; j * PANEL < n;) {
        int c0 = j * PANEL;
        const uint8_t *panel = packed + (size_t)j * panel_bytes;
        if (c0 + 2 * PANEL <= n) {
            // Two whole panels at once.
            _Alignas(64) int32_t bias[2 * PANEL] = {0};
            _Alignas(64) float scale[2 * PANEL] = {0}, fbias[2 * PANEL] = {0}, dbias[2 * PANEL] = {0};
            panel_parameters(ep, dq, c0, 2 * PANEL, bias, scale, fbias, dbias);
            __m512i b0 = _mm512_load_si512((const void *)bias), b1 = _mm512_load_si512((const void *)(bias + PANEL));
            for (int i = 0; i < m; i += ZMM_ROWS) {
                int rows = m - i < ZMM_ROWS ? m - i : ZMM_ROWS;
                const uint8_t *xr = x + (size_t)i * ldx;
                __m512i acc0[ZMM_ROWS], acc1[ZMM_ROWS];
                // Every row count its own body: a run-time count would keep the accumulators in memory.
                switch (rows) {
                case 8: tile2_zmm(8, kquads, k, xr, (size_t)ldx, flip, panel, panel_bytes, b0, b1, acc0, acc1); break;
                case 7: tile2_zmm(7, kquads, k, xr, (size_t)ldx, flip, panel, panel_bytes, b0, b1, acc0, acc1); break;
                case 6: tile2_zmm(6, kquads, k, xr, (size_t)ldx, flip, panel, panel_bytes, b0, b1, acc0, acc1); break;
                case 5: tile2_zmm(5, kquads, k, xr, (size_t)ldx, flip, panel, panel_bytes, b0, b1, acc0, acc1); break;
                case 4: tile2_zmm(4, kquads, k, xr, (size_t)ldx, flip, panel, panel_bytes, b0, b1, acc0, acc1); break;
                case 3: tile2_split_zmm(3, 2, kquads, k, xr, (size_t)ldx, flip, panel, panel_bytes, b0, b1, acc0, acc1); break;
                case 2: tile2_split_zmm(2, 2, kquads, k, xr, (size_t)ldx, flip, panel, panel_bytes, b0, b1, acc0, acc1); break;
                default: tile2_split_zmm(1, SPLIT_PHASES, kquads, k, xr, (size_t)ldx, flip, panel, panel_bytes, b0, b1, acc0, acc1); break;
                }
                char *o = (char *)out + ((size_t)i * ldo + c0) * size;
                store_tile_zmm(rows, acc0, ep, dq, scale, fbias, dbias, PANEL, o, (size_t)ldo * size);
                store_tile_zmm(rows, acc1, ep, dq, scale + PANEL, fbias + PANEL, dbias + PANEL, PANEL, o + PANEL * size, (size_t)ldo * size);
            }
            j += 2;
            continue;
        }
        int cols = n - c0 < PANEL ? n - c0 : PANEL;
        _Alignas(64) int32_t bias[PANEL] = {0};
        _Alignas(64) float scale[PANEL] = {0}, fbias[PANEL] = {0}, dbias[PANEL] = {0};
        panel_parameters(ep, dq, c0, cols, bias, scale, fbias, dbias);
        __m512i b = _mm512_load_si512((const void *)bias);
        for (int i = 0; i < m; i += ZMM_ROWS) {
            int rows = m - i < ZMM_ROWS ? m - i : ZMM_ROWS;
            const uint8_t *xr = x + (size_t)i * ldx;
            __m512i acc[ZMM_ROWS];
            switch (rows) {
            case 8: tile_zmm(8, kquads, k, xr, (size_t)ldx, flip, panel, b, acc); break;
            case 7: tile_zmm(7, kquads, k, xr, (size_t)ldx, flip, panel, b, acc); break;
            case 6: tile_zmm(6, kquads, k, xr, (size_t)ldx, flip, panel, b, acc); break;
            case 5: tile_zmm(5, kquads, k, xr, (size_t)ldx, flip, panel, b, acc); break;
            case 4: tile_zmm(4, kquads, k, xr, (size_t)ldx, flip, panel, b, acc); break;
            case 3: tile_zmm(3, kquads, k, xr, (size_t)ldx, flip, panel, b, acc); break;
            case 2: tile_zmm(2, kquads, k, xr, (size_t)ldx, flip, panel, b, acc); break;
            default: tile_zmm(1, kquads, k, xr, (size_t)ldx, flip, panel, b, acc); break;
            }
            store_tile_zmm(rows, acc, ep, dq, scale, fbias, dbias, cols, (char *)out + ((size_t)i * ldo + c0) * size, (size_t)ldo * size);
        }
        j += 1;
    }
}

__attribute__((target(ZMM_TARGET)))
static void gemv_avx512vnni(int m, int n, int k, const uint8_t *x, int ldx, uint8_t flip, const uint8_t *packed,
                            const osprey_qepilogue *ep, const osprey_qdequantize *dq, void *out, int ldo, int size) {
    if (flip) rows_zmm(m, n, k, x, ldx, 0x80, packed, ep, dq, out, ldo, size);
    else rows_zmm(m, n, k, x, ldx, 0, packed, ep, dq, out, ldo, size);
}
#endif

/// Both entry points: `dq` NULL stores the epilogue's kind, else (8-bit kinds) the dequantized floats.
/// `full_range`: the weights may leave [-64, 64], which only the VNNI and portable bodies multiply exactly.
static void gemm_rows(int m, int n, int k, const uint8_t *x, int ldx, int flip, int full_range, const uint8_t *packed,
                      const osprey_qepilogue *ep, const osprey_qdequantize *dq, void *out, int ldo) {
    if (m <= 0 || n <= 0) return;
    int size = (ep->kind == OSPREY_QOUT_U8 || ep->kind == OSPREY_QOUT_S8) && !dq ? 1 : 4;
    uint8_t f = flip ? 0x80 : 0;
#if defined(__x86_64__)
    switch (osprey_qkernels_u8s8_path(full_range)) {
    case OSPREY_QPATH_AVX512VNNI: gemv_avx512vnni(m, n, k, x, ldx, f, packed, ep, dq, out, ldo, size); return;
    case OSPREY_QPATH_AVXVNNI: gemv_avxvnni(m, n, k, x, ldx, f, packed, ep, dq, out, ldo, size); return;
    case OSPREY_QPATH_AVX2: gemv_avx2(m, n, k, x, ldx, f, packed, ep, dq, out, ldo, size); return;
    default: break;
    }
#endif
    gemv_portable(m, n, k, x, ldx, f, packed, ep, dq, out, ldo, size);
}

void osprey_qgemv_u8s8(int m, int n, int k, const uint8_t *x, int ldx, int flip, int full_range, const uint8_t *packed,
                       const osprey_qepilogue *ep, void *out, int ldo) {
    gemm_rows(m, n, k, x, ldx, flip, full_range, packed, ep, NULL, out, ldo);
}

void osprey_qgemv_u8s8_dequantized(int m, int n, int k, const uint8_t *x, int ldx, int flip, int full_range, const uint8_t *packed,
                                   const osprey_qepilogue *ep, const osprey_qdequantize *dq, float *out, int ldo) {
    if (ep->kind != OSPREY_QOUT_U8 && ep->kind != OSPREY_QOUT_S8) return;
    gemm_rows(m, n, k, x, ldx, flip, full_range, packed, ep, dq, out, ldo);
}
