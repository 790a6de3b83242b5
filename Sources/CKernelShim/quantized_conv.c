// Integer kernels of the quantized operators: u8 x s8 and int16 GEMMs with a fused requantization epilogue, byte
// im2col and panel packing, a depthwise kernel, and QLinearAdd / QLinearMul. Every kernel has an AVX2 body chosen at
// run time (cpuid) and a portable body; the GEMMs also have AVX-VNNI and AVX512-VNNI bodies (`osprey_qkernels_path`),
// and on the AVX512-VNNI path the depthwise planes take zmm bodies (quantized_depthwise_zmm.c, _channels.c).
// The portable bodies are the reference the tests compare against.
//
// Requantization rounds with the current rounding mode (round half to even by default), as onnxruntime's
// MlasRequantizeOutput does (cvtps2dq / nearbyintf): float(acc + bias) * scale, + zero point, saturated.
#include "include/quantized_conv.h"
#include "include/quantized_gemm.h"
#include <math.h>
#include <string.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#define TILE_ROWS 6
#define PANEL 16

// AVX2 alone picks the integer bodies; the QLinearAdd body needs FMA as well (onnxruntime's fused roundings).
static int cpu_has_avx2_fma(int with_fma) {
#if defined(__x86_64__)
    static int cached[2] = {-1, -1};
    if (cached[with_fma] < 0) {
        __builtin_cpu_init();
        cached[with_fma] = __builtin_cpu_supports("avx2") && (!with_fma || __builtin_cpu_supports("fma")) ? 1 : 0;
    }
    return cached[with_fma];
#else
    (void)with_fma;
    return 0;
#endif
}

static int cpu_has_avx2(void) { return cpu_has_avx2_fma(0); }

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

/// Two full rows (r, r + 1) of 16 sums (bias included) requantized to 8 bits, to o and o + ldo: the pair shares
/// the packs, the zero point is added after the first (saturating int16 add: same result, as every sum beyond
/// int16 saturates to the same 8-bit bound either way), and one vpermd puts each row's bytes in order.
__attribute__((target("avx2"), always_inline))
static inline void requantize_pair_avx2(const osprey_qepilogue *ep, int r, const __m256i a[2], const __m256i b[2], uint8_t *o, int ldo) {
    __m256 sa = _mm256_set1_ps(ep->scale[r]), sb = _mm256_set1_ps(ep->scale[r + 1]);
    __m256i a0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_cvtepi32_ps(a[0]), sa)), a1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_cvtepi32_ps(a[1]), sa));
    __m256i b0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_cvtepi32_ps(b[0]), sb)), b1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_cvtepi32_ps(b[1]), sb));
    __m256i zp = _mm256_set1_epi16((short)ep->zero_point);
    // Lane halves: pa = a columns [0-3, 8-11 | 4-7, 12-15] as int16, likewise pb.
    __m256i pa = _mm256_adds_epi16(_mm256_packs_epi32(a0, a1), zp), pb = _mm256_adds_epi16(_mm256_packs_epi32(b0, b1), zp);
    // Bytes as 32-bit units: [a0-3, a8-11, b0-3, b8-11 | a4-7, a12-15, b4-7, b12-15]: units 0 4 1 5 are row a.
    __m256i q = ep->kind == OSPREY_QOUT_U8 ? _mm256_packus_epi16(pa, pb) : _mm256_packs_epi16(pa, pb);
    q = _mm256_permutevar8x32_epi32(q, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm_storeu_si128((__m128i *)o, _mm256_castsi256_si128(q));
    _mm_storeu_si128((__m128i *)(o + ldo), _mm256_extracti128_si256(q, 1));
}

/// What every vector panel body stores its tiles through: `ep` without its bias, as the tiles' sums start from it.
static inline osprey_qepilogue tile_epilogue(const osprey_qepilogue *ep) {
    osprey_qepilogue e = *ep;
    e.bias = NULL;
    return e;
}

/// 1 when the outputs are 8-bit and not transposed: rows of a full panel then requantize several at a time.
static inline int requantizes_rows(const osprey_qepilogue *ep) {
    return !ep->transposed && (ep->kind == OSPREY_QOUT_U8 || ep->kind == OSPREY_QOUT_S8);
}

/// The row tile of a panel body from row i of m: its row count (at most `most`), its first row of A and its bias.
typedef struct {
    int rows;
    const uint8_t *a;
    const int32_t *bias;
} row_tile;

static inline row_tile row_tile_at(const osprey_qepilogue *ep, const uint8_t *a, size_t lda, int m, int i, int most) {
    row_tile t = {m - i < most ? m - i : most, a + (size_t)i * lda, ep->bias ? ep->bias + i : NULL};
    return t;
}

// The ymm bodies (quantized_conv_body.h): AVX2 and AVX-VNNI (VEX vpdpbusd / vpdpwssd).
#define QBODY(name) name##_avx2
#define QBODY_TARGET "avx2"
#define QBODY_DOT4(acc, u, s) _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), ones))
#define QBODY_DOT2(acc, a, b) _mm256_add_epi32(acc, _mm256_madd_epi16(a, b))
#include "quantized_conv_body.h"
#undef QBODY
#undef QBODY_TARGET
#undef QBODY_DOT4
#undef QBODY_DOT2
#define QBODY(name) name##_avxvnni
#define QBODY_TARGET "avx2,avxvnni"
#define QBODY_DOT4(acc, u, s) _mm256_dpbusd_avx_epi32(acc, u, s)
#define QBODY_DOT2(acc, a, b) _mm256_dpwssd_avx_epi32(acc, a, b)
#include "quantized_conv_body.h"
#undef QBODY
#undef QBODY_TARGET
#undef QBODY_DOT4
#undef QBODY_DOT2

// AVX512-VNNI: a panel's k step (16 columns x 4 bytes) is one zmm, so each row of A takes one vpdpbusd (or vpdpwssd
// for int16 pairs) per step, in tiles of 8 rows; the epilogue takes each zmm as its two ymm halves.
#define ZMM_ROWS 8
#define ZMM_TARGET "avx2,avx512f,avx512bw,avx512vl,avx512vnni"

__attribute__((target(ZMM_TARGET), always_inline))
static inline void gemm_tile_zmm(int wide, int rows, int steps, const uint8_t *a, size_t lda, const uint8_t *panel, const int32_t *bias,
                                 __m512i acc[ZMM_ROWS]) {
    for (int r = 0; r < rows; r++) acc[r] = bias ? _mm512_set1_epi32(bias[r]) : _mm512_setzero_si512();
    const uint8_t *b = panel;
    for (int q = 0; q < steps; q++, b += 64) {
        __m512i p = _mm512_loadu_si512((const void *)b);
        for (int r = 0; r < rows; r++) {
            int32_t four;
            memcpy(&four, a + (size_t)r * lda + 4 * q, sizeof four);
            __m512i x = _mm512_set1_epi32(four);
            acc[r] = wide ? _mm512_dpwssd_epi32(acc[r], x, p) : _mm512_dpbusd_epi32(acc[r], p, x);
        }
    }
}

/// Four full rows (r to r + 3) of 16 sums (bias included) requantized to 8 bits, to o, o + ldo, ...: the epilogue of
/// `requantize_pair_avx2` on zmm (the same saturating steps, so the same bytes), with one vpermd putting each row's
/// 16 bytes into its own 128-bit lane.
__attribute__((target(ZMM_TARGET), always_inline))
static inline void requantize_quad_zmm(const osprey_qepilogue *ep, int r, const __m512i acc[4], uint8_t *o, int ldo) {
    __m512i q[4];
    for (int i = 0; i < 4; i++) q[i] = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_cvtepi32_ps(acc[i]), _mm512_set1_ps(ep->scale[r + i])));
    __m512i zp = _mm512_set1_epi16((short)ep->zero_point);
    __m512i p01 = _mm512_adds_epi16(_mm512_packs_epi32(q[0], q[1]), zp), p23 = _mm512_adds_epi16(_mm512_packs_epi32(q[2], q[3]), zp);
    // 128-bit lane L holds columns 4L..4L+3 of rows 0, 1, 2, 3 as 32-bit units 4L..4L+3.
    __m512i b = ep->kind == OSPREY_QOUT_U8 ? _mm512_packus_epi16(p01, p23) : _mm512_packs_epi16(p01, p23);
    b = _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), b);
    _mm_storeu_si128((__m128i *)o, _mm512_castsi512_si128(b));
    _mm_storeu_si128((__m128i *)(o + ldo), _mm512_extracti32x4_epi32(b, 1));
    _mm_storeu_si128((__m128i *)(o + 2 * (size_t)ldo), _mm512_extracti32x4_epi32(b, 2));
    _mm_storeu_si128((__m128i *)(o + 3 * (size_t)ldo), _mm512_extracti32x4_epi32(b, 3));
}

__attribute__((target(ZMM_TARGET)))
static void panel_avx512vnni(int wide, int m, int steps, const uint8_t *a, size_t lda, const uint8_t *panel, int c0, int cols,
                             const osprey_qepilogue *ep, void *out, int ldo) {
    const osprey_qepilogue e = tile_epilogue(ep);
    int bytes = cols == PANEL && requantizes_rows(ep);
    for (int i = 0; i < m; i += ZMM_ROWS) {
        const row_tile t = row_tile_at(ep, a, lda, m, i, ZMM_ROWS);
        __m512i acc[ZMM_ROWS];
        // Every row count its own body: a run-time count would keep the accumulators in memory.
#define TILE_BODIES(W)                                                                      \
        switch (t.rows) {                                                                   \
        case 8: gemm_tile_zmm(W, 8, steps, t.a, lda, panel, t.bias, acc); break;            \
        case 7: gemm_tile_zmm(W, 7, steps, t.a, lda, panel, t.bias, acc); break;            \
        case 6: gemm_tile_zmm(W, 6, steps, t.a, lda, panel, t.bias, acc); break;            \
        case 5: gemm_tile_zmm(W, 5, steps, t.a, lda, panel, t.bias, acc); break;            \
        case 4: gemm_tile_zmm(W, 4, steps, t.a, lda, panel, t.bias, acc); break;            \
        case 3: gemm_tile_zmm(W, 3, steps, t.a, lda, panel, t.bias, acc); break;            \
        case 2: gemm_tile_zmm(W, 2, steps, t.a, lda, panel, t.bias, acc); break;            \
        default: gemm_tile_zmm(W, 1, steps, t.a, lda, panel, t.bias, acc); break;           \
        }
        if (wide) { TILE_BODIES(1) } else { TILE_BODIES(0) }
#undef TILE_BODIES
        int r = 0;
        if (bytes)
            for (; r + 3 < t.rows; r += 4) requantize_quad_zmm(&e, i + r, acc + r, (uint8_t *)out + (size_t)(i + r) * ldo + c0, ldo);
        for (; r < t.rows; r++) store_row_avx2(&e, i + r, c0, cols, _mm512_castsi512_si256(acc[r]), _mm512_extracti64x4_epi64(acc[r], 1), out, ldo);
    }
}

/// `gemm_tile_zmm` over two panels at once: each broadcast quad of A feeds two vpdpbusd (16 accumulators), so a k
/// step loads 2 panel vectors and `rows` quads for 2 * rows products instead of 1 + rows for rows.
__attribute__((target(ZMM_TARGET), always_inline))
static inline void gemm_tile2_zmm(int wide, int rows, int steps, const uint8_t *a, size_t lda, const uint8_t *p0, const uint8_t *p1,
                                  const int32_t *bias, __m512i acc[2][ZMM_ROWS]) {
    for (int r = 0; r < rows; r++) acc[0][r] = acc[1][r] = bias ? _mm512_set1_epi32(bias[r]) : _mm512_setzero_si512();
    for (int q = 0; q < steps; q++) {
        __m512i b0 = _mm512_loadu_si512((const void *)(p0 + (size_t)q * 64)), b1 = _mm512_loadu_si512((const void *)(p1 + (size_t)q * 64));
        for (int r = 0; r < rows; r++) {
            int32_t four;
            memcpy(&four, a + (size_t)r * lda + 4 * q, sizeof four);
            __m512i x = _mm512_set1_epi32(four);
            acc[0][r] = wide ? _mm512_dpwssd_epi32(acc[0][r], x, b0) : _mm512_dpbusd_epi32(acc[0][r], b0, x);
            acc[1][r] = wide ? _mm512_dpwssd_epi32(acc[1][r], x, b1) : _mm512_dpbusd_epi32(acc[1][r], b1, x);
        }
    }
}

/// `panel_avx512vnni` for two consecutive panels (columns c0.. and c0 + 16.., the second `cols1` wide).
__attribute__((target(ZMM_TARGET)))
static void panel2_avx512vnni(int wide, int m, int steps, const uint8_t *a, size_t lda, const uint8_t *panel, int c0, int cols1,
                              const osprey_qepilogue *ep, void *out, int ldo) {
    osprey_qepilogue e = *ep;
    e.bias = NULL;  // added by the tile
    int q8 = !ep->transposed && (ep->kind == OSPREY_QOUT_U8 || ep->kind == OSPREY_QOUT_S8);
    const uint8_t *p1 = panel + (size_t)steps * 64;
    for (int i = 0; i < m; i += ZMM_ROWS) {
        int rows = m - i < ZMM_ROWS ? m - i : ZMM_ROWS;
        const uint8_t *rows_a = a + (size_t)i * lda;
        const int32_t *bias = ep->bias ? ep->bias + i : NULL;
        // A whole u8 x s8 tile of 8-bit rows requantizes in the body that summed it, with constant indices, so its 16
        // accumulators stay in registers (through the switch below they go to the stack and back).
        if (rows == ZMM_ROWS && q8 && cols1 == PANEL && !wide) {
            __m512i sums[2][ZMM_ROWS];  // its own array: one the switch also writes stays in memory
            gemm_tile2_zmm(0, ZMM_ROWS, steps, rows_a, lda, panel, p1, bias, sums);
            uint8_t *o = (uint8_t *)out + (size_t)i * ldo + c0;
            requantize_quad_zmm(&e, i, sums[0], o, ldo);
            requantize_quad_zmm(&e, i + 4, sums[0] + 4, o + 4 * (size_t)ldo, ldo);
            requantize_quad_zmm(&e, i, sums[1], o + PANEL, ldo);
            requantize_quad_zmm(&e, i + 4, sums[1] + 4, o + 4 * (size_t)ldo + PANEL, ldo);
            continue;
        }
        __m512i acc[2][ZMM_ROWS];
#define TILE_BODIES(W)                                                                          \
        switch (rows) {                                                                         \
        case 8: gemm_tile2_zmm(W, 8, steps, rows_a, lda, panel, p1, bias, acc); break;          \
        case 7: gemm_tile2_zmm(W, 7, steps, rows_a, lda, panel, p1, bias, acc); break;          \
        case 6: gemm_tile2_zmm(W, 6, steps, rows_a, lda, panel, p1, bias, acc); break;          \
        case 5: gemm_tile2_zmm(W, 5, steps, rows_a, lda, panel, p1, bias, acc); break;          \
        case 4: gemm_tile2_zmm(W, 4, steps, rows_a, lda, panel, p1, bias, acc); break;          \
        case 3: gemm_tile2_zmm(W, 3, steps, rows_a, lda, panel, p1, bias, acc); break;          \
        case 2: gemm_tile2_zmm(W, 2, steps, rows_a, lda, panel, p1, bias, acc); break;          \
        default: gemm_tile2_zmm(W, 1, steps, rows_a, lda, panel, p1, bias, acc); break;         \
        }
        if (wide) { TILE_BODIES(1) } else { TILE_BODIES(0) }
#undef TILE_BODIES
        for (int p = 0; p < 2; p++) {
            int cols = p ? cols1 : PANEL, c = c0 + p * PANEL, r = 0;
            if (q8 && cols == PANEL)
                for (; r + 3 < rows; r += 4) requantize_quad_zmm(&e, i + r, acc[p] + r, (uint8_t *)out + (size_t)(i + r) * ldo + c, ldo);
            for (; r < rows; r++)
                store_row_avx2(&e, i + r, c, cols, _mm512_castsi512_si256(acc[p][r]), _mm512_extracti64x4_epi64(acc[p][r], 1), out, ldo);
        }
    }
}
#endif

// ---- portable GEMM bodies (the reference twins of the AVX2 ones) ----

/// `panel_avx2` one row at a time: u8 quads x int8 (`wide` 0) or int16 pairs (`wide` 1).
static void panel_portable(int wide, int m, int steps, const uint8_t *a, size_t lda, const uint8_t *panel, int c0, int cols,
                           const osprey_qepilogue *ep, void *out, int ldo) {
    for (int i = 0; i < m; i++) {
        int32_t acc[PANEL] = {0};
        const uint8_t *row = a + (size_t)i * lda;
        for (int q = 0; q < steps; q++) {
            if (wide) {
                const int16_t *b = (const int16_t *)panel + (size_t)q * 2 * PANEL, *r16 = (const int16_t *)row;
                for (int c = 0; c < PANEL; c++) acc[c] += (int32_t)r16[2 * q] * b[2 * c] + (int32_t)r16[2 * q + 1] * b[2 * c + 1];
            } else {
                const uint8_t *b = panel + (size_t)q * 4 * PANEL;
                const int8_t *r8 = (const int8_t *)row;
                for (int c = 0; c < PANEL; c++)
                    for (int t = 0; t < 4; t++) acc[c] += (int32_t)b[4 * c + t] * r8[4 * q + t];
            }
        }
        store_row_scalar(ep, i, c0, cols, acc, out, ldo);
    }
}

/// 1 forces the portable bodies (tests compare the two); 0 picks by the CPU.
static int force_portable = 0;
/// A path forced by `osprey_qkernels_force_path`, or -1.
static int forced_path = -1;
void osprey_qkernels_force_portable(int on) { force_portable = on; }
int osprey_qkernels_portable_forced(void) { return force_portable; }

/// 1 when the CPU (and the OS's saved register state) can run `path`.
static int cpu_supports_path(int path) {
    switch (path) {
    case OSPREY_QPATH_PORTABLE: return 1;
    case OSPREY_QPATH_AVX2: return cpu_has_avx2();
#if defined(__x86_64__)
    case OSPREY_QPATH_AVXVNNI: {
        // AVX-VNNI: CPUID leaf 7 sub-leaf 1, EAX bit 4 (VEX-encoded, ymm state as AVX2's).
        unsigned a = 0, b = 0, c = 0, d = 0;
        return cpu_has_avx2() && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4));
    }
    case OSPREY_QPATH_AVX512VNNI:
        __builtin_cpu_init();
        return cpu_has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
#endif
    default: return 0;
    }
}

/// The CPU's best path, found once: AVX512-VNNI (zmm) first, then AVX-VNNI (ymm), then AVX2.
static int cpu_path(void) {
    static int cached = -1;
    if (cached < 0) {
        int p = OSPREY_QPATH_PORTABLE;
        if (cpu_supports_path(OSPREY_QPATH_AVX512VNNI)) p = OSPREY_QPATH_AVX512VNNI;
        else if (cpu_supports_path(OSPREY_QPATH_AVXVNNI)) p = OSPREY_QPATH_AVXVNNI;
        else if (cpu_supports_path(OSPREY_QPATH_AVX2)) p = OSPREY_QPATH_AVX2;
        cached = p;
    }
    return cached;
}

int osprey_qkernels_path(void) {
    if (force_portable) return OSPREY_QPATH_PORTABLE;
    return forced_path >= 0 ? forced_path : cpu_path();
}

int osprey_qkernels_u8s8_path(int full_range) {
    int path = osprey_qkernels_path();
    return full_range && path == OSPREY_QPATH_AVX2 ? OSPREY_QPATH_PORTABLE : path;
}

int osprey_qkernels_exact_int8(void) { return osprey_qkernels_path() >= OSPREY_QPATH_AVXVNNI; }

int osprey_qkernels_force_path(int path) {
    // The portable path forces every kernel's portable body, as `osprey_qkernels_force_portable(1)` does.
    if (path < 0) { forced_path = -1; force_portable = 0; }
    else if (cpu_supports_path(path)) { forced_path = path; force_portable = path == OSPREY_QPATH_PORTABLE; }
    return osprey_qkernels_path();
}

void osprey_qgemm_packed(int wide, int m, int n, int steps, const void *a, int lda, const void *packed_b, const osprey_qepilogue *ep,
                         void *out, int ldo) {
    if (m <= 0 || n <= 0) return;
    void (*body)(int, int, int, const uint8_t *, size_t, const uint8_t *, int, int, const osprey_qepilogue *, void *, int) = panel_portable;
    // 2: full-range int8 A on the u8 x s8 bodies (exact on VNNI and portable only); the s16 product (1) is exact everywhere.
    int full_range = wide == 2;
    if (full_range) wide = 0;
#if defined(__x86_64__)
    switch (wide ? osprey_qkernels_path() : osprey_qkernels_u8s8_path(full_range)) {
    case OSPREY_QPATH_AVX512VNNI: body = panel_avx512vnni; break;
    case OSPREY_QPATH_AVXVNNI: body = panel_avxvnni; break;
    case OSPREY_QPATH_AVX2: body = panel_avx2; break;
    default: break;
    }
#endif
    int j = 0;
#if defined(__x86_64__)
    // The zmm body takes panels two at a time while two remain.
    if (body == panel_avx512vnni)
        for (; (j + 1) * PANEL < n; j += 2) {
            int cols1 = n - (j + 1) * PANEL < PANEL ? n - (j + 1) * PANEL : PANEL;
            panel2_avx512vnni(wide, m, steps, a, (size_t)lda, (const uint8_t *)packed_b + (size_t)j * steps * 64, j * PANEL, cols1, ep, out, ldo);
        }
#endif
    for (; j * PANEL < n; j++) {
        int cols = n - j * PANEL < PANEL ? n - j * PANEL : PANEL;
        body(wide, m, steps, a, (size_t)lda, (const uint8_t *)packed_b + (size_t)j * steps * 64, j * PANEL, cols, ep, out, ldo);
    }
}

void osprey_qgemm_u8s8(int m, int n, int kquads, const int8_t *a, int lda, const uint8_t *packed_b, const osprey_qepilogue *ep, void *out, int ldo) {
    osprey_qgemm_packed(0, m, n, kquads, a, lda, packed_b, ep, out, ldo);
}

void osprey_qgemm_s16_epilogue(int m, int n, int kpairs, const int16_t *a, int lda, const int16_t *packed_b, const osprey_qepilogue *ep, void *out, int ldo) {
    osprey_qgemm_packed(1, m, n, kpairs, a, lda * (int)sizeof(int16_t), packed_b, ep, out, ldo);
}

// ---- packing ----

#if defined(__x86_64__)
/// One full quad of a panel: 16 columns of 4 rows interleaved into [r0 r1 r2 r3] per column (byte, then word unpacks).
__attribute__((target("avx2")))
static void pack_quad16_avx2(const uint8_t *const src[4], uint8_t x, uint8_t *dst) {
    __m128i f = _mm_set1_epi8((char)x);
    __m128i r0 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)src[0]), f), r1 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)src[1]), f);
    __m128i r2 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)src[2]), f), r3 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)src[3]), f);
    __m128i a = _mm_unpacklo_epi8(r0, r1), b = _mm_unpackhi_epi8(r0, r1), c = _mm_unpacklo_epi8(r2, r3), d = _mm_unpackhi_epi8(r2, r3);
    _mm_storeu_si128((__m128i *)dst, _mm_unpacklo_epi16(a, c));
    _mm_storeu_si128((__m128i *)(dst + 16), _mm_unpackhi_epi16(a, c));
    _mm_storeu_si128((__m128i *)(dst + 32), _mm_unpacklo_epi16(b, d));
    _mm_storeu_si128((__m128i *)(dst + 48), _mm_unpackhi_epi16(b, d));
}
#endif

#if defined(__x86_64__)
/// Two full panels (32 columns from column c0) of `quads` full quads: per quad 4 rows of 32 bytes XOR `flip`,
/// interleaved per 128-bit lane (lane 0: the first panel, lane 1: the second), each panel's 64 bytes stored in order.
__attribute__((target("avx2")))
static void pack_two_panels_avx2(int quads, const uint8_t *b, int ldb, uint8_t flip, uint8_t *first, uint8_t *second) {
    __m256i f = _mm256_set1_epi8((char)flip);
    for (int q = 0; q < quads; q++) {
        const uint8_t *r = b + (size_t)4 * q * ldb;
        __m256i r0 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)r), f);
        __m256i r1 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(r + ldb)), f);
        __m256i r2 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(r + 2 * (size_t)ldb)), f);
        __m256i r3 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(r + 3 * (size_t)ldb)), f);
        __m256i a = _mm256_unpacklo_epi8(r0, r1), bb = _mm256_unpackhi_epi8(r0, r1);
        __m256i c = _mm256_unpacklo_epi8(r2, r3), d = _mm256_unpackhi_epi8(r2, r3);
        __m256i x0 = _mm256_unpacklo_epi16(a, c), x1 = _mm256_unpackhi_epi16(a, c);
        __m256i x2 = _mm256_unpacklo_epi16(bb, d), x3 = _mm256_unpackhi_epi16(bb, d);
        uint8_t *o = first + (size_t)q * 64, *p = second + (size_t)q * 64;
        _mm256_storeu_si256((__m256i *)o, _mm256_permute2x128_si256(x0, x1, 0x20));
        _mm256_storeu_si256((__m256i *)(o + 32), _mm256_permute2x128_si256(x2, x3, 0x20));
        _mm256_storeu_si256((__m256i *)p, _mm256_permute2x128_si256(x0, x1, 0x31));
        _mm256_storeu_si256((__m256i *)(p + 32), _mm256_permute2x128_si256(x2, x3, 0x31));
    }
}
#endif

#if defined(__x86_64__)
/// One full pair of rows of an int16 panel: 16 columns of (row 0, row 1) minus the zero point, widened and
/// interleaved (vpunpck{l,h}wd on each half).
__attribute__((target("avx2")))
static void pack_pair16_avx2(const uint8_t *r0, const uint8_t *r1, int is_signed, int32_t zero, int16_t *dst) {
    __m128i z = _mm_set1_epi16((short)zero);
    for (int half = 0; half < 2; half++) {
        __m128i b0 = _mm_loadl_epi64((const __m128i *)(r0 + 8 * half)), b1 = _mm_loadl_epi64((const __m128i *)(r1 + 8 * half));
        __m128i a = _mm_sub_epi16(is_signed ? _mm_cvtepi8_epi16(b0) : _mm_cvtepu8_epi16(b0), z);
        __m128i c = _mm_sub_epi16(is_signed ? _mm_cvtepi8_epi16(b1) : _mm_cvtepu8_epi16(b1), z);
        _mm_storeu_si128((__m128i *)(dst + 16 * half), _mm_unpacklo_epi16(a, c));
        _mm_storeu_si128((__m128i *)(dst + 16 * half + 8), _mm_unpackhi_epi16(a, c));
    }
}
#endif

#if defined(__x86_64__)
/// Every full pair of rows of one full int16 panel (16 columns from b): rows 2p and 2p + 1 widened, minus `zero`,
/// interleaved into the panel's 64 bytes per pair (in-lane vpunpck{l,h}wd, then the lanes put in column order).
__attribute__((target("avx2")))
static void pack_pairs16_avx2(int pairs, const uint8_t *b, int ldb, int is_signed, int32_t zero, int16_t *dst) {
    __m256i z = _mm256_set1_epi16((short)zero);
    for (int p = 0; p < pairs; p++, dst += 32) {
        __m128i b0 = _mm_loadu_si128((const __m128i *)(b + (size_t)2 * p * ldb)), b1 = _mm_loadu_si128((const __m128i *)(b + (size_t)(2 * p + 1) * ldb));
        __m256i a = _mm256_sub_epi16(is_signed ? _mm256_cvtepi8_epi16(b0) : _mm256_cvtepu8_epi16(b0), z);
        __m256i c = _mm256_sub_epi16(is_signed ? _mm256_cvtepi8_epi16(b1) : _mm256_cvtepu8_epi16(b1), z);
        __m256i lo = _mm256_unpacklo_epi16(a, c), hi = _mm256_unpackhi_epi16(a, c);
        _mm256_storeu_si256((__m256i *)dst, _mm256_permute2x128_si256(lo, hi, 0x20));
        _mm256_storeu_si256((__m256i *)(dst + 16), _mm256_permute2x128_si256(lo, hi, 0x31));
    }
}
#endif

/// The panel loop of both packings: per 16-column panel and k step, 64 bytes, from 4 rows of bytes (XOR `flip`: an
/// int8 operand read as uint8 + 128) or (`wide`) 2 rows widened to int16 minus `zero` (`is_signed`: int8 values).
/// Full steps take the AVX2 bodies; partial ones (and every step when portable) the scalar loop, zero past K and N.
static void pack_panels(int wide, int k, int n, const uint8_t *b, int ldb, uint8_t flip, int is_signed, int32_t zero, uint8_t *packed) {
    int per = wide ? 2 : 4, steps = (k + per - 1) / per, panels = (n + PANEL - 1) / PANEL;
    int vector = 0;
#if defined(__x86_64__)
    vector = !force_portable && cpu_has_avx2();
#endif
    // Panels whose full steps the whole-panel bodies packed: pairs of full panels (bytes), every full panel (int16).
    int done = 0;
#if defined(__x86_64__)
    if (vector && !wide)
        for (; done + 2 <= n / PANEL; done += 2)
            pack_two_panels_avx2(k / 4, b + (size_t)done * PANEL, ldb, flip, packed + (size_t)done * steps * 64,
                                 packed + (size_t)(done + 1) * steps * 64);
    if (vector && wide)
        for (; done < n / PANEL; done++)
            pack_pairs16_avx2(k / 2, b + (size_t)done * PANEL, ldb, is_signed, zero, (int16_t *)(packed + (size_t)done * steps * 64));
#endif
    for (int j = 0; j < panels; j++) {
        int cols = n - j * PANEL < PANEL ? n - j * PANEL : PANEL;
        for (int q = j < done ? k / per : 0; q < steps; q++) {
            uint8_t *dst = packed + ((size_t)j * steps + q) * 64;
            const uint8_t *src[4] = {NULL, NULL, NULL, NULL};
            for (int t = 0; t < per; t++) src[t] = per * q + t < k ? b + (size_t)(per * q + t) * ldb + j * PANEL : NULL;
#if defined(__x86_64__)
            if (vector && cols == PANEL && src[per - 1]) {
                if (wide) pack_pair16_avx2(src[0], src[1], is_signed, zero, (int16_t *)dst);
                else pack_quad16_avx2(src, flip, dst);
                continue;
            }
#endif
            memset(dst, 0, 64);
            for (int t = 0; t < per; t++) {
                if (!src[t]) continue;
                if (wide)
                    for (int c = 0; c < cols; c++)
                        ((int16_t *)dst)[2 * c + t] = (int16_t)((is_signed ? (int32_t)(int8_t)src[t][c] : (int32_t)src[t][c]) - zero);
                else
                    for (int c = 0; c < cols; c++) dst[4 * c + t] = src[t][c] ^ flip;
            }
        }
    }
}

void osprey_qpack_u8(int k, int n, const uint8_t *b, int ldb, int flip, uint8_t *packed) {
    pack_panels(0, k, n, b, ldb, flip ? 0x80 : 0, 0, 0, packed);
}

void osprey_qpack_u8_rows(int k, int n, const uint8_t *a, int lda, int flip, uint8_t *packed) {
    int kquads = (k + 3) / 4, panels = (n + PANEL - 1) / PANEL;
    uint8_t x = flip ? 0x80 : 0;
    memset(packed, 0, (size_t)panels * kquads * 4 * PANEL);
    for (int c = 0; c < n; c++) {
        const uint8_t *row = a + (size_t)c * lda;
        uint8_t *dst = packed + (size_t)(c / PANEL) * kquads * 4 * PANEL + 4 * (c % PANEL);
        uint32_t x4 = x * 0x01010101u;
        int whole = k / 4;
        // Whole quads as one 32-bit move each, the last partial quad bytewise.
        for (int q = 0; q < whole; q++) {
            uint32_t v;
            memcpy(&v, row + 4 * q, 4);
            v ^= x4;
            memcpy(dst + (size_t)q * 4 * PANEL, &v, 4);
        }
        for (int t = 4 * whole; t < k; t++) dst[(size_t)whole * 4 * PANEL + (t - 4 * whole)] = row[t] ^ x;
    }
}

void osprey_qpack_s16(int k, int n, const void *b, int ldb, int is_signed, int32_t zero, int16_t *packed) {
    pack_panels(1, k, n, b, ldb, 0, is_signed, zero, (uint8_t *)packed);
}

void osprey_im2col_u8(const uint8_t *x, int c, int h, int w, int kh, int kw, int sh, int sw, int dh, int dw,
                      int pt, int pl, int oh, int ow, uint8_t pad, uint8_t *out) {
    osprey_im2col_u8_rows(x, c, h, w, kh, kw, sh, sw, dh, dw, pt, pl, oh, ow, 0, oh, pad, out);
}

void osprey_im2col_u8_rows(const uint8_t *x, int c, int h, int w, int kh, int kw, int sh, int sw, int dh, int dw,
                           int pt, int pl, int oh, int ow, int oy0, int oy1, uint8_t pad, uint8_t *out) {
    size_t columns = (size_t)oh * ow;
    for (int ic = 0; ic < c; ic++) {
        const uint8_t *plane = x + (size_t)ic * h * w;
        for (int ky = 0; ky < kh; ky++) {
            for (int kx = 0; kx < kw; kx++) {
                uint8_t *row = out + ((size_t)(ic * kh + ky) * kw + kx) * columns;
                for (int oy = oy0; oy < oy1; oy++) {
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
                        int ox = 0;
#if defined(__x86_64__)
                        if (sw == 2) {
                            // Padding on the left, then 16 outputs from 32 bytes wholly inside the row (even bytes
                            // kept: SSE2, every x86-64 has it), then the scalar tail.
                            for (; ox < ow && ox * 2 + x0 < 0; ox++) dst[ox] = pad;
                            const __m128i even = _mm_set1_epi16(0xFF);
                            for (; ox + 16 <= ow && ox * 2 + x0 + 32 <= w; ox += 16) {
                                const uint8_t *p = src + ox * 2 + x0;
                                __m128i a = _mm_and_si128(_mm_loadu_si128((const __m128i *)p), even);
                                __m128i b = _mm_and_si128(_mm_loadu_si128((const __m128i *)(p + 16)), even);
                                _mm_storeu_si128((__m128i *)(dst + ox), _mm_packus_epi16(a, b));
                            }
                        }
#endif
                        for (; ox < ow; ox++) {
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

// Portable scratch layout: a padded int32 copy of the plane minus x_zero (padding 0), each row split into SW phases
// (phase p, index i holds padded column i * SW + p) so that every tap reads contiguous values for consecutive
// outputs, then one output row of sums. The AVX2 body uses the same scratch as byte rows (`depthwise_row_bytes`).

/// Bytes per row of the AVX2 kernel's padded plane: every 16-output step reads whole vectors (32 bytes at stride 2).
static inline int depthwise_row_bytes(int ow, int kw, int sw, int dw) { return ((ow + 15) & ~15) * sw + (kw - 1) * dw + 32; }

static inline void depthwise_geometry(int oh, int ow, int kh, int kw, int sh, int sw, int dh, int dw, int *ph, int *phase_len) {
    *ph = (oh - 1) * sh + (kh - 1) * dh + 1;
    int pw = (ow - 1) * sw + (kw - 1) * dw + 1;
    *phase_len = (pw + sw - 1) / sw;
}

int osprey_qdepthwise_scratch(int h, int w, int kh, int kw, int sh, int sw, int dh, int dw, int pt, int pl, int oh, int ow) {
    (void)h; (void)w; (void)pt; (void)pl;
    int ph, len;
    depthwise_geometry(oh, ow, kh, kw, sh, sw, dh, dw, &ph, &len);
    int portable = ph * sw * len + ow, bytes = ph * depthwise_row_bytes(ow, kw, sw, dw);
    int planar = (portable > (bytes + 3) / 4 ? portable : (bytes + 3) / 4) + 16;
    int zmm = osprey_qdepthwise_zmm_scratch(kh, kw, sh, sw, dh, dw, oh, ow);
    if (zmm > planar) planar = zmm;
    if (!osprey_qdepthwise_channels_fits(kh, kw, oh, ow)) return planar;
    int channels = osprey_qdepthwise_channels_scratch(kh, kw, sh, sw, dh, dw, oh, ow);
    return planar > channels ? planar : channels;
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
// AVX2 depthwise, straight from the 8-bit values: the plane is copied once into rows padded with the zero point's
// byte (so padding adds x_zero * w like every other tap, and the whole correction -x_zero * sum(w) goes into the
// bias), each tap's 16 consecutive outputs are read as one vector of int16 (stride 1: 16 bytes widened; stride 2: 32
// bytes, even bytes kept), taps are taken in pairs, interleaved (vpunpck{l,h}wd) and multiplied with the broadcast
// weight pair by vpmaddwd: exact int32 sums for any 8-bit x and centred w (a pair is at most 2 * 255 * 255).
#define DEPTHWISE_MAX_TAPS 64

/// Copies the plane into `rows` padded rows of `row_bytes`, every byte outside the input set to `pad` (one memset,
/// then each input row copied in 16-byte vectors: planes are small, so per-row library calls would dominate).
__attribute__((target("avx2")))
static void depthwise_pad_bytes(const uint8_t *x, int h, int w, int pt, int pl, int rows, int row_bytes, uint8_t pad, uint8_t *padded) {
    memset(padded, pad, (size_t)rows * row_bytes);
    int count = w < row_bytes - pl ? w : row_bytes - pl;
    if (count <= 0) return;
    for (int iy = 0; iy < h; iy++) {
        int py = iy + pt;
        if (py < 0 || py >= rows) continue;
        const uint8_t *src = x + (size_t)iy * w;
        uint8_t *dst = padded + (size_t)py * row_bytes + pl;
        if (count < 16) {
            // Two overlapping moves of 8 or 4 bytes cover 8..15 or 4..7 bytes.
            if (count >= 8) {
                uint64_t head, tail;
                memcpy(&head, src, 8);
                memcpy(&tail, src + count - 8, 8);
                memcpy(dst, &head, 8);
                memcpy(dst + count - 8, &tail, 8);
            } else if (count >= 4) {
                uint32_t head, tail;
                memcpy(&head, src, 4);
                memcpy(&tail, src + count - 4, 4);
                memcpy(dst, &head, 4);
                memcpy(dst + count - 4, &tail, 4);
            } else {
                for (int i = 0; i < count; i++) dst[i] = src[i];
            }
            continue;
        }
        for (int i = 0; i + 16 <= count; i += 16) _mm_storeu_si128((__m128i *)(dst + i), _mm_loadu_si128((const __m128i *)(src + i)));
        // The last, overlapping vector ends exactly at the row's end.
        _mm_storeu_si128((__m128i *)(dst + count - 16), _mm_loadu_si128((const __m128i *)(src + count - 16)));
    }
}

/// 16 consecutive outputs' values of one tap as int16: bytes p[0], p[sw], ... p[15 * sw] (sw 1 or 2).
__attribute__((target("avx2"), always_inline))
static inline __m256i depthwise_load16(const uint8_t *p, int sw, int is_signed) {
    if (sw == 1) {
        __m128i v = _mm_loadu_si128((const __m128i *)p);
        return is_signed ? _mm256_cvtepi8_epi16(v) : _mm256_cvtepu8_epi16(v);
    }
    __m256i v = _mm256_loadu_si256((const __m256i *)p);
    return is_signed ? _mm256_srai_epi16(_mm256_slli_epi16(v, 8), 8) : _mm256_and_si256(v, _mm256_set1_epi16(0xFF));
}

/// The window sums of 16 consecutive outputs from `at` (bias first): lo holds outputs 0-3 and 8-11, hi 4-7 and 12-15.
__attribute__((target("avx2"), always_inline))
static inline void depthwise_sums16(const uint8_t *at, int sw, int is_signed, int taps, const int *offsets, const int32_t *pairs,
                                    __m256i bias, __m256i *lo, __m256i *hi) {
    __m256i l = bias, h = bias;
    for (int t = 0; t < taps; t += 2) {
        __m256i a = depthwise_load16(at + offsets[t], sw, is_signed), b = depthwise_load16(at + offsets[t + 1], sw, is_signed);
        __m256i wp = _mm256_set1_epi32(pairs[t / 2]);
        l = _mm256_add_epi32(l, _mm256_madd_epi16(_mm256_unpacklo_epi16(a, b), wp));
        h = _mm256_add_epi32(h, _mm256_madd_epi16(_mm256_unpackhi_epi16(a, b), wp));
    }
    *lo = l;
    *hi = h;
}

__attribute__((target("avx2"), always_inline))
static inline void depthwise_rows_avx2(const uint8_t *padded, int row_bytes, int is_signed, int sw, int sh, int taps, const int *offsets,
                                       const int32_t *pairs, int oh, int ow, const osprey_qepilogue *ep, void *out) {
    const __m256i zero = _mm256_setzero_si256();
    for (int oy = 0; oy < oh; oy++) {
        const uint8_t *base = padded + (size_t)oy * sh * row_bytes;
        for (int ox = 0; ox < ow; ox += PANEL) {
            __m256i lo, hi;
            depthwise_sums16(base + (size_t)ox * sw, sw, is_signed, taps, offsets, pairs, zero, &lo, &hi);
            __m256i v0 = _mm256_permute2x128_si256(lo, hi, 0x20), v1 = _mm256_permute2x128_si256(lo, hi, 0x31);
            // A whole vector may spill into the next output row (rewritten right after), never past the plane.
            int at_out = oy * ow + ox;
            store_row_avx2(ep, 0, at_out, at_out + PANEL <= oh * ow ? PANEL : ow - ox, v0, v1, out, 0);
        }
    }
}

/// 16 outputs' int32 sums in `depthwise_sums16`'s order, requantized with one scale and zero point (int16 lanes, the
/// saturating add as in `requantize_pair_avx2`), as int16s: lane 0 outputs 0-7, lane 1 outputs 8-15.
__attribute__((target("avx2"), always_inline))
static inline __m256i depthwise_requantize16(__m256i lo, __m256i hi, __m256 scale, __m256i zp16) {
    __m256i a = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_cvtepi32_ps(lo), scale));
    __m256i b = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_cvtepi32_ps(hi), scale));
    return _mm256_adds_epi16(_mm256_packs_epi32(a, b), zp16);
}

/// `depthwise_rows_avx2` for 8-bit outputs (`kind` U8 / S8) of one channel: the bias starts the sums, 32 outputs a
/// step where the row has them (one requantization pack and one 32-byte store for both halves), then 16.
__attribute__((target("avx2"), always_inline))
static inline void depthwise_rows_q8_avx2(const uint8_t *padded, int row_bytes, int is_signed, int sw, int sh, int taps, const int *offsets,
                                          const int32_t *pairs, int oh, int ow, int kind, int32_t bias, float scale, int32_t zero,
                                          uint8_t *out) {
    const __m256i b = _mm256_set1_epi32(bias), zp = _mm256_set1_epi16((short)zero);
    const __m256 s = _mm256_set1_ps(scale);
    int total = oh * ow;
    for (int oy = 0; oy < oh; oy++) {
        const uint8_t *base = padded + (size_t)oy * sh * row_bytes;
        uint8_t *o = out + (size_t)oy * ow;
        int ox = 0;
        for (; ox + 32 <= ow; ox += 32) {
            __m256i l0, h0, l1, h1;
            depthwise_sums16(base + (size_t)ox * sw, sw, is_signed, taps, offsets, pairs, b, &l0, &h0);
            depthwise_sums16(base + (size_t)(ox + 16) * sw, sw, is_signed, taps, offsets, pairs, b, &l1, &h1);
            __m256i p0 = depthwise_requantize16(l0, h0, s, zp), p1 = depthwise_requantize16(l1, h1, s, zp);
            // Bytes as 64-bit units: [0-7, 16-23 | 8-15, 24-31].
            __m256i q = kind == OSPREY_QOUT_U8 ? _mm256_packus_epi16(p0, p1) : _mm256_packs_epi16(p0, p1);
            _mm256_storeu_si256((__m256i *)(o + ox), _mm256_permute4x64_epi64(q, 0xD8));
        }
        for (; ox < ow; ox += PANEL) {
            __m256i l0, h0;
            depthwise_sums16(base + (size_t)ox * sw, sw, is_signed, taps, offsets, pairs, b, &l0, &h0);
            __m256i p0 = depthwise_requantize16(l0, h0, s, zp);
            __m256i q = _mm256_permute4x64_epi64(kind == OSPREY_QOUT_U8 ? _mm256_packus_epi16(p0, p0) : _mm256_packs_epi16(p0, p0), 0xD8);
            // A whole vector may spill into the next output row (rewritten right after), never past the plane.
            if (oy * ow + ox + PANEL <= total) _mm_storeu_si128((__m128i *)(o + ox), _mm256_castsi256_si128(q));
            else {
                _Alignas(16) uint8_t tmp[PANEL];
                _mm_store_si128((__m128i *)tmp, _mm256_castsi256_si128(q));
                memcpy(o + ox, tmp, (size_t)(ow - ox));
            }
        }
    }
}

__attribute__((target("avx2")))
static int depthwise_avx2(const uint8_t *x, int is_signed, int32_t x_zero, int h, int w, const int32_t *weights, int kh, int kw,
                          int sh, int sw, int dh, int dw, int pt, int pl, int oh, int ow,
                          const osprey_qepilogue *ep, void *out, int32_t *scratch) {
    int taps = kh * kw;
    if (taps > DEPTHWISE_MAX_TAPS || (sw != 1 && sw != 2)) return 0;
    int rows = (oh - 1) * sh + (kh - 1) * dh + 1, row_bytes = depthwise_row_bytes(ow, kw, sw, dw);
    uint8_t *padded = (uint8_t *)scratch;
    depthwise_pad_bytes(x, h, w, pt, pl, rows, row_bytes, (uint8_t)x_zero, padded);
    int offsets[DEPTHWISE_MAX_TAPS + 1];
    int32_t pairs[DEPTHWISE_MAX_TAPS / 2 + 1], weight_sum = 0;
    for (int t = 0; t < taps; t++) {
        offsets[t] = (t / kw) * dh * row_bytes + (t % kw) * dw;
        weight_sum += weights[t];
    }
    for (int t = 0; t < taps; t += 2) {
        int32_t w0 = weights[t], w1 = t + 1 < taps ? weights[t + 1] : 0;
        pairs[t / 2] = (int32_t)(((uint32_t)(uint16_t)(int16_t)w1 << 16) | (uint16_t)(int16_t)w0);
    }
    if (taps & 1) offsets[taps] = offsets[taps - 1];  // pairs the last tap with a zero weight
    int32_t bias = (ep->bias ? ep->bias[0] : 0) - x_zero * weight_sum;
    osprey_qepilogue e = *ep;
    e.bias = &bias;
    // Separate bodies for the common cases (3 x 3 u8 at stride 1 and 2) let the compiler fold sw and the widening and
    // unroll the taps.
    if (ep->kind == OSPREY_QOUT_U8 && taps == 9 && !is_signed && (sw == 1 || sw == 2)) {
        // The common case (uint8 in and out, 3 x 3, stride 1 or 2) with the 8-bit epilogue in the row loop.
        if (sw == 1) depthwise_rows_q8_avx2(padded, row_bytes, 0, 1, sh, 9, offsets, pairs, oh, ow, OSPREY_QOUT_U8, bias, ep->scale[0], ep->zero_point, out);
        else depthwise_rows_q8_avx2(padded, row_bytes, 0, 2, sh, 9, offsets, pairs, oh, ow, OSPREY_QOUT_U8, bias, ep->scale[0], ep->zero_point, out);
        return 1;
    }
    if (ep->kind == OSPREY_QOUT_U8 || ep->kind == OSPREY_QOUT_S8) {
        depthwise_rows_q8_avx2(padded, row_bytes, is_signed, sw, sh, taps, offsets, pairs, oh, ow, ep->kind, bias, ep->scale[0], ep->zero_point, out);
        return 1;
    }
    if (taps == 9 && sw == 1 && !is_signed) depthwise_rows_avx2(padded, row_bytes, 0, 1, sh, 9, offsets, pairs, oh, ow, &e, out);
    else if (taps == 9 && sw == 2 && !is_signed) depthwise_rows_avx2(padded, row_bytes, 0, 2, sh, 9, offsets, pairs, oh, ow, &e, out);
    else depthwise_rows_avx2(padded, row_bytes, is_signed, sw, sh, taps, offsets, pairs, oh, ow, &e, out);
    return 1;
}
#endif

/// 1 when the depthwise planes take the zmm body: the AVX512-VNNI path (not forced away) on a CPU with VBMI too.
static int depthwise_zmm_now(void) { return osprey_qkernels_path() == OSPREY_QPATH_AVX512VNNI && osprey_qdepthwise_zmm_supported(); }

void osprey_qdepthwise(const uint8_t *x, int is_signed, int32_t x_zero, int h, int w, const int32_t *weights, int kh, int kw,
                       int sh, int sw, int dh, int dw, int pt, int pl, int oh, int ow,
                       const osprey_qepilogue *ep, void *out, int32_t *scratch) {
#if defined(__x86_64__)
    if (depthwise_zmm_now() &&
        osprey_qdepthwise_planes_avx512vnni(x, is_signed, x_zero, 0, 1, 1, h, w, weights, kh, kw, sh, sw, dh, dw, pt, pl, oh, ow, ep, out, scratch))
        return;
    if (!force_portable && cpu_has_avx2() &&
        depthwise_avx2(x, is_signed, x_zero, h, w, weights, kh, kw, sh, sw, dh, dw, pt, pl, oh, ow, ep, out, scratch)) return;
#endif
    depthwise_portable(x, is_signed, x_zero, h, w, weights, kh, kw, sh, sw, dh, dw, pt, pl, oh, ow, ep, out, scratch);
}

// ---- elementwise ----

// The float arithmetic of onnxruntime's x86 kernels, operation for operation, so results match it bit for bit (a
// one-step difference at a residual Add grows through the layers after it). Add (MLAS's AVX2 kernel): the zero points
// folded into one constant, fixed = zc - (ra * za + rb * zb), then c = a * ra + (b * rb + fixed), each step one fused
// multiply-add. Mul (MLAS's SSE2 kernel): the exact integer product, then product * ratio + zc, rounded twice.
// Contraction is off so the compiler keeps exactly these roundings.
__attribute__((always_inline))
static inline void binary_body(int is_mul, int is_signed, long count, const uint8_t *a, float sa, int32_t za,
                               const uint8_t *b, float sb, int32_t zb, float sc, int32_t zc, uint8_t *out) {
#pragma clang fp contract(off)
    float ra = sa / sc, rb = sb / sc, ratio = sa * sb / sc;
    float fixed = (float)zc - fmaf(ra, (float)za, rb * (float)zb), zcf = (float)zc;
    int32_t lo = is_signed ? -128 : 0, hi = is_signed ? 127 : 255;
    for (long i = 0; i < count; i++) {
        int32_t ia = is_signed ? (int32_t)(int8_t)a[i] : (int32_t)a[i];
        int32_t ib = is_signed ? (int32_t)(int8_t)b[i] : (int32_t)b[i];
        float r;
        if (is_mul) {
            float scaled = (float)((ia - za) * (ib - zb)) * ratio;
            r = scaled + zcf;
        } else {
            r = fmaf((float)ia, ra, fmaf((float)ib, rb, fixed));
        }
        out[i] = (uint8_t)saturate((int32_t)nearbyintf(r), lo, hi);
    }
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma")))
static void binary_avx2(int is_mul, int is_signed, long count, const uint8_t *a, float sa, int32_t za,
                        const uint8_t *b, float sb, int32_t zb, float sc, int32_t zc, uint8_t *out) {
    binary_body(is_mul, is_signed, count, a, sa, za, b, sb, zb, sc, zc, out);
}
#endif

void osprey_qlinear_binary(int is_mul, int is_signed, long count, const uint8_t *a, float sa, int32_t za,
                           const uint8_t *b, float sb, int32_t zb, float sc, int32_t zc, uint8_t *out) {
#if defined(__x86_64__)
    if (!force_portable && cpu_has_avx2_fma(1)) { binary_avx2(is_mul, is_signed, count, a, sa, za, b, sb, zb, sc, zc, out); return; }
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
                              const int32_t *weights, const int32_t *channel_weights, int kh, int kw, int sh, int sw, int dh, int dw,
                              int pt, int pl, int oh, int ow, const osprey_qepilogue *ep, void *out, int32_t *scratch) {
#if defined(__x86_64__)
    int channel_kernel = channel_weights && !force_portable && cpu_has_avx2() && osprey_qdepthwise_channels_fits(kh, kw, oh, ow);
    // On AVX512-VNNI: planes narrower than 16 columns take the zmm channel kernel at stride 1 (at stride 2 it
    // transposes four input pixels per output: planar is faster there above 7 columns), the others the zmm planar one.
    if (depthwise_zmm_now() && channel_kernel && (sw == 1 || ow < 8) &&
        osprey_qdepthwise_channels_avx512vnni(x, is_signed, x_zero, first, count, channels, h, w, weights, kh, kw, sh, sw, dh, dw, pt, pl, oh, ow,
                                              ep, out, scratch))
        return;
    if (depthwise_zmm_now() &&
        osprey_qdepthwise_planes_avx512vnni(x, is_signed, x_zero, first, count, channels, h, w, weights, kh, kw, sh, sw, dh, dw, pt, pl, oh, ow,
                                            ep, out, scratch))
        return;
    // At stride 2 a plane nearly as wide as the planar kernel's vectors (14 of 16 lanes) runs faster planar: the
    // channel kernel transposes four input pixels per output there.
    if (channel_kernel && !(sw > 1 && ow >= 12)) {
        osprey_qdepthwise_channels_avx2(x, is_signed, x_zero, first, count, channels, h, w, channel_weights, kh, kw, sh, sw, dh, dw, pt, pl, oh, ow,
                                        ep, out, scratch);
        return;
    }
#endif
    size_t size = ep->kind == OSPREY_QOUT_U8 || ep->kind == OSPREY_QOUT_S8 ? 1 : 4;
    for (int p = first; p < first + count; p++) {
        int c = p % channels;
        osprey_qepilogue e = *ep;
        if (e.bias) e.bias += c;
        if (e.scale) e.scale += c;
        if (e.float_bias) e.float_bias += c;
        osprey_qdepthwise(x + (size_t)p * h * w, is_signed, x_zero, h, w, weights + (size_t)c * kh * kw, kh, kw, sh, sw, dh, dw, pt, pl,
                          oh, ow, &e, (char *)out + (size_t)p * oh * ow * size, scratch);
    }
}
