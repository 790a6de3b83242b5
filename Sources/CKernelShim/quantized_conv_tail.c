// The last columns of a u8 x s8 convolution GEMM that do not fill a 16-column panel (a 7 x 7 plane: 49 = 3 * 16 + 1;
// 14 x 14: 196 = 12 * 16 + 4). As a panel they would cost a whole one (64 multiply lanes for one column); here the
// roles turn: the few columns become rows of K bytes (gathered from the K x columns matrix), the weights the
// panels (packed once by `osprey_qpack_u8_rows`), and `osprey_qgemv_u8s8` (every lane an output channel) computes
// them at the cost of their own columns. Its portable body is the reference twin, as for every other caller.
#include "include/quantized_conv.h"
#include <string.h>

void osprey_qconv_column_tail(int m, int k, int t, const uint8_t *matrix, int ldm, int flip, int full_range, const uint8_t *packed_rows,
                              const osprey_qepilogue *ep, void *out, int ldo, uint8_t *scratch) {
    if (m <= 0 || t <= 0) return;
    size_t size = ep->kind == OSPREY_QOUT_U8 || ep->kind == OSPREY_QOUT_S8 ? 1 : 4;
    uint8_t *rows = scratch, *results = scratch + (((size_t)t * k + 63) & ~(size_t)63);
    // Column j of the matrix as row j (K bytes).
    for (int kk = 0; kk < k; kk++) {
        const uint8_t *src = matrix + (size_t)kk * ldm;
        for (int j = 0; j < t; j++) rows[(size_t)j * k + kk] = src[j];
    }
    osprey_qgemv_u8s8(t, m, k, rows, k, flip, full_range, packed_rows, ep, results, m);
    // results[j][c] is output (c, column j).
    char *o = (char *)out;
    if (size == 1) {
        for (int c = 0; c < m; c++)
            for (int j = 0; j < t; j++) o[(size_t)c * ldo + j] = (char)results[(size_t)j * m + c];
    } else {
        for (int c = 0; c < m; c++)
            for (int j = 0; j < t; j++) memcpy(o + ((size_t)c * ldo + j) * 4, results + ((size_t)j * m + c) * 4, 4);
    }
}

long osprey_qconv_column_tail_scratch(int m, int k, int t) {
    return (((long)t * k + 63) & ~63L) + (long)t * m * 4 + 64;
}
