// The zmm requantization epilogue of 16 int32 sums (bias included), shared by the AVX512-VNNI depthwise bodies
// (quantized_depthwise_zmm.c, quantized_depthwise_channels.c). The includer defines ZMM_EPILOGUE_TARGET.
#ifndef OSPREY_QUANTIZED_ZMM_EPILOGUE_H
#define OSPREY_QUANTIZED_ZMM_EPILOGUE_H
#include <immintrin.h>
#include "include/quantized_conv.h"

/// The epilogue of 16 sums in the output type, the lanes of `m` stored to `o`; the 8-bit rounding and saturation as
/// the AVX2 bodies' (cvtps2dq rounds half to even; int32 -> saturated int16, saturating + zero point, saturated bytes).
__attribute__((target(ZMM_EPILOGUE_TARGET), always_inline))
static inline void zmm_store16(int kind, __m512i acc, __m512 scale, __m512 fbias, __m256i zp16, void *o, __mmask16 m) {
    if (kind == OSPREY_QOUT_INT32) { _mm512_mask_storeu_epi32(o, m, acc); return; }
    __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), scale);
    if (kind == OSPREY_QOUT_F32) { _mm512_mask_storeu_ps(o, m, _mm512_add_ps(f, fbias)); return; }
    __m256i h = _mm256_adds_epi16(_mm512_cvtsepi32_epi16(_mm512_cvtps_epi32(f)), zp16);
    __m128i b = kind == OSPREY_QOUT_U8 ? _mm256_cvtusepi16_epi8(_mm256_max_epi16(h, _mm256_setzero_si256())) : _mm256_cvtsepi16_epi8(h);
    _mm_mask_storeu_epi8(o, m, b);
}
#endif
