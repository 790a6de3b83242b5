#ifndef OSPREY_QUANTIZED_CONV_H
#define OSPREY_QUANTIZED_CONV_H

#include <stdint.h>

/// Columns per packed u8 panel of the right-hand operand of `osprey_qgemm_u8s8`.
#define OSPREY_QU8_PANEL 16

/// What an integer GEMM or depthwise kernel writes for element (r, c) with exact int32 sum `acc`.
enum {
    /// int32: acc + bias[r].
    OSPREY_QOUT_INT32 = 0,
    /// uint8 / int8: saturate(round_half_even(float(acc + bias[r]) * scale[r]) + zero_point).
    OSPREY_QOUT_U8 = 1,
    OSPREY_QOUT_S8 = 2,
    /// float32: float(acc + bias[r]) * scale[r] + float_bias[r].
    OSPREY_QOUT_F32 = 3,
};

/// The fused epilogue of an integer product: per output row r (output channel, or output column of a MatMul).
typedef struct {
    /// int32 added to the sum (NULL: none).
    const int32_t *bias;
    /// Multiplier per row (required for U8, S8 and F32 outputs).
    const float *scale;
    /// float added after scaling (F32 outputs only; NULL: none).
    const float *float_bias;
    /// Output zero point (U8 / S8).
    int32_t zero_point;
    /// One of OSPREY_QOUT_*.
    int32_t kind;
    /// 1: element (r, c) goes to out[c * ldo + r] (a MatMul computed as W^T x A^T); 0: out[r * ldo + c].
    int32_t transposed;
} osprey_qepilogue;

/// C[M x N] = A x B with the epilogue, u8 x s8 products through AVX2 vpmaddubsw + vpmaddwd (exact because every
/// |a| <= 64: a pair of products is at most 2 * 255 * 64 = 32640, below vpmaddubsw's int16 saturation).
///
/// A: M rows of `kquads` * 4 int8 (row stride lda bytes, zero past K). packed_b: ceil(N / 16) panels; panel j holds,
/// for each k quad q, 16 columns x 4 bytes [b(4q + i, 16j + c)] (`osprey_qpack_u8`). The caller folds any zero point
/// of B into ep->bias (-zero * row sum of A).
void osprey_qgemm_u8s8(int m, int n, int kquads, const int8_t *a, int lda, const uint8_t *packed_b,
                       const osprey_qepilogue *ep, void *out, int ldo);

/// Same product and epilogue with int16 operands (`osprey_qgemm_s16`'s layout): exact for any 8-bit values.
void osprey_qgemm_s16_epilogue(int m, int n, int kpairs, const int16_t *a, int lda, const int16_t *packed_b,
                               const osprey_qepilogue *ep, void *out, int ldo);

/// Either product by operand kind, `steps` k steps of 4 bytes per row of A (`lda` bytes per row): `wide` 0 is
/// `osprey_qgemm_u8s8` (k quads of int8), 1 is `osprey_qgemm_s16_epilogue` (k pairs of int16), 2 is the u8 x s8
/// product with full-range int8 A (exact on the VNNI and portable bodies, which it takes).
void osprey_qgemm_packed(int wide, int m, int n, int steps, const void *a, int lda, const void *packed_b, const osprey_qepilogue *ep,
                         void *out, int ldo);

/// Packs B (K x N bytes, row stride ldb) into `osprey_qgemm_u8s8` panels; `flip` XORs every byte with 0x80 (int8 read
/// as uint8 + 128). Rows past K (up to the quad) are zero.
void osprey_qpack_u8(int k, int n, const uint8_t *b, int ldb, int flip, uint8_t *packed);

/// Packs B^T for a MatMul's activations: A is N rows of K bytes (row stride lda); panel column c is row c of A.
void osprey_qpack_u8_rows(int k, int n, const uint8_t *a, int lda, int flip, uint8_t *packed);

/// Packs B (K x N 8-bit values, row stride ldb; `is_signed` for int8) minus `zero` into `osprey_qgemm_s16` panels.
void osprey_qpack_s16(int k, int n, const void *b, int ldb, int is_signed, int32_t zero, int16_t *packed);

/// im2col of one image's channel block in bytes: C x H x W input into (C * KH * KW) rows x (OH * OW) columns;
/// windows reaching outside the input read `pad`.
void osprey_im2col_u8(const uint8_t *x, int c, int h, int w, int kh, int kw, int sh, int sw, int dh, int dw,
                      int pt, int pl, int oh, int ow, uint8_t pad, uint8_t *out);

/// `osprey_im2col_u8` for output rows [oy0, oy1) only: the columns oy0 * OW ..< oy1 * OW of every row of the same
/// (C * KH * KW) x (OH * OW) matrix, so that bands of rows can be filled by different threads.
void osprey_im2col_u8_rows(const uint8_t *x, int c, int h, int w, int kh, int kw, int sh, int sw, int dh, int dw,
                           int pt, int pl, int oh, int ow, int oy0, int oy1, uint8_t pad, uint8_t *out);

/// Depthwise 2-D convolution of one channel plane: sum over the window of (x - x_zero) * w (w already centred,
/// KH x KW int32), then the epilogue's row 0 (bias[0], scale[0]) into OH x OW outputs. `scratch`: at least
/// osprey_qdepthwise_scratch(...) int32s.
void osprey_qdepthwise(const uint8_t *x, int is_signed, int32_t x_zero, int h, int w, const int32_t *weights, int kh, int kw,
                       int sh, int sw, int dh, int dw, int pt, int pl, int oh, int ow,
                       const osprey_qepilogue *ep, void *out, int32_t *scratch);

/// `osprey_qdepthwise` over planes [first, first + count) of an N x C x H x W tensor (x and out at plane 0): plane p
/// is channel p % channels, with that channel's weights and epilogue row (ep->bias[c], ep->scale[c]).
/// `channel_weights` (the same weights through `osprey_qdepthwise_channels_pack`, or NULL) lets small planes take
/// the channel kernel below on AVX2.
void osprey_qdepthwise_planes(const uint8_t *x, int is_signed, int32_t x_zero, int first, int count, int channels, int h, int w,
                              const int32_t *weights, const int32_t *channel_weights, int kh, int kw, int sh, int sw, int dh, int dw,
                              int pt, int pl, int oh, int ow, const osprey_qepilogue *ep, void *out, int32_t *scratch);

#if defined(__x86_64__)
// The vector bodies in #if defined(__x86_64__) exist on x86-64 only, as do their callers (osprey_qdepthwise_planes,
// osprey_qdepthwise): other targets need no stubs of them.
/// `osprey_qdepthwise_planes` with the channels in the vector (AVX2 only; quantized_depthwise_channels.c): blocks of 16
/// planes transposed into 16-byte pixels, all 16 channels of an output pixel per vector, transposed back. For planes
/// narrower than the planar kernel's 16-output vectors (`osprey_qdepthwise_channels_fits`); the planar kernel's
/// portable body is its reference twin. `packed`: the weights through `osprey_qdepthwise_channels_pack`; `scratch`:
/// osprey_qdepthwise_channels_scratch(...) int32s.
void osprey_qdepthwise_channels_avx2(const uint8_t *x, int is_signed, int32_t x_zero, int first, int count, int channels, int h, int w,
                                     const int32_t *packed, int kh, int kw, int sh, int sw, int dh, int dw, int pt, int pl, int oh, int ow,
                                     const osprey_qepilogue *ep, void *out, int32_t *scratch);

/// The channel kernel on AVX512-VNNI + VBMI: each kernel row's taps of an output pixel as one load, one vpermb and one
/// vpdpbusd for the block's 16 channels. `weights`: C x KH x KW centred int32 (the planar layout); `scratch` as the
/// AVX2 body's. Returns 0 when a row's taps span more than 4 pixels (nothing written) or a weight is beyond int8
/// (blocks before it may be written): the caller then computes the whole range with another body.
int osprey_qdepthwise_channels_avx512vnni(const uint8_t *x, int is_signed, int32_t x_zero, int first, int count, int channels, int h, int w,
                                          const int32_t *weights, int kh, int kw, int sh, int sw, int dh, int dw, int pt, int pl, int oh, int ow,
                                          const osprey_qepilogue *ep, void *out, int32_t *scratch);
#endif

/// int32s of `osprey_qdepthwise_channels_pack`'s output.
long osprey_qdepthwise_channels_packed_count(int channels, int taps);

/// Centred depthwise weights (`channels` x `taps` int32, |w| <= 255) into the channel kernel's blocks: per 16
/// channels, each tap pair as two vectors of int16 pairs in vpunpck{l,h}wd lane order, then the 16 weight sums.
void osprey_qdepthwise_channels_pack(const int32_t *weights, int channels, int taps, int32_t *packed);

/// 1 when `osprey_qdepthwise_planes` takes the channel kernel for this geometry (on AVX2).
int osprey_qdepthwise_channels_fits(int kh, int kw, int oh, int ow);

/// int32s of scratch `osprey_qdepthwise_channels_avx2` needs.
int osprey_qdepthwise_channels_scratch(int kh, int kw, int sh, int sw, int dh, int dw, int oh, int ow);

#if defined(__x86_64__)
/// `osprey_qdepthwise_planes` on AVX512-VNNI + VBMI (quantized_depthwise_zmm.c): 16 outputs per zmm, one vpdpbusd per
/// kernel row and 4 taps; rows of 16 outputs, or for small planes runs across the padded rows. `scratch`:
/// osprey_qdepthwise_zmm_scratch(...) int32s. Returns 0 when the geometry (nothing written) or a weight beyond int8
/// (planes before it may be written) does not fit it: the caller then computes the whole range with another body.
int osprey_qdepthwise_planes_avx512vnni(const uint8_t *x, int is_signed, int32_t x_zero, int first, int count, int channels, int h, int w,
                                        const int32_t *weights, int kh, int kw, int sh, int sw, int dh, int dw, int pt, int pl, int oh, int ow,
                                        const osprey_qepilogue *ep, void *out, int32_t *scratch);
#endif

/// int32s of scratch `osprey_qdepthwise_planes_avx512vnni` needs.
int osprey_qdepthwise_zmm_scratch(int kh, int kw, int sh, int sw, int dh, int dw, int oh, int ow);

/// 1 when the CPU runs `osprey_qdepthwise_planes_avx512vnni` (AVX-512 F/BW/VL, VNNI and VBMI).
int osprey_qdepthwise_zmm_supported(void);

/// int32s of scratch `osprey_qdepthwise` and `osprey_qdepthwise_planes` need for these geometries.
int osprey_qdepthwise_scratch(int h, int w, int kh, int kw, int sh, int sw, int dh, int dw, int pt, int pl, int oh, int ow);

/// QLinearAdd / QLinearMul on same-shape 8-bit tensors, with the float operations of onnxruntime's x86 kernels:
/// add: saturate(round(a * ra + (b * rb + (zc - (ra * za + rb * zb))))) with ra = sa / sc, rb = sb / sc, each step a fused
/// multiply-add; mul: saturate(round((a - za)(b - zb) * (sa * sb / sc) + zc)).
void osprey_qlinear_binary(int is_mul, int is_signed, long count, const uint8_t *a, float sa, int32_t za,
                           const uint8_t *b, float sb, int32_t zb, float sc, int32_t zc, uint8_t *out);

/// Sums of `planes` planes of `size` 8-bit values (int32, exact).
void osprey_qplane_sums(const uint8_t *x, int is_signed, long planes, long size, int32_t *sums);

/// out[r * ldo + c] = epilogue(sum_k x[r][k] * w[k][c]) for M rows of activations and a constant weight matrix,
/// every lane an output column, 6-row tiles (quantized_gemv.c). x: M rows of K bytes (row stride ldx; `flip` XORs each with 0x80:
/// int8 read as uint8 + 128, its zero point moving by 128 too); packed: the weights as N rows of K int8 centred values
/// (|w| <= 64, or any int8 with `full_range` 1) through `osprey_qpack_u8_rows`. The epilogue's bias, scale and float_bias are per column c here;
/// `transposed` is ignored. The caller folds the activations' zero point into the bias (-zero * column sum).
void osprey_qgemv_u8s8(int m, int n, int k, const uint8_t *x, int ldx, int flip, int full_range, const uint8_t *packed,
                       const osprey_qepilogue *ep, void *out, int ldo);

/// DequantizeLinear (and a bias Add) applied to an 8-bit product's saturated values: (q - zero) * scale [+ bias[c]].
typedef struct {
    float scale;
    float zero;
    /// float per output column added after dequantizing (NULL: none).
    const float *bias;
} osprey_qdequantize;

/// `osprey_qgemv_u8s8` with a U8 / S8 epilogue whose saturated values are dequantized by `dq` into float outputs:
/// the same floats as storing the bytes, then DequantizeLinear, then the bias Add (QLinearMatMul -> DQ -> Add).
void osprey_qgemv_u8s8_dequantized(int m, int n, int k, const uint8_t *x, int ldx, int flip, int full_range, const uint8_t *packed,
                                   const osprey_qepilogue *ep, const osprey_qdequantize *dq, float *out, int ldo);

/// The last `t` (< 16) columns of a u8 x s8 convolution GEMM (quantized_conv_tail.c): columns [0, t) of `matrix`
/// (K rows of `ldm` bytes; `flip` as for `osprey_qgemv_u8s8`) gathered into rows and multiplied by the M x K weights
/// packed through `osprey_qpack_u8_rows` (|w| <= 64), the epilogue per output channel c (bias[c], scale[c]), element
/// (c, j) stored to out[c * ldo + j]. Costs t columns' work where a padded panel costs 16. `scratch`:
/// osprey_qconv_column_tail_scratch(m, k, t) bytes.
void osprey_qconv_column_tail(int m, int k, int t, const uint8_t *matrix, int ldm, int flip, int full_range, const uint8_t *packed_rows,
                              const osprey_qepilogue *ep, void *out, int ldo, uint8_t *scratch);

/// Bytes of scratch `osprey_qconv_column_tail` needs.
long osprey_qconv_column_tail_scratch(int m, int k, int t);

/// The bodies of the u8 x s8 kernels: plain C; AVX2 vpmaddubsw + vpmaddwd (exact for weights in [-64, 64]); AVX-VNNI
/// (VEX vpdpbusd on ymm) and AVX512-VNNI (vpdpbusd on zmm: one per 16-column panel step), exact for any int8 weights.
enum {
    OSPREY_QPATH_PORTABLE = 0,
    OSPREY_QPATH_AVX2 = 1,
    OSPREY_QPATH_AVXVNNI = 2,
    OSPREY_QPATH_AVX512VNNI = 3,
};

/// The body the u8 x s8 kernels take now (OSPREY_QPATH_*): the CPU's best (cpuid, checked once) unless forced.
int osprey_qkernels_path(void);

/// The body for one call: `osprey_qkernels_path()`, except that full-range weights (`full_range` 1: beyond [-64, 64])
/// never take the AVX2 body (its int16 pair sums would saturate) but the portable one.
int osprey_qkernels_u8s8_path(int full_range);

/// 1 when the current body multiplies any int8 weights exactly (a VNNI path): plans made now may keep full-range
/// weights in one u8 x s8 pass instead of splitting them or widening to int16.
int osprey_qkernels_exact_int8(void);

/// Forces `path` (OSPREY_QPATH_*; -1: the CPU decides again) when the CPU has it; returns the path now in effect.
/// Not thread-safe: tests only (an AVX2 run on a VNNI machine, each VNNI body on its own).
int osprey_qkernels_force_path(int path);

/// 1 while `osprey_qkernels_force_portable(1)` is in effect.
int osprey_qkernels_portable_forced(void);

/// 1 when the AVX2 paths of these kernels run on this CPU.
int osprey_qconv_uses_avx2(void);

/// 1: every kernel above (and osprey_qgemm_s16) takes its portable body, the reference twin tests compare the
/// AVX2 bodies against; 0 (the default): the CPU decides. Not thread-safe: tests only.
void osprey_qkernels_force_portable(int on);

#endif
