#ifndef OSPREY_PACKED_SGEMM_H
#define OSPREY_PACKED_SGEMM_H

/// Runs its AVX-512F body when `osprey_float_avx512()` is 1, its AVX2 + FMA body when `osprey_float_activations_fast()`
/// is 1, a plain loop otherwise.
/// tile[r * ldt + j] = (start ? start[j] : 0) + sum_p a[r * lda + p] * b[p * ldb + j] for r < rows (1...6), j < 16:
/// up to six rows of A read in place times one 16-column strip of B (a packed strip has ldb 16; every row p must
/// have 16 readable floats). With `gelu` 1 each result x becomes 0.5 x (1 + erf(x / sqrt 2)) before the store, with 2
/// GELU's tanh form (as `osprey_gelu_tanh_f32`); the vector bodies only: the portable loop leaves it to the caller. Tile rows at or past `rows` are left unwritten.
void osprey_sgemm_strip(long rows, long depth, const float *a, long lda, const float *b, long ldb, const float *start,
                        float *tile, long ldt, int gelu);

/// `osprey_sgemm_strip` on two strips at once: columns 0-15 of the tile from the strip at `b`, 16-31 from the one
/// `second` floats past it (same `ldb`), `start` 32 floats or null. One AVX-512F body reads each A value once for both
/// strips; elsewhere it is two `osprey_sgemm_strip` calls.
void osprey_sgemm_strip_pair(long rows, long depth, const float *a, long lda, const float *b, long ldb, long second, const float *start,
                             float *tile, long ldt, int gelu);

#endif
