// Depthwise 2-D convolution with the channels in the vector (AVX2), for planes too small for the planar kernel of
// quantized_conv.c: a 7-wide plane fills 7 of its 16 lanes and pays a plane's setup per 49 outputs. Here 16
// channels of an NCHW tensor are transposed (16 x 16 byte blocks) into one padded buffer of 16-byte pixels filled
// with the zero point's byte, every output pixel sums its taps for the 16 channels at once (taps paired for vpmaddwd
// as in the planar kernel, with per-channel weight pairs), and the block's outputs are transposed back into their
// planes. Its portable twin is the planar kernel's portable body (osprey_qdepthwise), which the tests compare with.
// On AVX512-VNNI + VBMI a zmm body sums each kernel row's taps with one vpdpbusd (osprey_qdepthwise_channels_avx512vnni).
#include "include/quantized_conv.h"
#include <string.h>

#define LANES 16
#define MAX_TAPS 64

/// Geometry of the padded block: rows and columns a window of every output reads.
static inline void block_geometry(int oh, int ow, int kh, int kw, int sh, int sw, int dh, int dw, int *ph, int *pw) {
    *ph = (oh - 1) * sh + (kh - 1) * dh + 1;
    *pw = (ow - 1) * sw + (kw - 1) * dw + 1;
}

int osprey_qdepthwise_channels_scratch(int kh, int kw, int sh, int sw, int dh, int dw, int oh, int ow) {
    int ph, pw;
    block_geometry(oh, ow, kh, kw, sh, sw, dh, dw, &ph, &pw);
    // Padded input (16 bytes a pixel), the block's outputs (up to 4 bytes a value), alignment slack; in int32s.
    long bytes = (long)ph * pw * LANES + (long)oh * ow * LANES * 4 + 128;
    return (int)((bytes + 3) / 4);
}

int osprey_qdepthwise_channels_fits(int kh, int kw, int oh, int ow) {
    // The planar kernel fills its 16-output vectors from 16 columns on; below that the channel kernel wins.
    return kh * kw <= MAX_TAPS && ow < LANES && oh * ow >= 1;
}

long osprey_qdepthwise_channels_packed_count(int channels, int taps) {
    return (long)((channels + LANES - 1) / LANES) * ((taps + 1) / 2 * LANES + LANES);
}

void osprey_qdepthwise_channels_pack(const int32_t *weights, int channels, int taps, int32_t *packed) {
    int pairs = (taps + 1) / 2;
    long block_ints = (long)pairs * LANES + LANES;
    memset(packed, 0, (size_t)osprey_qdepthwise_channels_packed_count(channels, taps) * sizeof(int32_t));
    for (int c = 0; c < channels; c++) {
        int32_t *block = packed + (c / LANES) * block_ints;
        int l = c % LANES;
        // After vpunpck{l,h}wd and vpmaddwd, channel l sits in vector (l >> 2) & 1 of a pair, int32 lane (l & 3) + 4 * (l >= 8).
        int vec = (l >> 2) & 1, lane = (l & 3) + (l >= 8 ? 4 : 0);
        const int32_t *wc = weights + (size_t)c * taps;
        int32_t sum = 0;
        for (int t = 0; t < taps; t++) {
            sum += wc[t];
            int16_t *pair = (int16_t *)(block + (size_t)(2 * (t / 2) + vec) * (LANES / 2) + lane);
            pair[t & 1] = (int16_t)wc[t];
        }
        block[(size_t)pairs * LANES + l] = sum;
    }
}

#if defined(__x86_64__)
#include <immintrin.h>

/// In place: r[c] holds 16 pixels of channel c on entry, r[p] the 16 channels of pixel p on return.
__attribute__((target("avx2"), always_inline))
static inline void transpose16(__m128i r[16]) {
    __m128i a[16], b[16];
    // Byte pairs (2i, 2i+1): a[2i + h] holds pixels 8h..8h+7.
    for (int i = 0; i < 8; i++) { a[2 * i] = _mm_unpacklo_epi8(r[2 * i], r[2 * i + 1]); a[2 * i + 1] = _mm_unpackhi_epi8(r[2 * i], r[2 * i + 1]); }
    // Channel quads j: b[4j + q] holds pixels 4q..4q+3.
    for (int j = 0; j < 4; j++)
        for (int h = 0; h < 2; h++) {
            b[4 * j + 2 * h] = _mm_unpacklo_epi16(a[4 * j + h], a[4 * j + 2 + h]);
            b[4 * j + 2 * h + 1] = _mm_unpackhi_epi16(a[4 * j + h], a[4 * j + 2 + h]);
        }
    // Channel octets k: a[8k + o] holds pixels 2o, 2o+1.
    for (int k = 0; k < 2; k++)
        for (int q = 0; q < 4; q++) {
            a[8 * k + 2 * q] = _mm_unpacklo_epi32(b[8 * k + q], b[8 * k + 4 + q]);
            a[8 * k + 2 * q + 1] = _mm_unpackhi_epi32(b[8 * k + q], b[8 * k + 4 + q]);
        }
    for (int o = 0; o < 8; o++) { r[2 * o] = _mm_unpacklo_epi64(a[o], a[8 + o]); r[2 * o + 1] = _mm_unpackhi_epi64(a[o], a[8 + o]); }
}

/// The `count` < 16 bytes at p (the rest zero) without reading past them: when `behind` (16 readable bytes end at
/// p + count) one load ending there, shifted down by a byte shuffle; else bytewise.
__attribute__((target("avx2"), always_inline))
static inline __m128i load_tail(const uint8_t *p, int count, int behind) {
    // shift[i] = i below 16, else 0x80 (pshufb writes zero): a window at 16 - count moves byte j + 16 - count to j.
    static const uint8_t shift[32] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
                                      0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80};
    if (behind) {
        __m128i v = _mm_loadu_si128((const __m128i *)(p + count - 16));
        return _mm_shuffle_epi8(v, _mm_loadu_si128((const __m128i *)(shift + 16 - count)));
    }
    _Alignas(16) uint8_t tmp[16] = {0};
    for (int i = 0; i < count; i++) tmp[i] = p[i];
    return _mm_load_si128((const __m128i *)tmp);
}

/// The requantization of 16 channels' sums (channels 0-7 in v0, 8-15 in v1) with per-channel bias and scale, 16
/// values in the output type to `o`.
/// Input planes p - lo + l (lanes l in [lo, hi) of a 16-channel block) transposed into the padded block, which is
/// first filled with the zero point; 16 pixels at a time, lanes outside [lo, hi) zero. Past a plane's end lie the
/// next plane's bytes (ignored); only `end`, the range's end, is a wall.
__attribute__((target("avx2"), always_inline))
static inline void fill_padded_block(const uint8_t *x, int p, int lo, int hi, size_t plane, const uint8_t *end, int w, int pt,
                                     int pl, int ph, int pw, int32_t x_zero, uint8_t *padded) {
    memset(padded, (uint8_t)x_zero, (size_t)ph * pw * LANES);
    int iy = 0, ix = 0;  // input position of pixel i
    for (size_t i = 0; i < plane; i += LANES) {
        int n = plane - i < LANES ? (int)(plane - i) : LANES;
        __m128i r[LANES];
        for (int l = 0; l < LANES; l++) {
            if (l < lo || l >= hi) { r[l] = _mm_setzero_si128(); continue; }
            const uint8_t *at = x + (size_t)(p - lo + l) * plane + i;
            r[l] = at + LANES <= end ? _mm_loadu_si128((const __m128i *)at) : load_tail(at, n, plane >= LANES);
        }
        transpose16(r);
        for (int k = 0; k < n; k++) {
            int py = iy + pt, px = ix + pl;
            if (py < ph && px < pw) _mm_storeu_si128((__m128i *)(padded + ((size_t)py * pw + px) * LANES), r[k]);
            if (++ix == w) { ix = 0; iy++; }
        }
    }
}

/// The block's outputs (`obuf`, 16 channels per pixel, `osize` bytes each) back into their planes of `out`.
__attribute__((target("avx2"), always_inline))
static inline void store_block_outputs(const uint8_t *obuf, int osize, size_t oplane, int p, int lo, int hi, void *out) {
    if (osize == 1) {
        uint8_t *dst = (uint8_t *)out;
        for (size_t i = 0; i < oplane; i += LANES) {
            int n = oplane - i < LANES ? (int)(oplane - i) : LANES;
            __m128i r[LANES];
            for (int k = 0; k < LANES; k++) r[k] = k < n ? _mm_loadu_si128((const __m128i *)(obuf + (i + k) * LANES)) : _mm_setzero_si128();
            transpose16(r);
            for (int l = lo; l < hi; l++) {
                uint8_t *o = dst + (size_t)(p - lo + l) * oplane + i;
                if (n == LANES) _mm_storeu_si128((__m128i *)o, r[l]);
                else { _Alignas(16) uint8_t tmp[16]; _mm_store_si128((__m128i *)tmp, r[l]); memcpy(o, tmp, (size_t)n); }
            }
        }
    } else {
        for (int l = lo; l < hi; l++) {
            uint32_t *o = (uint32_t *)out + (size_t)(p - lo + l) * oplane;
            for (size_t i = 0; i < oplane; i++) memcpy(o + i, obuf + (i * LANES + l) * 4, 4);
        }
    }
}

__attribute__((target("avx2"), always_inline))
static inline void epilogue_channels(int kind, __m256i zp, const __m256i bias[2], const __m256 scale[2], const __m256 fbias[2],
                                     __m256i v0, __m256i v1, void *o) {
    v0 = _mm256_add_epi32(v0, bias[0]);
    v1 = _mm256_add_epi32(v1, bias[1]);
    if (kind == OSPREY_QOUT_INT32) {
        _mm256_storeu_si256((__m256i *)o, v0);
        _mm256_storeu_si256((__m256i *)((int32_t *)o + 8), v1);
        return;
    }
    __m256 f0 = _mm256_mul_ps(_mm256_cvtepi32_ps(v0), scale[0]), f1 = _mm256_mul_ps(_mm256_cvtepi32_ps(v1), scale[1]);
    if (kind == OSPREY_QOUT_F32) {
        _mm256_storeu_ps((float *)o, _mm256_add_ps(f0, fbias[0]));
        _mm256_storeu_ps((float *)o + 8, _mm256_add_ps(f1, fbias[1]));
        return;
    }
    // cvtps2dq rounds half to even (default MXCSR), as the planar kernel's epilogue; the packs saturate.
    __m256i q0 = _mm256_add_epi32(_mm256_cvtps_epi32(f0), zp), q1 = _mm256_add_epi32(_mm256_cvtps_epi32(f1), zp);
    __m256i p16 = _mm256_permute4x64_epi64(_mm256_packs_epi32(q0, q1), 0xD8);
    __m128i lo = _mm256_castsi256_si128(p16), hi = _mm256_extracti128_si256(p16, 1);
    _mm_storeu_si128((__m128i *)o, kind == OSPREY_QOUT_U8 ? _mm_packus_epi16(lo, hi) : _mm_packs_epi16(lo, hi));
}

/// The sums of every output pixel of one block: `pairs` tap pairs, tap offsets in bytes of the padded buffer;
/// weights per pair as two vectors (channels 0-3 and 8-11, then 4-7 and 12-15: the unpack lanes).
__attribute__((target("avx2"), always_inline))
static inline void block_rows(const uint8_t *padded, int pw, int is_signed, int sh, int sw, int pairs, const int *offsets,
                              const __m256i *weights, int oh, int ow, int kind, __m256i zp, const __m256i bias[2],
                              const __m256 scale[2], const __m256 fbias[2], uint8_t *obuf, int osize) {
    for (int oy = 0; oy < oh; oy++) {
        for (int ox = 0; ox < ow; ox++) {
            const uint8_t *at = padded + ((size_t)oy * sh * pw + (size_t)ox * sw) * LANES;
            __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();
            for (int t = 0; t < pairs; t++) {
                __m128i ra = _mm_loadu_si128((const __m128i *)(at + offsets[2 * t]));
                __m128i rb = _mm_loadu_si128((const __m128i *)(at + offsets[2 * t + 1]));
                __m256i a = is_signed ? _mm256_cvtepi8_epi16(ra) : _mm256_cvtepu8_epi16(ra);
                __m256i b = is_signed ? _mm256_cvtepi8_epi16(rb) : _mm256_cvtepu8_epi16(rb);
                lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_unpacklo_epi16(a, b), _mm256_loadu_si256(weights + 2 * t)));
                hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_unpackhi_epi16(a, b), _mm256_loadu_si256(weights + 2 * t + 1)));
            }
            __m256i v0 = _mm256_permute2x128_si256(lo, hi, 0x20), v1 = _mm256_permute2x128_si256(lo, hi, 0x31);
            epilogue_channels(kind, zp, bias, scale, fbias, v0, v1, obuf + ((size_t)oy * ow + ox) * LANES * osize);
        }
    }
}

__attribute__((target("avx2")))
void osprey_qdepthwise_channels_avx2(const uint8_t *x, int is_signed, int32_t x_zero, int first, int count, int channels, int h, int w,
                                     const int32_t *packed, int kh, int kw, int sh, int sw, int dh, int dw, int pt, int pl, int oh, int ow,
                                     const osprey_qepilogue *ep, void *out, int32_t *scratch) {
    int taps = kh * kw, pairs = (taps + 1) / 2, ph, pw;
    block_geometry(oh, ow, kh, kw, sh, sw, dh, dw, &ph, &pw);
    size_t plane = (size_t)h * w, oplane = (size_t)oh * ow, block_ints = (size_t)pairs * LANES + LANES;
    int osize = ep->kind == OSPREY_QOUT_U8 || ep->kind == OSPREY_QOUT_S8 ? 1 : 4;
    uint8_t *padded = (uint8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    uint8_t *obuf = padded + (((size_t)ph * pw * LANES + 63) & ~(size_t)63);
    int offsets[MAX_TAPS + 2];
    for (int t = 0; t < taps; t++) offsets[t] = ((t / kw) * dh * pw + (t % kw) * dw) * LANES;
    offsets[taps] = offsets[taps - 1];  // an odd last tap pairs with itself under a zero weight
    const __m256i zp = _mm256_set1_epi32(ep->zero_point);
    // The tensor's bytes from plane `first` on that this call may read whole 16-byte vectors of.
    const uint8_t *end = x + (size_t)(first + count) * plane;
    for (int p = first; p < first + count;) {
        // A block: the planes of one image whose channels share a 16-channel weight block; lane l is channel
        // base + l, lanes [lo, hi) are this call's.
        int c = p % channels, base = c - c % LANES, lo = c - base, hi = channels - base < LANES ? channels - base : LANES;
        if (hi - lo > first + count - p) hi = lo + (first + count - p);
        const int32_t *block = packed + (size_t)(base / LANES) * block_ints;
        _Alignas(32) int32_t bias[LANES] = {0};
        _Alignas(32) float scale[LANES] = {0}, fb[LANES] = {0};
        // Separate loops: a vectorized conditional becomes masked stores, which are slow on AMD cores.
        const int32_t *sums = block + (size_t)pairs * LANES;
        for (int l = lo; l < hi; l++) bias[l] = -x_zero * sums[l];
        if (ep->bias) for (int l = lo; l < hi; l++) bias[l] += ep->bias[base + l];
        if (ep->scale) for (int l = lo; l < hi; l++) scale[l] = ep->scale[base + l];
        if (ep->float_bias) for (int l = lo; l < hi; l++) fb[l] = ep->float_bias[base + l];
        __m256i vb[2] = {_mm256_load_si256((const __m256i *)bias), _mm256_load_si256((const __m256i *)(bias + 8))};
        __m256 vs[2] = {_mm256_load_ps(scale), _mm256_load_ps(scale + 8)}, vf[2] = {_mm256_load_ps(fb), _mm256_load_ps(fb + 8)};
        // Input planes transposed into the padded buffer, 16 pixels at a time.
        fill_padded_block(x, p, lo, hi, plane, end, w, pt, pl, ph, pw, x_zero, padded);
        // Lanes outside [lo, hi) read zero-point bytes and are never stored.
        const __m256i *wv = (const __m256i *)block;
        int kind = ep->kind;
        if (taps == 9 && !is_signed && sw == 1 && sh == 1) block_rows(padded, pw, 0, 1, 1, 5, offsets, wv, oh, ow, kind, zp, vb, vs, vf, obuf, osize);
        else if (taps == 9 && !is_signed && sw == 2 && sh == 2) block_rows(padded, pw, 0, 2, 2, 5, offsets, wv, oh, ow, kind, zp, vb, vs, vf, obuf, osize);
        else block_rows(padded, pw, is_signed, sh, sw, pairs, offsets, wv, oh, ow, kind, zp, vb, vs, vf, obuf, osize);
        // Outputs back into their planes.
        store_block_outputs(obuf, osize, oplane, p, lo, hi, out);
        p += hi - lo;
    }
}
// AVX512-VNNI + VBMI: a kernel row's taps of one output pixel are consecutive 16-byte pixels of the padded block,
// so one 64-byte load holds up to 4 of them (dilation folded in), one vpermb gathers each channel's 4 tap bytes
// into its 32-bit lane, and one vpdpbusd (u8 x s8, exact) adds them for all 16 channels. int8 inputs are read as
// uint8 + 128 (XOR 0x80 after the load), their zero point moving with them.
#define ZMM_CH_TARGET "avx2,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi"
#define ZMM_EPILOGUE_TARGET ZMM_CH_TARGET
#include "quantized_zmm_epilogue.h"

__attribute__((target(ZMM_CH_TARGET), always_inline))
static inline void block_rows_zmm(const uint8_t *padded, int pw, int flip, int sh, int sw, int kh, size_t row_step, __m512i index,
                                  const __m512i *wq, int oh, int ow, int kind, __m512i bias, __m512 scale, __m512 fbias, __m256i zp16,
                                  uint8_t *obuf, int osize) {
    const __m512i x80 = _mm512_set1_epi8((char)0x80);
    for (int oy = 0; oy < oh; oy++)
        for (int ox = 0; ox < ow; ox++) {
            const uint8_t *at = padded + ((size_t)oy * sh * pw + (size_t)ox * sw) * LANES;
            __m512i acc = bias;
            for (int ky = 0; ky < kh; ky++) {
                __m512i v = _mm512_loadu_si512((const void *)(at + ky * row_step));
                if (flip) v = _mm512_xor_si512(v, x80);
                acc = _mm512_dpbusd_epi32(acc, _mm512_permutexvar_epi8(index, v), wq[ky]);
            }
            zmm_store16(kind, acc, scale, fbias, zp16, obuf + ((size_t)oy * ow + ox) * LANES * osize, (__mmask16)0xFFFF);
        }
}

__attribute__((target(ZMM_CH_TARGET)))
int osprey_qdepthwise_channels_avx512vnni(const uint8_t *x, int is_signed, int32_t x_zero, int first, int count, int channels, int h, int w,
                                          const int32_t *weights, int kh, int kw, int sh, int sw, int dh, int dw, int pt, int pl, int oh, int ow,
                                          const osprey_qepilogue *ep, void *out, int32_t *scratch) {
    int taps = kh * kw, ph, pw;
    // A row's taps within one 64-byte load (4 pixels), every weight an int8.
    // (Weights are checked block by block: a weight beyond int8 returns 0 after some planes are written, and the
    // caller's fallback body then writes every plane of the range again.)
    if (kw > 4 || (kw - 1) * dw > 3 || kh > MAX_TAPS || !osprey_qdepthwise_channels_fits(kh, kw, oh, ow)) return 0;
    block_geometry(oh, ow, kh, kw, sh, sw, dh, dw, &ph, &pw);
    size_t plane = (size_t)h * w, oplane = (size_t)oh * ow, row_step = (size_t)dh * pw * LANES;
    int osize = ep->kind == OSPREY_QOUT_U8 || ep->kind == OSPREY_QOUT_S8 ? 1 : 4;
    uint8_t *padded = (uint8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    uint8_t *obuf = padded + (((size_t)ph * pw * LANES + 63) & ~(size_t)63);
    int32_t zero = is_signed ? x_zero + 128 : x_zero;
    _Alignas(64) uint8_t idx[64];
    for (int l = 0; l < LANES; l++)
        for (int k = 0; k < 4; k++) idx[4 * l + k] = (uint8_t)((k < kw ? k : kw - 1) * dw * LANES + l);
    const __m512i index = _mm512_load_si512((const void *)idx);
    const __m256i zp16 = _mm256_set1_epi16((short)ep->zero_point);
    __m512i wq[MAX_TAPS];
    const uint8_t *end = x + (size_t)(first + count) * plane;
    for (int p = first; p < first + count;) {
        int c = p % channels, base = c - c % LANES, lo = c - base, hi = channels - base < LANES ? channels - base : LANES;
        if (hi - lo > first + count - p) hi = lo + (first + count - p);
        // Per kernel row: channel l's taps as bytes 4l.. of a vector (zero past kw and outside [lo, hi)).
        _Alignas(64) int8_t wb[MAX_TAPS][64];
        memset(wb, 0, (size_t)kh * 64);
        _Alignas(64) int32_t bias[LANES] = {0};
        _Alignas(64) float scale[LANES] = {0}, fb[LANES] = {0};
        for (int l = lo; l < hi; l++) {
            const int32_t *wc = weights + (size_t)(base + l) * taps;
            int32_t sum = 0;
            for (int ky = 0; ky < kh; ky++)
                for (int kx = 0; kx < kw; kx++) {
                    int32_t v = wc[ky * kw + kx];
                    if (v < -128 || v > 127) return 0;
                    wb[ky][4 * l + kx] = (int8_t)v;
                    sum += v;
                }
            bias[l] = (ep->bias ? ep->bias[base + l] : 0) - zero * sum;
        }
        for (int ky = 0; ky < kh; ky++) wq[ky] = _mm512_load_si512((const void *)wb[ky]);
        if (ep->scale) for (int l = lo; l < hi; l++) scale[l] = ep->scale[base + l];
        if (ep->float_bias) for (int l = lo; l < hi; l++) fb[l] = ep->float_bias[base + l];
        // Input planes transposed into the padded buffer (raw bytes: the flip comes after the loads), 16 pixels at a time.
        fill_padded_block(x, p, lo, hi, plane, end, w, pt, pl, ph, pw, x_zero, padded);
        __m512i vb = _mm512_load_si512((const void *)bias);
        __m512 vs = _mm512_load_ps(scale), vf = _mm512_load_ps(fb);
        int kind = ep->kind;
        if (kh == 3 && kw == 3 && dw == 1 && !is_signed && kind == OSPREY_QOUT_U8 && sw == 1 && sh == 1)
            block_rows_zmm(padded, pw, 0, 1, 1, 3, row_step, index, wq, oh, ow, OSPREY_QOUT_U8, vb, vs, vf, zp16, obuf, 1);
        else if (kh == 3 && kw == 3 && dw == 1 && !is_signed && kind == OSPREY_QOUT_U8 && sw == 2 && sh == 2)
            block_rows_zmm(padded, pw, 0, 2, 2, 3, row_step, index, wq, oh, ow, OSPREY_QOUT_U8, vb, vs, vf, zp16, obuf, 1);
        else
            block_rows_zmm(padded, pw, is_signed, sh, sw, kh, row_step, index, wq, oh, ow, kind, vb, vs, vf, zp16, obuf, osize);
        // Outputs back into their planes.
        store_block_outputs(obuf, osize, oplane, p, lo, hi, out);
        p += hi - lo;
    }
    return 1;
}
#endif
