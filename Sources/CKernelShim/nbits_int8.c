// MatMulNBits at accuracy_level 4 (nbits_int8.h): onnxruntime quantizes A to int8 per block there and multiplies in
// integers, so its outputs move by about one A quantization step from the float product; this computes the same
// quantity, with the nibbles as vpdpbusd's unsigned operand and A's codes as its signed one (AVX2: vpmaddubsw, whose
// pair sums stay below 2 * 15 * 127 and so never saturate). Each 4-lane group of an int32 accumulator holds one 32-value
// group of B, so the float conversion scales it with a lane-expanded (a_scale * g_scale) and the zero points come off
// once per column as a dot over blocks (scale * zero against a_scale * sum(codes)), from the byte zero points: a float
// copy of scale * zero would add a quarter of B's bytes to memory and to every decode step's reads.
#include "include/nbits_int8.h"
#include "include/quantized_conv.h"
#include <math.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

long osprey_nbits4_int8_span(int path) { return path == OSPREY_QPATH_AVX512VNNI ? 128 : 64; }

int osprey_nbits4_int8_supports(int path) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    const int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    switch (path) {
    case OSPREY_QPATH_AVX2: return avx2;
    case OSPREY_QPATH_AVXVNNI: {
        // AVX-VNNI: CPUID leaf 7 sub-leaf 1, EAX bit 4.
        unsigned a = 0, b = 0, c = 0, d = 0;
        __cpuid_count(7, 1, a, b, c, d);
        return avx2 && (a & (1u << 4));
    }
    case OSPREY_QPATH_AVX512VNNI:
        return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512vnni");
    default: break;
    }
#endif
    return path == OSPREY_QPATH_PORTABLE;
}

/// Block [start, start + bs) of row x (values from `end` on are zero) as codes in span order; returns the codes' sum
/// and sets *scale.
static int quantize_block_portable(const float *x, long start, long end, long bs, long span, long padded, int8_t *q, float *scale) {
    float amax = 0.0f;
    for (long i = start; i < end; i++) amax = fmaxf(amax, fabsf(x[i]));
    // onnxruntime's rounding: codes are nearest-even of a * (127 / amax), the scale amax / 127 kept in float.
    const float inverse = amax != 0.0f ? 127.0f / amax : 0.0f;
    *scale = amax / 127.0f;
    int sum = 0;
    for (long i = start; i < start + bs; i++) {
        const int v = i < end ? (int)nearbyintf(x[i] * inverse) : 0;
        sum += v;
        // Value i of its span: evens first, then odds.
        const long s0 = i / span * span, len = padded - s0 < span ? padded - s0 : span, t = i - s0;
        q[s0 + (t & 1) * (len / 2) + t / 2] = (int8_t)v;
    }
    return sum;
}

#if defined(__x86_64__)
/// `quantize_block_portable` for a whole block (end = start + bs) on ymm, bit for bit: the same max, the same
/// products, and vcvtps2dq rounds to nearest even as nearbyintf does in the default rounding mode.
__attribute__((target("avx2,fma")))
static int quantize_block_avx2(const float *x, long start, long bs, long span, long padded, int8_t *q, float *scale) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 m = _mm256_setzero_ps();
    for (long i = start; i < start + bs; i += 8) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    const float amax = _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
    const __m256 inverse = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
    *scale = amax / 127.0f;
    // Bytes of a 128-bit lane: its even-indexed values, then its odd ones.
    const __m256i split = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15,
                                           0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    __m256i sums = _mm256_setzero_si256();
    for (long g = start; g < start + bs; g += 32) {
        __m256i v[4];
        for (int j = 0; j < 4; j++) {
            v[j] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + g + 8 * j), inverse));
            sums = _mm256_add_epi32(sums, v[j]);
        }
        // packs interleaves 128-bit lanes: values 0-3 8-11 4-7 12-15 per 16 bits, fixed by the permute after packing to bytes.
        const __m256i words0 = _mm256_packs_epi32(v[0], v[1]), words1 = _mm256_packs_epi32(v[2], v[3]);
        const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(words0, words1), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        // bytes holds values 0..31 in order; split each 16 into evens and odds, then gather the evens of both halves.
        const __m256i parted = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(bytes, split), 0xD8);
        const long s0 = g / span * span, len = padded - s0 < span ? padded - s0 : span, t = (g - s0) / 2;
        _mm_storeu_si128((__m128i *)(q + s0 + t), _mm256_castsi256_si128(parted));
        _mm_storeu_si128((__m128i *)(q + s0 + len / 2 + t), _mm256_extracti128_si256(parted, 1));
    }
    __m128i t = _mm_add_epi32(_mm256_castsi256_si128(sums), _mm256_extracti128_si256(sums, 1));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4E));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xB1));
    return _mm_cvtsi128_si32(t);
}
#endif

void osprey_nbits4_int8_quantize(long rows, const float *a, long lda, long k, long blocks, long bs, long span, int8_t *codes,
                                 float *a_lanes, float *a_sums, int portable) {
    const long padded = blocks * bs;
#if defined(__x86_64__)
    const int vector = !portable && osprey_nbits4_int8_supports(OSPREY_QPATH_AVX2);
#else
    const int vector = 0;
    (void)portable;
#endif
    for (long r = 0; r < rows; r++) {
        const float *x = a + r * lda;
        int8_t *q = codes + r * padded;
        for (long blk = 0; blk < blocks; blk++) {
            const long start = blk * bs, end = start + bs < k ? start + bs : k;
            float scale;
            int sum;
#if defined(__x86_64__)
            if (vector && end == start + bs) sum = quantize_block_avx2(x, start, bs, span, padded, q, &scale);
            else
#endif
                sum = quantize_block_portable(x, start, end, bs, span, padded, q, &scale);
            a_sums[r * blocks + blk] = scale * (float)sum;
            for (long g = start / 32; g < (start + bs) / 32; g++)
                for (int t = 0; t < 4; t++) a_lanes[r * (padded / 8) + g * 4 + t] = scale;
        }
    }
}

/// The per-(column, row) zero-point term: sum over blocks of (scale * zero) * (a_scale * sum(codes)).
static inline float zero_term(const float *scales, const uint8_t *zero_bytes, const float *a_sums, long blocks) {
    float total = 0.0f;
    for (long blk = 0; blk < blocks; blk++) total += scales[blk] * (zero_bytes ? (float)zero_bytes[blk] : 8.0f) * a_sums[blk];
    return total;
}

void osprey_nbits4_int8_gemv_portable(long rows, long span, const int8_t *codes, const float *a_lanes, const float *a_sums, const uint8_t *b,
                          const float *g_scales, const float *scales, const uint8_t *zero_bytes, long blocks, long bs, const float *bias, float *y, long ldy,
                          long c0, long c1) {
    const long padded = blocks * bs, groups = padded / 32;
    for (long r = 0; r < rows; r++) {
        const int8_t *q = codes + r * padded;
        for (long c = c0; c < c1; c++) {
            const uint8_t *w = b + c * (padded / 2);
            float total = 0.0f;
            for (long g = 0; g < groups; g++) {
                int dot = 0;
                for (long i = g * 32; i < g * 32 + 32; i++) {
                    const long s0 = i / span * span, len = padded - s0 < span ? padded - s0 : span, t = i - s0;
                    const int nibble = (w[i / 2] >> ((i & 1) * 4)) & 15;
                    dot += nibble * q[s0 + (t & 1) * (len / 2) + t / 2];
                }
                total += a_lanes[r * (padded / 8) + g * 4] * g_scales[c * groups + g] * (float)dot;
            }
            const float zero = zero_term(scales + c * blocks, zero_bytes ? zero_bytes + c * blocks : 0, a_sums + r * blocks, blocks);
            y[r * ldy + c] = (bias ? bias[c] : 0.0f) + (total - zero);
        }
    }
}

#if defined(__x86_64__)
/// The next tile's B bytes (`w_next` ahead of `w`: the same span `C` columns on) and, every 512 values, its group
/// scales: a decode step streams B from memory, and with the hardware prefetcher alone a K = 2048, N = 8192 step took
/// 1.4 ms at one row and 1.2 at four where this takes 0.47 and 0.65 (a fixed 512 bytes ahead: 0.53 and 1.2).
__attribute__((always_inline))
static inline void prefetch_ahead(const uint8_t *w, long w_next, const float *g, long g_next, long s0) {
    _mm_prefetch((const char *)(w + w_next), _MM_HINT_T0);
    if ((s0 & 511) == 0) _mm_prefetch((const char *)(g + g_next), _MM_HINT_T0);
}

/// Lanes 4g..4g+3 take float g (of 4): each 32-value group's scale over the 4 lanes its dot lands in.
#define EXPAND4 _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0)

// R rows times C columns on zmm, spans of 128 values: 64 bytes of B split into low and high nibbles (the span's
// even and odd values) meet the row's two code vectors in two vpdpbusd; the int32 lanes are scaled per group and
// summed in float once per span.
__attribute__((target("avx2,avx512f,avx512bw,avx512vl,avx512vnni"), always_inline))
static inline void tile_avx512vnni(const int R, const int C, const int8_t *codes, const float *a_lanes, long padded, const uint8_t *w,
                                   const float *g_scales, float *out) {
    const long row = padded / 2, groups = padded / 32;
    const __m512i m15 = _mm512_set1_epi8(15), expand = EXPAND4;
    __m512 acc[4][4];
    for (int r = 0; r < R; r++)
        for (int j = 0; j < C; j++) acc[r][j] = _mm512_setzero_ps();
    for (long s0 = 0; s0 < padded; s0 += 128) {
        const long len = padded - s0 < 128 ? padded - s0 : 128;
        // A short last span (32 or 96 values) reads its bytes, codes and scales under masks.
        const __mmask64 bytes = len == 128 ? ~0ULL : (1ULL << (len / 2)) - 1;
        const __mmask16 lanes = len == 128 ? 0xFFFF : (__mmask16)((1u << (len / 8)) - 1);
        __m512i even[4], odd[4];
        __m512 as[4];
        for (int r = 0; r < R; r++) {
            even[r] = _mm512_maskz_loadu_epi8(bytes, codes + r * padded + s0);
            odd[r] = _mm512_maskz_loadu_epi8(bytes, codes + r * padded + s0 + len / 2);
            as[r] = _mm512_maskz_loadu_ps(lanes, a_lanes + r * (padded / 8) + s0 / 8);
        }
        for (int j = 0; j < C; j++) {
            prefetch_ahead(w + j * row + s0 / 2, C * row, g_scales + j * groups + s0 / 32, C * groups, s0);
            const __m512i v = _mm512_maskz_loadu_epi8(bytes, w + j * row + s0 / 2);
            const __m512i lo = _mm512_and_si512(v, m15), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m15);
            const __m512 gs = _mm512_permutexvar_ps(expand, _mm512_castps128_ps512(
                _mm_maskz_loadu_ps((__mmask8)((1u << (len / 32)) - 1), g_scales + j * groups + s0 / 32)));
            for (int r = 0; r < R; r++) {
                const __m512i dot = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, even[r]), hi, odd[r]);
                acc[r][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(as[r], gs), acc[r][j]);
            }
        }
    }
    for (int r = 0; r < R; r++)
        for (int j = 0; j < C; j++) out[r * C + j] = _mm512_reduce_add_ps(acc[r][j]);
}

/// Lanes 4g..4g+3 of 8 take float g (of 2).
#define EXPAND2 _mm256_set_epi32(1, 1, 1, 1, 0, 0, 0, 0)

// The same on ymm, spans of 64: vpdpbusd (AVX-VNNI, `DOT` vnni_dot) or vpmaddubsw then vpmaddwd by ones (AVX2,
// avx2_dot). Two definitions, so the AVX2 one is compiled without AVX-VNNI (the compiler could otherwise fuse its
// vpmaddwd into a VNNI instruction that AVX2-only CPUs lack).
#define DEFINE_TILE_YMM(NAME, TARGET, DOT)                                                                                      \
__attribute__((target(TARGET), always_inline))                                                                                 \
static inline void NAME(const int R, const int C, const int8_t *codes, const float *a_lanes, long padded, const uint8_t *w,    \
                        const float *g_scales, float *out) {                                                                   \
    const long row = padded / 2, groups = padded / 32;                                                                         \
    const __m256i m15 = _mm256_set1_epi8(15), expand = EXPAND2;                                                                \
    __m256 acc[4][4];                                                                                                          \
    for (int r = 0; r < R; r++)                                                                                                \
        for (int j = 0; j < C; j++) acc[r][j] = _mm256_setzero_ps();                                                          \
    for (long s0 = 0; s0 < padded; s0 += 64) {                                                                                 \
        if (padded - s0 < 64) {                                                                                                \
            /* A last span of 32 values: 16 bytes of B, the low nibbles then the high ones in one vector. */                   \
            for (int j = 0; j < C; j++) {                                                                                      \
                const __m128i v = _mm_loadu_si128((const __m128i *)(w + j * row + s0 / 2));                                    \
                const __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), m15);                           \
                const __m256 gs = _mm256_set1_ps(g_scales[j * groups + s0 / 32]);                                             \
                for (int r = 0; r < R; r++) {                                                                                  \
                    const __m256i a = _mm256_loadu_si256((const __m256i *)(codes + r * padded + s0));                         \
                    const __m256 as = _mm256_set1_ps(a_lanes[r * (padded / 8) + s0 / 8]);                                     \
                    acc[r][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(DOT(q, a, _mm256_setzero_si256(), a)),                     \
                                                _mm256_mul_ps(as, gs), acc[r][j]);                                            \
                }                                                                                                              \
            }                                                                                                                  \
            break;                                                                                                             \
        }                                                                                                                      \
        __m256i even[4], odd[4];                                                                                               \
        __m256 as[4];                                                                                                          \
        for (int r = 0; r < R; r++) {                                                                                          \
            even[r] = _mm256_loadu_si256((const __m256i *)(codes + r * padded + s0));                                         \
            odd[r] = _mm256_loadu_si256((const __m256i *)(codes + r * padded + s0 + 32));                                     \
            as[r] = _mm256_loadu_ps(a_lanes + r * (padded / 8) + s0 / 8);                                                      \
        }                                                                                                                      \
        for (int j = 0; j < C; j++) {                                                                                          \
            if ((s0 & 127) == 0) prefetch_ahead(w + j * row + s0 / 2, C * row, g_scales + j * groups + s0 / 32, C * groups, s0);                   \
            const __m256i v = _mm256_loadu_si256((const __m256i *)(w + j * row + s0 / 2));                                    \
            const __m256i lo = _mm256_and_si256(v, m15), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m15);                \
            const __m256 gs = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_castsi128_ps(                               \
                _mm_loadl_epi64((const __m128i *)(g_scales + j * groups + s0 / 32)))), expand);                               \
            for (int r = 0; r < R; r++)                                                                                        \
                acc[r][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(DOT(lo, even[r], hi, odd[r])), _mm256_mul_ps(as[r], gs),       \
                                            acc[r][j]);                                                                        \
        }                                                                                                                      \
    }                                                                                                                          \
    for (int r = 0; r < R; r++)                                                                                                \
        for (int j = 0; j < C; j++) {                                                                                          \
            __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc[r][j]), _mm256_extractf128_ps(acc[r][j], 1));                    \
            s = _mm_add_ps(s, _mm_movehl_ps(s, s));                                                                            \
            out[r * C + j] = _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));                                                 \
        }                                                                                                                      \
}

/// lo . a + hi . b per 4-byte lane (the nibbles unsigned, the codes signed).
#define VNNI_DOT(lo, a, hi, b) _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), lo, a), hi, b)
#define AVX2_DOT(lo, a, hi, b) \
    _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(lo, a), _mm256_maddubs_epi16(hi, b)), _mm256_set1_epi16(1))
DEFINE_TILE_YMM(tile_vnni, "avx2,fma,avxvnni", VNNI_DOT)
DEFINE_TILE_YMM(tile_avx2, "avx2,fma", AVX2_DOT)

typedef void (*int8_tile)(const int8_t *, const float *, long, const uint8_t *, const float *, float *);

#define INT8_TILE(NAME, TARGET, BODY, R, C)                                                                                     \
    __attribute__((target(TARGET))) static void NAME##_##R##x##C(const int8_t *codes, const float *a_lanes, long padded,         \
                                                                 const uint8_t *w, const float *g_scales, float *out) {          \
        BODY(R, C, codes, a_lanes, padded, w, g_scales, out);                                                                  \
    }
#define ZMM_BODY(R, C, ...) tile_avx512vnni(R, C, __VA_ARGS__)
#define VNNI_BODY(R, C, ...) tile_vnni(R, C, __VA_ARGS__)
#define AVX2_BODY(R, C, ...) tile_avx2(R, C, __VA_ARGS__)
#define INT8_TILES(NAME, TARGET, BODY)                                                                                          \
    INT8_TILE(NAME, TARGET, BODY, 1, 4) INT8_TILE(NAME, TARGET, BODY, 1, 1) INT8_TILE(NAME, TARGET, BODY, 2, 2)                 \
    INT8_TILE(NAME, TARGET, BODY, 2, 1) INT8_TILE(NAME, TARGET, BODY, 3, 1) INT8_TILE(NAME, TARGET, BODY, 4, 2)                 \
    INT8_TILE(NAME, TARGET, BODY, 4, 1)
INT8_TILES(zmm, "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni", ZMM_BODY)
INT8_TILES(vnni, "avx2,fma,avxvnni", VNNI_BODY)
INT8_TILES(avx2, "avx2,fma", AVX2_BODY)

/// One row's `zero_term` on ymm, eight blocks a step in two chains: a serial scalar sum here cost as much as the dots
/// at K = 8192.
__attribute__((target("avx2,fma")))
static float zero_term_ymm(const float *scales, const uint8_t *zero_bytes, const float *sums, long blocks) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    long blk = 0;
    for (; blk + 16 <= blocks; blk += 16) {
        const __m256 z0 = zero_bytes ? _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(zero_bytes + blk))))
                                     : _mm256_set1_ps(8.0f);
        const __m256 z1 = zero_bytes ? _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(zero_bytes + blk + 8))))
                                     : _mm256_set1_ps(8.0f);
        acc0 = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_loadu_ps(scales + blk), z0), _mm256_loadu_ps(sums + blk), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_loadu_ps(scales + blk + 8), z1), _mm256_loadu_ps(sums + blk + 8), acc1);
    }
    const __m256 acc = _mm256_add_ps(acc0, acc1);
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h))) + zero_term(scales + blk, zero_bytes ? zero_bytes + blk : 0, sums + blk, blocks - blk);
}

/// `zero_term_ymm` on zmm, sixteen blocks a step in two chains (a decode step's zero terms were a third of its time
/// on ymm).
__attribute__((target("avx2,fma,avx512f")))
static float zero_term_zmm(const float *scales, const uint8_t *zero_bytes, const float *sums, long blocks) {
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    long blk = 0;
    if (zero_bytes) {
        for (; blk + 32 <= blocks; blk += 32) {
            const __m512i z = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(zero_bytes + blk)));
            const __m512i z1 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(zero_bytes + blk + 16)));
            acc0 = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_loadu_ps(scales + blk), _mm512_cvtepi32_ps(z)), _mm512_loadu_ps(sums + blk), acc0);
            acc1 = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_loadu_ps(scales + blk + 16), _mm512_cvtepi32_ps(z1)),
                                   _mm512_loadu_ps(sums + blk + 16), acc1);
        }
    } else {
        const __m512 eight = _mm512_set1_ps(8.0f);
        for (; blk + 32 <= blocks; blk += 32) {
            acc0 = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_loadu_ps(scales + blk), eight), _mm512_loadu_ps(sums + blk), acc0);
            acc1 = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_loadu_ps(scales + blk + 16), eight), _mm512_loadu_ps(sums + blk + 16), acc1);
        }
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) + zero_term(scales + blk, zero_bytes ? zero_bytes + blk : 0, sums + blk, blocks - blk);
}

static void gemv_vector(int zmm, const int8_tile wide[5], const int8_tile narrow[5], long rows, const int8_t *codes, const float *a_lanes,
                        const float *a_sums, const uint8_t *b, const float *g_scales, const float *scales, const uint8_t *zero_bytes, long blocks, long bs,
                        const float *bias, float *y, long ldy, long c0, long c1) {
    static const int width[5] = {0, 4, 2, 1, 2};
    const long padded = blocks * bs, row = padded / 2, groups = padded / 32;
    const int C = width[rows];
    float out[16];
    for (long c = c0; c < c1;) {
        const int n = (C > 1 && c + C <= c1) ? C : 1;
        // The next tile's zero points, a stream the tile itself does not touch (its scales are the group scales for
        // blocks of 32).
        if (zero_bytes)
            for (long j = c + n; j < c + 2 * n && j < c1; j++)
                for (long blk = 0; blk < blocks; blk += 64) _mm_prefetch((const char *)(zero_bytes + j * blocks + blk), _MM_HINT_T0);
        (n > 1 ? wide[rows] : narrow[rows])(codes, a_lanes, padded, b + c * row, g_scales + c * groups, out);
        for (int j = 0; j < n; j++) {
            const float *s = scales + (c + j) * blocks;
            const uint8_t *z = zero_bytes ? zero_bytes + (c + j) * blocks : 0;
            for (long r = 0; r < rows; r++) {
                const float zero = (zmm ? zero_term_zmm : zero_term_ymm)(s, z, a_sums + r * blocks, blocks);
                y[r * ldy + c + j] = (bias ? bias[c + j] : 0.0f) + (out[r * n + j] - zero);
            }
        }
        c += n;
    }
}
#endif

void osprey_nbits4_int8_gemv(int path, long rows, const int8_t *codes, const float *a_lanes, const float *a_sums, const uint8_t *b,
                             const float *g_scales, const float *scales, const uint8_t *zero_bytes, long blocks, long bs, const float *bias, float *y,
                             long ldy, long c0, long c1) {
#if defined(__x86_64__)
    static const int8_tile zmm_wide[5] = {0, zmm_1x4, zmm_2x2, 0, zmm_4x2}, zmm_narrow[5] = {0, zmm_1x1, zmm_2x1, zmm_3x1, zmm_4x1};
    static const int8_tile vnni_wide[5] = {0, vnni_1x4, vnni_2x2, 0, vnni_4x2}, vnni_narrow[5] = {0, vnni_1x1, vnni_2x1, vnni_3x1, vnni_4x1};
    static const int8_tile avx2_wide[5] = {0, avx2_1x4, avx2_2x2, 0, avx2_4x2}, avx2_narrow[5] = {0, avx2_1x1, avx2_2x1, avx2_3x1, avx2_4x1};
    if (rows >= 1 && rows <= 4 && path != OSPREY_QPATH_PORTABLE) {
        const int8_tile *wide = path == OSPREY_QPATH_AVX512VNNI ? zmm_wide : path == OSPREY_QPATH_AVXVNNI ? vnni_wide : avx2_wide;
        const int8_tile *narrow = path == OSPREY_QPATH_AVX512VNNI ? zmm_narrow : path == OSPREY_QPATH_AVXVNNI ? vnni_narrow : avx2_narrow;
        gemv_vector(path == OSPREY_QPATH_AVX512VNNI, wide, narrow, rows, codes, a_lanes, a_sums, b, g_scales, scales, zero_bytes, blocks, bs, bias, y, ldy, c0, c1);
        return;
    }
#endif
    osprey_nbits4_int8_gemv_portable(rows, osprey_nbits4_int8_span(path), codes, a_lanes, a_sums, b, g_scales, scales, zero_bytes, blocks, bs, bias, y,
                                     ldy, c0, c1);
}
