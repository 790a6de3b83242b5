#ifndef OSPREY_DEPTHWISE_CONV_H
#define OSPREY_DEPTHWISE_CONV_H

/// 1 when this CPU runs the AVX2+FMA depthwise kernel below (checked once at run time), else 0.
int osprey_depthwise3x3_available(void);

/// Floats of scratch one thread passes to `osprey_depthwise3x3_plane` for these sizes.
int osprey_depthwise3x3_scratch(int width, int out_width, int stride, int pad_left);

/// One plane of a 3x3 depthwise convolution, dilation 1, equal strides 1 or 2, any pads:
/// out[y][x] = bias + sum filter[ky*3+kx] * in[y*s - pad_top + ky][x*s - pad_left + kx], taps in the padding count 0.
/// in is height x width, out out_height x out_width, both contiguous; scratch holds osprey_depthwise3x3_scratch floats.
void osprey_depthwise3x3_plane(const float *in, int height, int width, const float *filter, float bias, int stride,
                               int pad_top, int pad_left, float *out, int out_height, int out_width, float *scratch);

#endif
