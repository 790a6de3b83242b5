// Depthwise 2-D convolution of one plane on AVX512-VNNI + VBMI: 16 consecutive outputs of a row per zmm, one
// vpdpbusd per kernel row and 4 taps (u8 activations x s8 weights, exact int32 sums). The plane is copied once into
// rows padded with the zero point's byte (int8 inputs XOR 0x80: read as uint8 + 128, the zero point moving with
// them), so padding adds zero_point * w like every other tap and the whole correction -zero_point * sum(w) goes into
// the bias. A kernel row's taps for 16 outputs are one 64-byte load and one vpermb that gathers, per output lane,
// its 4 tap bytes (stride and dilation folded into the index). Needs every centred weight within int8 (else the
// caller takes the AVX2 body); the portable body of quantized_conv.c is the reference twin the tests compare with.
#include "include/quantized_conv.h"
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>

#define ZMM_DW_TARGET "avx2,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi"
#define ZMM_EPILOGUE_TARGET ZMM_DW_TARGET
#include "quantized_zmm_epilogue.h"
#define MAX_QUADS 64

int osprey_qdepthwise_zmm_supported(void) {
    static int cached = -1;
    if (cached < 0) {
        __builtin_cpu_init();
        cached = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                 __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vbmi");
    }
    return cached;
}

/// Copies the plane into `rows` rows of `row_bytes` (input row iy at row iy + pt, column pl on), everything else
/// `pad`; `flip` XORs the input bytes with 0x80. Masked loads never read past an input row.
__attribute__((target(ZMM_DW_TARGET)))
static void pad_plane(const uint8_t *x, int flip, int h, int w, int pt, int pl, int rows, int row_bytes, uint8_t pad, uint8_t *padded) {
    memset(padded, pad, (size_t)rows * row_bytes);
    int count = w < row_bytes - pl ? w : row_bytes - pl;
    if (count <= 0) return;
    const __m512i x80 = _mm512_set1_epi8((char)(flip ? 0x80 : 0));
    for (int iy = 0; iy < h; iy++) {
        int py = iy + pt;
        if (py >= rows) break;
        const uint8_t *src = x + (size_t)iy * w;
        uint8_t *dst = padded + (size_t)py * row_bytes + pl;
        for (int i = 0; i < count; i += 64) {
            int n = count - i < 64 ? count - i : 64;
            __mmask64 m = n == 64 ? ~(__mmask64)0 : (((__mmask64)1 << n) - 1);
            _mm512_mask_storeu_epi8(dst + i, m, _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, src + i), x80));
        }
    }
}

/// 16 outputs' int32 sums (starting from `acc`) from `at`: per kernel row one load, per tap quad one vpermb and
/// one vpdpbusd.
__attribute__((target(ZMM_DW_TARGET), always_inline))
static inline __m512i window16(const uint8_t *at, size_t row_step, int kh, int quads, const __m512i *index, const __m512i *wq, __m512i acc) {
    for (int ky = 0; ky < kh; ky++) {
        __m512i v = _mm512_loadu_si512((const void *)(at + ky * row_step));
        for (int q = 0; q < quads; q++) acc = _mm512_dpbusd_epi32(acc, _mm512_permutexvar_epi8(index[q], v), wq[ky * quads + q]);
    }
    return acc;
}

/// Row mode: every output row in vectors of 16 (the last one masked), from padded rows of `row_bytes`.
__attribute__((target(ZMM_DW_TARGET), always_inline))
static inline void rows_zmm(const uint8_t *padded, size_t row_bytes, int sh, int sw, size_t row_step, int kh, int quads, const __m512i *index,
                            const __m512i *wq, int oh, int ow, int kind, __m512i bias, __m512 scale, __m512 fbias, __m256i zp16,
                            void *out, int osize) {
    for (int oy = 0; oy < oh; oy++) {
        const uint8_t *row = padded + (size_t)oy * sh * row_bytes;
        char *o = (char *)out + (size_t)oy * ow * osize;
        for (int ox = 0; ox < ow; ox += 16) {
            __m512i acc = window16(row + (size_t)ox * sw, row_step, kh, quads, index, wq, bias);
            int n = ow - ox < 16 ? ow - ox : 16;
            zmm_store16(kind, acc, scale, fbias, zp16, o + (size_t)ox * osize, (__mmask16)((1u << n) - 1));
        }
    }
}

/// Grid mode for small planes (sh == sw): output (oy, ox) is lane oy * row_bytes + ox of one run over the padded
/// plane (its byte offset is sw times that), so vectors run on across rows; the columns past ow are computed,
/// stored to `grid` and dropped when the rows are copied out.
__attribute__((target(ZMM_DW_TARGET), always_inline))
static inline void grid_zmm(const uint8_t *padded, int row_bytes, int sw, size_t row_step, int kh, int quads, const __m512i *index,
                            const __m512i *wq, int oh, int ow, int kind, __m512i bias, __m512 scale, __m512 fbias, __m256i zp16,
                            void *out, int osize, char *grid) {
    int total = oh * row_bytes;
    for (int j = 0; j < total; j += 16)
        zmm_store16(kind, window16(padded + (size_t)j * sw, row_step, kh, quads, index, wq, bias), scale, fbias, zp16, grid + (size_t)j * osize,
                (__mmask16)0xFFFF);
    int bytes = ow * osize;
    __mmask64 m = bytes >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << bytes) - 1);
    for (int oy = 0; oy < oh; oy++) {
        const char *src = grid + (size_t)oy * row_bytes * osize;
        char *dst = (char *)out + (size_t)oy * bytes;
        if (bytes <= 64) { _mm512_mask_storeu_epi8(dst, m, _mm512_maskz_loadu_epi8(m, src)); continue; }
        memcpy(dst, src, (size_t)bytes);
    }
}

/// Bytes per padded row and whether grid mode runs (then a grid row is a padded row: lane j reads byte sw * j).
static inline int plane_layout(int oh, int ow, int kw, int sh, int sw, int dw, int *grid) {
    int pw = (ow - 1) * sw + (kw - 1) * dw + 1;
    // Grid mode when its vectors (ceil(oh * pw / 16)) are fewer than row mode's (oh * ceil(ow / 16)).
    *grid = sh == sw && (oh * pw + 15) / 16 < oh * ((ow + 15) / 16);
    return *grid ? pw : ((ow + 15) & ~15) * sw + (kw - 1) * dw + 1;
}

int osprey_qdepthwise_zmm_scratch(int kh, int kw, int sh, int sw, int dh, int dw, int oh, int ow) {
    int grid, r = plane_layout(oh, ow, kw, sh, sw, dw, &grid);
    long rows = (long)(oh - 1) * sh + (long)(kh - 1) * dh + 1;
    // Alignment, the padded plane plus two rows and 256 bytes (whole 64-byte loads of the last vectors, which may
    // run past it), the grid's outputs (up to 4 bytes each).
    long bytes = 64 + (((rows + 2) * r + 256 + 63) & ~63L) + ((long)oh * r + 16) * 4 + 64;
    return (int)((bytes + 3) / 4);
}

__attribute__((target(ZMM_DW_TARGET)))
int osprey_qdepthwise_planes_avx512vnni(const uint8_t *x, int is_signed, int32_t x_zero, int first, int count, int channels, int h, int w,
                                        const int32_t *weights, int kh, int kw, int sh, int sw, int dh, int dw, int pt, int pl, int oh, int ow,
                                        const osprey_qepilogue *ep, void *out, int32_t *scratch) {
    int quads = (kw + 3) / 4, taps = kh * kw;
    // Every lane's bytes within one 64-byte load (every weight an int8: checked plane by plane below).
    if (quads * kh > MAX_QUADS || 15 * sw + (kw - 1) * dw > 63 || oh <= 0 || ow <= 0) return 0;
    int grid, row_bytes = plane_layout(oh, ow, kw, sh, sw, dw, &grid);
    if (pl >= row_bytes) return 0;
    int32_t zero = is_signed ? x_zero + 128 : x_zero;  // int8 inputs read as uint8 + 128 (flipped), their zero point too
    int rows = (oh - 1) * sh + (kh - 1) * dh + 1;
    uint8_t *padded = (uint8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    char *gridbuf = (char *)padded + (((size_t)(rows + 2) * row_bytes + 256 + 63) & ~(size_t)63);
    __m512i index[MAX_QUADS], wq[MAX_QUADS];
    for (int q = 0; q < quads; q++) {
        _Alignas(64) uint8_t idx[64];
        for (int i = 0; i < 16; i++)
            for (int k = 0; k < 4; k++) {
                // Taps past the row's end (zero weights) read the last tap's byte.
                int tap = 4 * q + k < kw ? 4 * q + k : kw - 1;
                idx[4 * i + k] = (uint8_t)(i * sw + tap * dw);
            }
        index[q] = _mm512_load_si512((const void *)idx);
    }
    int kind = ep->kind, osize = kind == OSPREY_QOUT_U8 || kind == OSPREY_QOUT_S8 ? 1 : 4;
    size_t plane = (size_t)h * w, oplane = (size_t)oh * ow, step = (size_t)dh * row_bytes;
    __m256i zp16 = _mm256_set1_epi16((short)ep->zero_point);
    for (int p = first; p < first + count; p++) {
        int c = p % channels;
        const int32_t *wc = weights + (size_t)c * taps;
        int32_t weight_sum = 0;
        for (int ky = 0; ky < kh; ky++)
            for (int q = 0; q < quads; q++) {
                uint32_t four = 0;
                for (int k = 0; k < 4 && 4 * q + k < kw; k++) {
                    int32_t v = wc[ky * kw + 4 * q + k];
                    // A weight beyond int8 returns 0 after some planes are written: the caller's fallback writes
                    // every plane of the range again.
                    if (v < -128 || v > 127) return 0;
                    weight_sum += v;
                    four |= (uint32_t)(uint8_t)(int8_t)v << (8 * k);
                }
                wq[ky * quads + q] = _mm512_set1_epi32((int32_t)four);
            }
        pad_plane(x + (size_t)p * plane, is_signed, h, w, pt, pl, rows, row_bytes, (uint8_t)zero, padded);
        __m512i bias = _mm512_set1_epi32((ep->bias ? ep->bias[c] : 0) - zero * weight_sum);
        __m512 scale = _mm512_set1_ps(ep->scale ? ep->scale[c] : 0.0f), fbias = _mm512_set1_ps(ep->float_bias ? ep->float_bias[c] : 0.0f);
        char *o = (char *)out + (size_t)p * oplane * osize;
        // The common case (3 x 3, uint8 out, stride 1 or 2) with the geometry folded in.
        int common = kh == 3 && kw == 3 && kind == OSPREY_QOUT_U8;
        if (grid) {
            if (common && sw == 1) grid_zmm(padded, row_bytes, 1, step, 3, 1, index, wq, oh, ow, OSPREY_QOUT_U8, bias, scale, fbias, zp16, o, 1, gridbuf);
            else if (common && sw == 2) grid_zmm(padded, row_bytes, 2, step, 3, 1, index, wq, oh, ow, OSPREY_QOUT_U8, bias, scale, fbias, zp16, o, 1, gridbuf);
            else grid_zmm(padded, row_bytes, sw, step, kh, quads, index, wq, oh, ow, kind, bias, scale, fbias, zp16, o, osize, gridbuf);
        } else {
            if (common && sw == 1) rows_zmm(padded, row_bytes, sh, 1, step, 3, 1, index, wq, oh, ow, OSPREY_QOUT_U8, bias, scale, fbias, zp16, o, 1);
            else if (common && sw == 2) rows_zmm(padded, row_bytes, sh, 2, step, 3, 1, index, wq, oh, ow, OSPREY_QOUT_U8, bias, scale, fbias, zp16, o, 1);
            else rows_zmm(padded, row_bytes, sh, sw, step, kh, quads, index, wq, oh, ow, kind, bias, scale, fbias, zp16, o, osize);
        }
    }
    return 1;
}
#else
int osprey_qdepthwise_zmm_supported(void) { return 0; }

int osprey_qdepthwise_zmm_scratch(int kh, int kw, int sh, int sw, int dh, int dw, int oh, int ow) {
    (void)kh; (void)kw; (void)sh; (void)sw; (void)dh; (void)dw; (void)oh; (void)ow;
    return 0;
}
#endif
