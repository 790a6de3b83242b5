// MobileNetV2's 52 QLinearConv layers (224 x 224, batch 1) on the integer C kernels as runQuantizedConvolution calls
// them (pack + u8 x s8 GEMM, im2col for the stem, depthwise planes), one thread, thread CPU, best of REPEAT: the
// per-layer peer of onnxruntime's per-node profile. Random u8 inputs and weights within [-64, 64]; every layer is
// also run on the portable bodies and a differing output prints MISMATCH.
//
//   Benchmarks/engine/qgemm/layers.sh [REPEAT] [LAYER]
//
// (Full panels only: the column tail of QuantizedConvolution.swift is not modelled here.)
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "quantized_conv.h"
static double now_ms(void) { struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec * 1e3 + t.tv_nsec / 1e6; }
typedef struct { int c, m, h, k, s, g; } layer;
static layer L[64]; static int nl = 0;
static void add(int c, int m, int h, int k, int s, int g) { L[nl++] = (layer){c, m, h, k, s, g}; }
int main(int argc, char **argv) {
    int repeat = argc > 1 ? atoi(argv[1]) : 50;
    int only = argc > 2 ? atoi(argv[2]) : -1;
    add(3, 32, 224, 3, 2, 1);
    add(32, 32, 112, 3, 1, 32); add(32, 16, 112, 1, 1, 1);
    int cfg[][4] = {{1,16,1,1},{6,24,2,2},{6,32,3,2},{6,64,4,2},{6,96,3,1},{6,160,3,2},{6,320,1,1}};
    int cin = 16, h = 112;
    for (int b = 1; b < 7; b++) for (int i = 0; i < cfg[b][2]; i++) {
        int t = cfg[b][0], co = cfg[b][1], s = i == 0 ? cfg[b][3] : 1, hid = cin * t;
        add(cin, hid, h, 1, 1, 1); add(hid, hid, h, 3, s, hid); h /= s; add(hid, co, h, 1, 1, 1); cin = co;
    }
    add(320, 1280, 7, 1, 1, 1);
    srand(1);
    double total = 0;
    for (int li = 0; li < nl; li++) {
        if (only >= 0 && li != only) continue;
        layer l = L[li];
        int pad = l.k / 2, oh = (l.h + 2 * pad - l.k) / l.s + 1, cols = oh * oh, cg = l.c / l.g, K = cg * l.k * l.k;
        uint8_t *x = malloc((size_t)l.c * l.h * l.h + 64); for (long i = 0; i < (long)l.c * l.h * l.h; i++) x[i] = rand();
        uint8_t *out = malloc((size_t)l.m * cols + 64);
        int32_t *bias = calloc(l.m, 4); float *scale = malloc(l.m * 4);
        for (int i = 0; i < l.m; i++) { bias[i] = rand() % 1000; scale[i] = 1.0f / (K * 200.0f); }
        osprey_qepilogue ep = {bias, scale, NULL, 3, OSPREY_QOUT_U8, 0};
        double best = 1e30;
        if (l.g == 1) {
            int stride = (K + 3) & ~3; int8_t *w = calloc((size_t)l.m * stride, 1);
            for (int r = 0; r < l.m; r++) for (int i = 0; i < K; i++) w[r * stride + i] = rand() % 129 - 64;
            int panels = (cols + 15) / 16; int pb = ((K + 3) / 4) * 64;
            uint8_t *packed = malloc((size_t)panels * pb + 64), *im = l.k == 1 ? NULL : malloc((size_t)K * cols + 64);
            for (int r = 0; r < repeat; r++) {
                double t0 = now_ms();
                const uint8_t *mat = x;
                if (im) { osprey_im2col_u8(x, l.c, l.h, l.h, l.k, l.k, l.s, l.s, 1, 1, pad, pad, oh, oh, 3, im); mat = im; }
                osprey_qpack_u8(K, cols, mat, cols, 0, packed);
                osprey_qgemm_packed(0, l.m, cols, stride / 4, w, stride, packed, &ep, out, cols);
                double t = now_ms() - t0; if (t < best) best = t;
            }
            {
                uint8_t *ref = malloc((size_t)l.m * cols + 64);
                osprey_qkernels_force_portable(1);
                const uint8_t *mat = x;
                if (im) { osprey_im2col_u8(x, l.c, l.h, l.h, l.k, l.k, l.s, l.s, 1, 1, pad, pad, oh, oh, 3, im); mat = im; }
                osprey_qpack_u8(K, cols, mat, cols, 0, packed);
                osprey_qgemm_packed(0, l.m, cols, stride / 4, w, stride, packed, &ep, ref, cols);
                osprey_qkernels_force_portable(0);
                if (memcmp(ref, out, (size_t)l.m * cols)) printf("MISMATCH ");
                free(ref);
            }
            free(w); free(packed); free(im);
        } else {
            int taps = l.k * l.k; int32_t *w = malloc((size_t)l.m * taps * 4);
            for (int i = 0; i < l.m * taps; i++) w[i] = rand() % 129 - 64;
            int32_t *blocks = malloc(osprey_qdepthwise_channels_packed_count(l.m, taps) * 4);
            osprey_qdepthwise_channels_pack(w, l.m, taps, blocks);
            int sc = osprey_qdepthwise_scratch(l.h, l.h, l.k, l.k, l.s, l.s, 1, 1, pad, pad, oh, oh);
            int32_t *scratch = malloc((size_t)sc * 4 + 64);
            for (int r = 0; r < repeat; r++) {
                double t0 = now_ms();
                osprey_qdepthwise_planes(x, 0, 3, 0, l.m, l.m, l.h, l.h, w, blocks, l.k, l.k, l.s, l.s, 1, 1, pad, pad, oh, oh, &ep, out, scratch);
                double t = now_ms() - t0; if (t < best) best = t;
            }
            uint8_t *ref = malloc((size_t)l.m * cols + 64);
            osprey_qkernels_force_portable(1);
            osprey_qdepthwise_planes(x, 0, 3, 0, l.m, l.m, l.h, l.h, w, blocks, l.k, l.k, l.s, l.s, 1, 1, pad, pad, oh, oh, &ep, ref, scratch);
            osprey_qkernels_force_portable(0);
            if (memcmp(ref, out, (size_t)l.m * cols)) printf("MISMATCH ");
            free(ref);
            free(w); free(blocks); free(scratch);
        }
        total += best;
        printf("%2d %s c%-4d m%-4d h%-3d k%d s%d: %.4f ms  %.1f GMAC/s\n", li, l.g == 1 ? "gemm" : "dw  ", l.c, l.m, l.h, l.k, l.s, best,
               (double)l.m * cols * K / best / 1e6);
        free(x); free(out); free(bias); free(scale);
    }
    printf("total %.3f ms\n", total);
    return 0;
}
