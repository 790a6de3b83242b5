// MatMulNBits with 4-bit weights kept packed (nbits_gemm.h). Dequantizing B at load kept 8x its bytes in memory and
// made every decode step (one row of A) stream 32 bits per weight; here a step streams the 4-bit blocks once.
// Decode (1-4 rows): A is reordered once per call so that a byte's low nibbles (even k) meet one vector of A and its
// high nibbles (odd k) the next, each nibble vector is dequantized with its block's scale and zero point and
// multiplied into the rows with
// FMA; the zero point comes off in the same conversion (q s - z s, one fused multiply-subtract).
// Prompts: each pair of 16-column strips is dequantized into a panel of about 2 * K floats that the packed float
// product's micro-kernel (packed_sgemm.c) multiplies from cache.
#include "include/nbits_gemm.h"
#include "include/float_activations.h"
#include "include/packed_sgemm.h"
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

/// Zero point i: a float, a byte, or 8 when the node has none.
static inline float zero_at(const float *zeros, const uint8_t *zero_bytes, long i) {
    return zeros ? zeros[i] : zero_bytes ? (float)zero_bytes[i] : 8.0f;
}

void osprey_nbits4_prepare_rows(long rows, const float *a, long lda, long k, long blocks, long block_size, long group, float *out) {
    const long padded = blocks * block_size, half = group / 2;
    for (long r = 0; r < rows; r++) {
        const float *x = a + r * lda;
        float *o = out + r * padded;
        for (long g = 0; g < padded; g += group)
            for (long i = 0; i < half; i++) {
                const long even = g + 2 * i, odd = even + 1;
                o[g + i] = even < k ? x[even] : 0.0f;
                o[g + half + i] = odd < k ? x[odd] : 0.0f;
            }
    }
}

void osprey_nbits4_gemv_portable(long rows, const float *prepared, const uint8_t *b, const float *scales, const float *zeros,
                                 const uint8_t *zero_bytes, long blocks, long block_size, long group, const float *bias, float *y,
                                 long ldy, long c0, long c1) {
    const long padded = blocks * block_size, row = padded / 2, half = group / 2;
    for (long r = 0; r < rows; r++) {
        const float *x = prepared + r * padded;
        for (long c = c0; c < c1; c++) {
            const uint8_t *q = b + c * row;
            float total = 0.0f;
            for (long blk = 0; blk < blocks; blk++) {
                const float sc = scales[c * blocks + blk], zs = sc * zero_at(zeros, zero_bytes, c * blocks + blk);
                // Byte i of a group holds its values 2i (low nibble, at x[g + i]) and 2i + 1 (high, x[g + half + i]).
                for (long p = blk * block_size; p < (blk + 1) * block_size; p += 2) {
                    const long g = p / group * group, i = (p - g) / 2;
                    const uint8_t byte = q[p / 2];
                    total += ((float)(byte & 15) * sc - zs) * x[g + i] + ((float)(byte >> 4) * sc - zs) * x[g + half + i];
                }
            }
            y[r * ldy + c] = (bias ? bias[c] : 0.0f) + total;
        }
    }
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma"), always_inline))
static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// A decode step streams B, its scales and zero points from memory (a Llama layer's B is far past the caches): each
// tile prefetches the next tile's (`next` ahead: the same place C columns on), a distance that grows with the tile's
// work. A K = 2048, N = 8192 step took about 0.7 ms with the hardware prefetcher alone, 0.57 prefetching a fixed 512
// bytes ahead, 0.53 this way.
__attribute__((always_inline))
static inline void prefetch_b(const uint8_t *q, long p, long next) {
    if ((p & 127) == 0) _mm_prefetch((const char *)(q + p / 2 + next), _MM_HINT_T0);
}
__attribute__((always_inline))
static inline void prefetch_scales(const float *scales, const float *zeros, const uint8_t *zero_bytes, long blk, long next) {
    if ((blk & 15) != 0) return;
    _mm_prefetch((const char *)(scales + blk + next), _MM_HINT_T0);
    if (zeros) _mm_prefetch((const char *)(zeros + blk + next), _MM_HINT_T0);
    if (zero_bytes) _mm_prefetch((const char *)(zero_bytes + blk + next), _MM_HINT_T0);
}

// R rows times C columns (R * C <= 4 on ymm, 8 on zmm: two accumulators each, low and high nibbles, so eight FMA chains hide the
// latency at one row): each column's nibbles are converted and scaled once and serve every row. Eight bytes at a
// time are widened to 32-bit lanes first, where one AND and one shift split the nibbles.
__attribute__((target("avx2,fma"), always_inline))
static inline void gemv_tile(const int R, const int C, const float *x, long padded, const uint8_t *q, const float *scales,
                             const float *zeros, const uint8_t *zero_bytes, long blocks, long bs, long group, float *out) {
    const long row = padded / 2, half = group / 2;
    const __m256i m15 = _mm256_set1_epi32(15);
    __m256 lo[4][4], hi[4][4];
    for (int r = 0; r < R; r++)
        for (int j = 0; j < C; j++) lo[r][j] = hi[r][j] = _mm256_setzero_ps();
    for (long blk = 0; blk < blocks; blk++) {
        __m256 s[4], zs[4];
        for (int j = 0; j < C; j++) {
            prefetch_scales(scales + j * blocks, zeros ? zeros + j * blocks : 0, zero_bytes ? zero_bytes + j * blocks : 0, blk, C * blocks);
            const float sj = scales[j * blocks + blk];
            s[j] = _mm256_set1_ps(sj);
            zs[j] = _mm256_set1_ps(sj * zero_at(zeros, zero_bytes, j * blocks + blk));
        }
        for (long p = blk * bs; p < (blk + 1) * bs; p += 16) {
            // Values p..p+15 of the group at g: low nibbles at x[g + t], high at x[g + half + t].
            const long g = p / group * group, t = (p - g) / 2;
            for (int j = 0; j < C; j++) {
                prefetch_b(q + j * row, p, C * row);
                const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(q + j * row + p / 2)));
                const __m256 wl = _mm256_fmsub_ps(_mm256_cvtepi32_ps(_mm256_and_si256(v, m15)), s[j], zs[j]);
                const __m256 wh = _mm256_fmsub_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(v, 4)), s[j], zs[j]);
                for (int r = 0; r < R; r++) {
                    lo[r][j] = _mm256_fmadd_ps(wl, _mm256_loadu_ps(x + r * padded + g + t), lo[r][j]);
                    hi[r][j] = _mm256_fmadd_ps(wh, _mm256_loadu_ps(x + r * padded + g + half + t), hi[r][j]);
                }
            }
        }
    }
    for (int r = 0; r < R; r++)
        for (int j = 0; j < C; j++) out[r * C + j] = hsum8(_mm256_add_ps(lo[r][j], hi[r][j]));
}

// The same on zmm for groups of 32 (blocks of 32 or more): sixteen bytes widen to one vector of 16 lanes.
__attribute__((target("avx512f,avx2,fma"), always_inline))
static inline void gemv_tile16(const int R, const int C, const float *x, long padded, const uint8_t *q, const float *scales,
                               const float *zeros, const uint8_t *zero_bytes, long blocks, long bs, long group, float *out) {
    (void)group;
    const long row = padded / 2;
    const __m512i m15 = _mm512_set1_epi32(15);
    __m512 lo[4][4], hi[4][4];
    for (int r = 0; r < R; r++)
        for (int j = 0; j < C; j++) lo[r][j] = hi[r][j] = _mm512_setzero_ps();
    for (long blk = 0; blk < blocks; blk++) {
        __m512 s[4], zs[4];
        for (int j = 0; j < C; j++) {
            prefetch_scales(scales + j * blocks, zeros ? zeros + j * blocks : 0, zero_bytes ? zero_bytes + j * blocks : 0, blk, C * blocks);
            const float sj = scales[j * blocks + blk];
            s[j] = _mm512_set1_ps(sj);
            zs[j] = _mm512_set1_ps(sj * zero_at(zeros, zero_bytes, j * blocks + blk));
        }
        for (long p = blk * bs; p < (blk + 1) * bs; p += 32) {
            for (int j = 0; j < C; j++) {
                prefetch_b(q + j * row, p, C * row);
                const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(q + j * row + p / 2)));
                const __m512 wl = _mm512_fmsub_ps(_mm512_cvtepi32_ps(_mm512_and_si512(v, m15)), s[j], zs[j]);
                const __m512 wh = _mm512_fmsub_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(v, 4)), s[j], zs[j]);
                for (int r = 0; r < R; r++) {
                    lo[r][j] = _mm512_fmadd_ps(wl, _mm512_loadu_ps(x + r * padded + p), lo[r][j]);
                    hi[r][j] = _mm512_fmadd_ps(wh, _mm512_loadu_ps(x + r * padded + p + 16), hi[r][j]);
                }
            }
        }
    }
    for (int r = 0; r < R; r++)
        for (int j = 0; j < C; j++) out[r * C + j] = _mm512_reduce_add_ps(_mm512_add_ps(lo[r][j], hi[r][j]));
}

typedef void (*gemv_body)(const float *, long, const uint8_t *, const float *, const float *, const uint8_t *, long, long, long, float *);

#define GEMV_TILE(NAME, TILE, TARGET, R, C)                                                                        \
    __attribute__((target(TARGET))) static void NAME##_##R##x##C(const float *x, long padded, const uint8_t *q,         \
                                                                 const float *scales, const float *zeros,              \
                                                                 const uint8_t *zero_bytes, long blocks, long bs,      \
                                                                 long group, float *out) {                             \
        TILE(R, C, x, padded, q, scales, zeros, zero_bytes, blocks, bs, group, out);                                   \
    }
#define GEMV_TILES(NAME, TILE, TARGET) \
    GEMV_TILE(NAME, TILE, TARGET, 1, 4) GEMV_TILE(NAME, TILE, TARGET, 1, 1) GEMV_TILE(NAME, TILE, TARGET, 2, 2) \
    GEMV_TILE(NAME, TILE, TARGET, 2, 1) GEMV_TILE(NAME, TILE, TARGET, 3, 1) GEMV_TILE(NAME, TILE, TARGET, 4, 1)
GEMV_TILES(ymm, gemv_tile, "avx2,fma")
GEMV_TILES(zmm, gemv_tile16, "avx512f,avx2,fma")
// 32 zmm registers hold two columns' accumulators for three and four rows as well.
GEMV_TILE(zmm, gemv_tile16, "avx512f,avx2,fma", 3, 2) GEMV_TILE(zmm, gemv_tile16, "avx512f,avx2,fma", 4, 2)

static void gemv_vector(int zmm, long rows, const float *x, const uint8_t *b, const float *scales, const float *zeros,
                        const uint8_t *zero_bytes, long blocks, long bs, long group, const float *bias, float *y, long ldy, long c0,
                        long c1) {
    static const gemv_body wide[2][5] = {{0, ymm_1x4, ymm_2x2, 0, 0}, {0, zmm_1x4, zmm_2x2, zmm_3x2, zmm_4x2}};
    static const gemv_body narrow[2][5] = {{0, ymm_1x1, ymm_2x1, ymm_3x1, ymm_4x1}, {0, zmm_1x1, zmm_2x1, zmm_3x1, zmm_4x1}};
    static const int width[2][5] = {{0, 4, 2, 1, 1}, {0, 4, 2, 2, 2}};
    const long padded = blocks * bs, row = padded / 2;
    const int C = width[zmm][rows];
    float out[16];
    for (long c = c0; c < c1;) {
        const int n = (C > 1 && c + C <= c1) ? C : 1;
        (n > 1 ? wide[zmm][rows] : narrow[zmm][rows])(x, padded, b + c * row, scales + c * blocks, zeros ? zeros + c * blocks : 0,
                                                      zero_bytes ? zero_bytes + c * blocks : 0, blocks, bs, group, out);
        for (long r = 0; r < rows; r++)
            for (int j = 0; j < n; j++) y[r * ldy + c + j] = (bias ? bias[c + j] : 0.0f) + out[r * n + j];
        c += n;
    }
}
#endif

long osprey_nbits4_group(long block_size) { return block_size >= 32 && osprey_float_avx512() ? 32 : 16; }

void osprey_nbits4_gemv(long rows, const float *prepared, const uint8_t *b, const float *scales, const float *zeros,
                        const uint8_t *zero_bytes, long blocks, long block_size, long group, const float *bias, float *y, long ldy,
                        long c0, long c1) {
#if defined(__x86_64__)
    if (rows >= 1 && rows <= 4 && osprey_float_activations_fast()) {
        // The zmm body reads groups of 32 only; the ymm one either.
        const int zmm = group == 32 && osprey_float_avx512();
        gemv_vector(zmm, rows, prepared, b, scales, zeros, zero_bytes, blocks, block_size, group, bias, y, ldy, c0, c1);
        return;
    }
#endif
    osprey_nbits4_gemv_portable(rows, prepared, b, scales, zeros, zero_bytes, blocks, block_size, group, bias, y, ldy, c0, c1);
}

static void dequantize_strip_portable(const uint8_t *b, const float *scales, const float *zeros, const uint8_t *zero_bytes,
                                      long blocks, long bs, long n, long c0, float *panel) {
    const long padded = blocks * bs, row = padded / 2;
    for (long j = 0; j < 16; j++) {
        const long c = c0 + j;
        for (long blk = 0; blk < blocks; blk++) {
            const float s = c < n ? scales[c * blocks + blk] : 0.0f, z = c < n ? zero_at(zeros, zero_bytes, c * blocks + blk) : 8.0f;
            for (long p = blk * bs; p < (blk + 1) * bs; p += 2) {
                const uint8_t byte = c < n ? b[c * row + p / 2] : 0;
                panel[p * 16 + j] = c < n ? ((float)(byte & 15) - z) * s : 0.0f;
                panel[(p + 1) * 16 + j] = c < n ? ((float)(byte >> 4) - z) * s : 0.0f;
            }
        }
    }
}

#if defined(__x86_64__)
// Eight vectors (one per column) become eight rows (one per depth step) of eight columns.
__attribute__((target("avx2,fma"), always_inline))
static inline void transpose8(__m256 v[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) { t[i] = _mm256_unpacklo_ps(v[i], v[i + 1]); t[i + 1] = _mm256_unpackhi_ps(v[i], v[i + 1]); }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44); u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44); u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int i = 0; i < 4; i++) {
        v[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
        v[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
}

// Eight columns at a time: per group of 16 depth steps each column's even and odd nibbles are dequantized as
// vectors, then transposed to the panel's rows.
__attribute__((target("avx2,fma")))
static void dequantize_strip_avx2(const uint8_t *b, const float *scales, const float *zeros, const uint8_t *zero_bytes,
                                  long blocks, long bs, long n, long c0, float *panel) {
    const long padded = blocks * bs, row = padded / 2;
    const __m128i mask = _mm_set1_epi8(0x0F);
    for (long half = 0; half < 16; half += 8) {
        const long first = c0 + half;
        const int live = n - first >= 8 ? 8 : n - first > 0 ? (int)(n - first) : 0;
        for (long blk = 0; blk < blocks; blk++) {
            __m256 s[8], z[8];
            for (int j = 0; j < live; j++) {
                s[j] = _mm256_set1_ps(scales[(first + j) * blocks + blk]);
                z[j] = _mm256_set1_ps(zero_at(zeros, zero_bytes, (first + j) * blocks + blk));
            }
            for (long g = blk * bs; g < (blk + 1) * bs; g += 16) {
                __m256 even[8], odd[8];
                for (int j = 0; j < 8; j++) {
                    if (j >= live) { even[j] = odd[j] = _mm256_setzero_ps(); continue; }
                    const __m128i v = _mm_loadl_epi64((const __m128i *)(b + (first + j) * row + g / 2));
                    const __m256 ql = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_and_si128(v, mask)));
                    const __m256 qh = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(v, 4), mask)));
                    even[j] = _mm256_mul_ps(_mm256_sub_ps(ql, z[j]), s[j]);
                    odd[j] = _mm256_mul_ps(_mm256_sub_ps(qh, z[j]), s[j]);
                }
                transpose8(even);
                transpose8(odd);
                for (int i = 0; i < 8; i++) {
                    _mm256_storeu_ps(panel + (g + 2 * i) * 16 + half, even[i]);
                    _mm256_storeu_ps(panel + (g + 2 * i + 1) * 16 + half, odd[i]);
                }
            }
        }
    }
}

// The same on zmm: each vector holds column j in its low half and column j + 8 in its high half, so one 8 x 8
// transpose per half turns them into whole 16-column panel rows.
__attribute__((target("avx512f,avx2,fma")))
static void dequantize_strip_avx512(const uint8_t *b, const float *scales, const float *zeros, const uint8_t *zero_bytes,
                                    long blocks, long bs, long n, long c0, float *panel) {
    const long padded = blocks * bs, row = padded / 2;
    const long live = n - c0 >= 16 ? 16 : n - c0 > 0 ? n - c0 : 0;
    const __m512i m15 = _mm512_set1_epi32(15);
    // The transpose's last step: 128-bit lanes 0 and 2 (low) or 1 and 3 (high) of two vectors, interleaved.
    const __m512i low = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
    const __m512i high = _mm512_setr_epi32(4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
    for (long blk = 0; blk < blocks; blk++) {
        __m512 s[8], z[8];
        for (int j = 0; j < 8; j++) {
            const long a = c0 + j, c = a + 8;
            const float sa = j < live ? scales[a * blocks + blk] : 0.0f;
            const float za = j < live ? zero_at(zeros, zero_bytes, a * blocks + blk) : 0.0f;
            const float sc = j + 8 < live ? scales[c * blocks + blk] : 0.0f;
            const float zc = j + 8 < live ? zero_at(zeros, zero_bytes, c * blocks + blk) : 0.0f;
            s[j] = _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(sa), _mm512_set1_ps(sc));
            z[j] = _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(za), _mm512_set1_ps(zc));
        }
        for (long g = blk * bs; g < (blk + 1) * bs; g += 16) {
            __m512 even[8], odd[8];
            for (int j = 0; j < 8; j++) {
                __m128i v8 = j < live ? _mm_loadl_epi64((const __m128i *)(b + (c0 + j) * row + g / 2)) : _mm_setzero_si128();
                if (j + 8 < live)
                    v8 = _mm_castpd_si128(_mm_loadh_pd(_mm_castsi128_pd(v8), (const double *)(b + (c0 + j + 8) * row + g / 2)));
                const __m512i v = _mm512_cvtepu8_epi32(v8);
                even[j] = _mm512_mul_ps(_mm512_sub_ps(_mm512_cvtepi32_ps(_mm512_and_si512(v, m15)), z[j]), s[j]);
                odd[j] = _mm512_mul_ps(_mm512_sub_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(v, 4)), z[j]), s[j]);
            }
            __m512 *sets[2] = {even, odd};
            for (int e = 0; e < 2; e++) {
                __m512 *w = sets[e], t[8], u[8];
                for (int i = 0; i < 8; i += 2) { t[i] = _mm512_unpacklo_ps(w[i], w[i + 1]); t[i + 1] = _mm512_unpackhi_ps(w[i], w[i + 1]); }
                for (int i = 0; i < 8; i += 4) {
                    u[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44); u[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
                    u[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44); u[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
                }
                for (int i = 0; i < 4; i++) {
                    _mm512_storeu_ps(panel + (g + 2 * i + e) * 16, _mm512_permutex2var_ps(u[i], low, u[i + 4]));
                    _mm512_storeu_ps(panel + (g + 2 * (i + 4) + e) * 16, _mm512_permutex2var_ps(u[i], high, u[i + 4]));
                }
            }
        }
    }
}
#endif

void osprey_nbits4_dequantize_strip(const uint8_t *b, const float *scales, const float *zeros, const uint8_t *zero_bytes,
                                    long blocks, long block_size, long n, long c0, float *panel, int portable) {
#if defined(__x86_64__)
    if (!portable && osprey_float_avx512()) {
        dequantize_strip_avx512(b, scales, zeros, zero_bytes, blocks, block_size, n, c0, panel);
        return;
    }
    if (!portable && osprey_float_activations_fast()) {
        dequantize_strip_avx2(b, scales, zeros, zero_bytes, blocks, block_size, n, c0, panel);
        return;
    }
#endif
    dequantize_strip_portable(b, scales, zeros, zero_bytes, blocks, block_size, n, c0, panel);
}

void osprey_nbits4_gemm(long rows, const float *a, long lda, long k, const uint8_t *b, const float *scales, const float *zeros,
                        const uint8_t *zero_bytes, long blocks, long block_size, long n, const float *bias, float *y, long ldy,
                        long pair0, long pair1, float *panel) {
    const long padded = blocks * block_size;
    for (long pair = pair0; pair < pair1; pair++) {
        const long c0 = 32 * pair, width = n - c0 < 32 ? n - c0 : 32;
        osprey_nbits4_dequantize_strip(b, scales, zeros, zero_bytes, blocks, block_size, n, c0, panel, 0);
        if (width > 16)
            osprey_nbits4_dequantize_strip(b, scales, zeros, zero_bytes, blocks, block_size, n, c0 + 16, panel + padded * 16, 0);
        float start[32] = {0};
        if (bias) memcpy(start, bias + c0, (size_t)width * sizeof(float));
        for (long r = 0; r < rows; r += 6) {
            const long count = rows - r < 6 ? rows - r : 6;
            const float *x = a + r * lda;
            if (width == 32) {
                osprey_sgemm_strip_pair(count, k, x, lda, panel, 16, padded * 16, start, y + r * ldy + c0, ldy, 0);
                continue;
            }
            // A last pair narrower than 32 columns goes through a tile.
            float tile[6 * 32];
            if (width > 16) osprey_sgemm_strip_pair(count, k, x, lda, panel, 16, padded * 16, start, tile, 32, 0);
            else osprey_sgemm_strip(count, k, x, lda, panel, 16, start, tile, 32, 0);
            for (long i = 0; i < count; i++) memcpy(y + (r + i) * ldy + c0, tile + i * 32, (size_t)width * sizeof(float));
        }
    }
}
