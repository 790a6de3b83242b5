// Integer GEMM kernels (Sources/CKernelShim: the int16-pair GEMM and the u8 x s8 one the reduce-range weights take)
// against OpenBLAS sgemm on the same shapes, one thread.
//
//   Benchmarks/engine/qgemm/run.sh
//
// Prints, per shape, the best of REPEAT runs of each (ms) and GOP/s (2*M*N*K / time); the integer operands are
// packed outside the timed loop, as weights are packed at compile time (activations pay their packing per call).
#include <cblas.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "quantized_conv.h"
#include "quantized_gemm.h"

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
    int repeat = argc > 1 ? atoi(argv[1]) : 20;
    openblas_set_num_threads(1);
    // (M, N, K): conv layers as W[co x ci*kh*kw] x cols, transformer projections as X[tokens x d] x W[d x d'].
    int shapes[][3] = {{64, 3136, 576}, {128, 784, 1152}, {256, 196, 2304}, {32, 12544, 27}, {128, 384, 384}, {128, 1536, 384}, {1, 1000, 1280}};
    printf("| M x N x K | int16-pair GEMM ms | u8 x s8 GEMM ms | sgemm ms | u8s8/float time | u8s8 GOP/s |\n|---|---|---|---|---|---|\n");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        int kp = (k + 1) / 2, panels = (n + OSPREY_QGEMM_PANEL - 1) / OSPREY_QGEMM_PANEL;
        int16_t *a = calloc((size_t)m * kp * 2, 2), *b = calloc((size_t)panels * kp * 2 * OSPREY_QGEMM_PANEL, 2);
        int32_t *c = malloc((size_t)m * n * 4);
        // u8 x s8: A as int8 rows of K padded to quads (within [-64, 64]), B as u8 panels of quads.
        int kq = (k + 3) / 4;
        int8_t *a8 = calloc((size_t)m * kq * 4, 1);
        uint8_t *b8 = calloc((size_t)panels * kq * 4 * OSPREY_QU8_PANEL, 1);
        for (size_t i = 0; i < (size_t)m * kq * 4; i++) a8[i] = (int8_t)(rand() % 129 - 64);
        for (size_t i = 0; i < (size_t)panels * kq * 4 * OSPREY_QU8_PANEL; i++) b8[i] = (uint8_t)rand();
        osprey_qepilogue ep = {NULL, NULL, NULL, 0, OSPREY_QOUT_INT32, 0};
        float *fa = malloc((size_t)m * k * 4), *fb = malloc((size_t)k * n * 4), *fc = malloc((size_t)m * n * 4);
        for (size_t i = 0; i < (size_t)m * kp * 2; i++) a[i] = (int16_t)(rand() % 511 - 255);
        for (size_t i = 0; i < (size_t)panels * kp * 2 * OSPREY_QGEMM_PANEL; i++) b[i] = (int16_t)(rand() % 255 - 127);
        for (size_t i = 0; i < (size_t)m * k; i++) fa[i] = rand() / (float)RAND_MAX;
        for (size_t i = 0; i < (size_t)k * n; i++) fb[i] = rand() / (float)RAND_MAX;
        double best_i = 1e30, best_u = 1e30, best_f = 1e30;
        for (int r = 0; r < repeat; r++) {
            double t0 = now_ms();
            osprey_qgemm_s16(m, n, kp, a, kp * 2, b, c, n);
            double t1 = now_ms();
            osprey_qgemm_u8s8(m, n, kq, a8, kq * 4, b8, &ep, c, n);
            double t2 = now_ms();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1, fa, k, fb, n, 0, fc, n);
            double t3 = now_ms();
            if (t1 - t0 < best_i) best_i = t1 - t0;
            if (t2 - t1 < best_u) best_u = t2 - t1;
            if (t3 - t2 < best_f) best_f = t3 - t2;
        }
        printf("| %d x %d x %d | %.3f | %.3f | %.3f | %.2f | %.1f |\n", m, n, k, best_i, best_u, best_f, best_u / best_f,
               2.0 * m * n * k / best_u / 1e6);
        free(a); free(b); free(c); free(a8); free(b8); free(fa); free(fb); free(fc);
    }
    return 0;
}
