import CKernelShim
import Tensor

// 2-D QLinearConv / ConvInteger end to end in integers: byte im2col, u8 x s8 (or int16) GEMM with the bias, the
// requantization and the output cast fused into the GEMM's epilogue, and a direct depthwise kernel. No tensor of
// the op is ever widened to float or double. `integerConvolution` (exact int64 loops) is the reference twin.

/// What the fused epilogue writes: int32 sums (ConvInteger) or requantized 8-bit values (QLinearConv).
enum QuantizedOutput: Sendable {
    /// acc + bias as int32.
    case sums
    /// saturate(round_half_even((acc + bias) * multiplier[channel]) + zero) as `dtype` (uint8 / int8).
    case requantized(multipliers: [Float], zero: Int32, dtype: DType)
}

/// Constant weights of a 2-D quantized convolution prepared once, in the layout of the kernel that will run them.
struct QuantizedConvolutionPlan: @unchecked Sendable {
    enum Weights {
        /// Every centred weight in [-64, 64] (or, where the CPU's kernels multiply any int8 exactly, in int8's range):
        /// int8 rows padded to quads, each row's sum (for the x zero point), and per group the same rows as
        /// `osprey_qpack_u8_rows` panels, for the columns past the last full panel.
        case u8s8(rows: [Int8], sums: [Int32], tailPanels: [UInt8])
        /// Any 8-bit weights: int16 rows (w - w_zero) padded to pairs.
        case s16(rows: [Int16])
        /// One input channel per group and one output per group: the centred KH x KW taps per channel, and the same
        /// taps in the channel kernel's 16-channel blocks (`osprey_qdepthwise_channels_pack`).
        case depthwise(taps: [Int32], channelBlocks: [Int32])
    }
    /// Output channels, input channels per group, kernel height and width, groups.
    let m: Int, cg: Int, kh: Int, kw: Int, groups: Int
    let weights: Weights
    /// int16s or bytes per weight row.
    let rowStride: Int
    /// True for the u8 x s8 GEMM (activations packed as bytes), false for the int16 GEMM and depthwise.
    var usesBytes: Bool { if case .u8s8 = weights { return true } else { return false } }
    /// True when u8 x s8 weights leave [-64, 64]: the kernels then skip their AVX2 body (exact only within it).
    let fullRange: Bool

    /// Prepares `w` (OIHW, uint8 / int8) minus `zero` (scalar or per output channel); nil when the layout does not fit.
    /// `fullRange`: int8-range weights may take the u8 x s8 GEMM (by default where the CPU multiplies them exactly).
    init?(_ w: Tensor, zero: Tensor?, groups: Int, fullRange allowed: Bool = osprey_qkernels_exact_int8() != 0) {
        guard w.rank == 4, w.dtype == .uint8 || w.dtype == .int8, groups >= 1, w.shape[0] % groups == 0 else { return nil }
        let zeros = zero.map { $0.doubles.map { Int32($0) } } ?? [0]
        guard zeros.count == 1 || zeros.count == w.shape[0] else { return nil }
        (m, cg, kh, kw, self.groups) = (w.shape[0], w.shape[1], w.shape[2], w.shape[3], groups)
        let k = cg * kh * kw, m = self.m
        let raw: [Int32] = w.dtype == .uint8 ? w.scalars(as: UInt8.self).map { Int32($0) } : w.scalars(as: Int8.self).map { Int32($0) }
        let centered = raw.enumerated().map { $0.element - zeros[zeros.count == 1 ? 0 : $0.offset / k] }
        let lowest: Int32 = allowed ? -128 : -64, highest: Int32 = allowed ? 127 : 64
        if cg == 1 && m == groups {
            var blocks = [Int32](repeating: 0, count: Int(osprey_qdepthwise_channels_packed_count(Int32(m), Int32(k))))
            osprey_qdepthwise_channels_pack(centered, Int32(m), Int32(k), &blocks)
            weights = .depthwise(taps: centered, channelBlocks: blocks)
            rowStride = k
            fullRange = false
        } else if centered.allSatisfy({ $0 >= lowest && $0 <= highest }) {
            fullRange = centered.contains { abs($0) > 64 }
            let stride = (k + 3) & ~3
            var rows = [Int8](repeating: 0, count: max(1, m * stride)), sums = [Int32](repeating: 0, count: m)
            for r in 0..<m {
                for i in 0..<k { rows[r * stride + i] = Int8(centered[r * k + i]); sums[r] += centered[r * k + i] }
            }
            let mg = m / groups, groupBytes = (mg + 15) / 16 * (stride / 4) * 64
            var tail = [UInt8](repeating: 0, count: max(1, groups * groupBytes))
            rows.withUnsafeBytes { r in
                tail.withUnsafeMutableBufferPointer { t in
                    for g in 0..<groups {
                        osprey_qpack_u8_rows(Int32(k), Int32(mg), r.baseAddress!.assumingMemoryBound(to: UInt8.self) + g * mg * stride, Int32(stride), 0,
                                             t.baseAddress! + g * groupBytes)
                    }
                }
            }
            weights = .u8s8(rows: rows, sums: sums, tailPanels: tail)
            rowStride = stride
        } else {
            let stride = (k + 1) & ~1
            var rows = [Int16](repeating: 0, count: max(1, m * stride))
            for r in 0..<m { for i in 0..<k { rows[r * stride + i] = Int16(centered[r * k + i]) } }
            weights = .s16(rows: rows)
            rowStride = stride
            fullRange = false
        }
    }
}

/// The per-channel values of a quantized convolution's epilogue for one x zero point and dtype: the int32 bias with
/// the zero point folded in where the kernel needs it, and the output's requantization. Built per call, or once at
/// compile time when the zero point, scales and bias are constants.
struct QuantizedConvolutionEpilogue: Sendable {
    /// x's scalar zero point, and whether x is int8.
    let xZero: Int32, signed: Bool
    /// bias + (u8 x s8 plans) -x_zero' * row sum per output channel, x_zero' the zero point as the kernel reads x
    /// (int8 as uint8 + 128).
    let channelBias: [Int32]
    let output: QuantizedOutput

    /// Nil when `bias` or the output multipliers do not have one value per output channel of `plan`.
    init?(plan: QuantizedConvolutionPlan, xZero: Int32, signed: Bool, bias: [Int32]?, output: QuantizedOutput) {
        if let bias, bias.count != plan.m { return nil }
        if case .requantized(let multipliers, _, _) = output, multipliers.count != plan.m { return nil }
        var channelBias = bias ?? [Int32](repeating: 0, count: plan.m)
        if case .u8s8(_, let sums, _) = plan.weights {
            // int8 input is read as uint8 + 128 (sign bit flipped), so its zero point moves by 128 too.
            let z = signed ? xZero + 128 : xZero
            for i in 0..<plan.m { channelBias[i] &-= z &* sums[i] }
        }
        (self.xZero, self.signed, self.channelBias, self.output) = (xZero, signed, channelBias, output)
    }
}

/// Runs a prepared 2-D quantized convolution on `x` (N x C x H x W, uint8 / int8; `xZero` its scalar zero point),
/// adding `bias` (int32 per output channel) and writing `output`. Nil when x is not a 2-D 8-bit input.
func runQuantizedConvolution(_ ctx: OpContext, _ attrs: WindowAttributes, plan: QuantizedConvolutionPlan, x: Tensor, xZero: Int32,
                          bias: [Int32]?, output: QuantizedOutput) throws -> Tensor? {
    guard x.rank == 4, x.dtype == .uint8 || x.dtype == .int8 else { return nil }
    guard let epilogue = QuantizedConvolutionEpilogue(plan: plan, xZero: xZero, signed: x.dtype == .int8, bias: bias, output: output) else {
        if let bias, bias.count != plan.m { throw ctx.error(.executionFailed, "bias has \(bias.count) values, expected \(plan.m)") }
        throw ctx.error(.executionFailed, "output multipliers do not match \(plan.m) channels")
    }
    return try runQuantizedConvolution(ctx, attrs, plan: plan, x: x, epilogue: epilogue)
}

/// Runs a prepared 2-D quantized convolution on `x` with an epilogue prepared for x's zero point and dtype. Nil when
/// x is not a 2-D 8-bit input of that dtype.
func runQuantizedConvolution(_ ctx: OpContext, _ attrs: WindowAttributes, plan: QuantizedConvolutionPlan, x: Tensor,
                             epilogue prepared: QuantizedConvolutionEpilogue) throws -> Tensor? {
    guard x.rank == 4, x.dtype == (prepared.signed ? .int8 : .uint8) else { return nil }
    let xZero = prepared.xZero, output = prepared.output
    let (n, c, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
    let g = plan.groups, cg = plan.cg, mg = plan.m / g
    guard c == cg * g else { throw ctx.error(.executionFailed, "X \(x.shape) has \(c) channels; W expects \(cg) x \(g) groups") }
    let r = try attrs.resolve(spatial: 2, inputSpatial: [h, w], kernel: [plan.kh, plan.kw], ctx)
    let oh = (h + r.padBegin[0] + r.padEnd[0] - r.dilations[0] * (plan.kh - 1) - 1) / r.strides[0] + 1
    let ow = (w + r.padBegin[1] + r.padEnd[1] - r.dilations[1] * (plan.kw - 1) - 1) / r.strides[1] + 1
    guard oh > 0, ow > 0 else { throw ctx.error(.executionFailed, "input \(x.shape) is too small for kernel [\(plan.kh), \(plan.kw)]") }
    let signed = x.dtype == .int8
    let geometry = ConvGeometry2D(h: h, w: w, kh: plan.kh, kw: plan.kw, sh: r.strides[0], sw: r.strides[1], dh: r.dilations[0],
                                  dw: r.dilations[1], pt: r.padBegin[0], pl: r.padBegin[1], oh: oh, ow: ow)
    let (dtype, zero, multipliers): (DType, Int32, [Float]) = {
        if case .requantized(let m, let z, let d) = output { return (d, z, m) }
        return (.int32, 0, [])
    }()
    let kind = dtype == .int32 ? OSPREY_QOUT_INT32 : dtype == .uint8 ? OSPREY_QOUT_U8 : OSPREY_QOUT_S8
    var out = Tensor.pooled(dtype, shape: [n, plan.m, oh, ow])
    let columns = oh * ow, outBytes = dtype.byteSize
    let channelBias = prepared.channelBias
    // One GEMM call for both weight layouts: every k step reads 4 bytes of a weight row (an int8 quad or an int16 pair).
    func packedGemm<T>(_ rows: [T], wide: Bool) -> GemmCall {
        let rowBytes = plan.rowStride * MemoryLayout<T>.stride
        return { group, packed, _, count, ep, target in
            rows.withUnsafeBytes { a in
                var e = ep
                osprey_qgemm_packed(wide ? 1 : plan.fullRange ? 2 : 0, Int32(mg), Int32(count), Int32(rowBytes / 4), a.baseAddress! + group * mg * rowBytes,
                                    Int32(rowBytes), packed, &e, target, Int32(columns))
            }
        }
    }
    x.withUnsafeBytes { xraw in
        out.withUnsafeMutableBytes { oraw in
            channelBias.withUnsafeBufferPointer { biasPointer in
                multipliers.withUnsafeBufferPointer { scalePointer in
                    let xp = xraw.baseAddress!.assumingMemoryBound(to: UInt8.self)
                    let op = oraw.baseAddress!
                    func epilogue(channel: Int) -> osprey_qepilogue {
                        osprey_qepilogue(bias: biasPointer.baseAddress! + channel, scale: scalePointer.baseAddress.map { $0 + channel },
                                         float_bias: nil, zero_point: zero, kind: Int32(kind), transposed: 0)
                    }
                    switch plan.weights {
                    case .depthwise(let taps, let blocks):
                        runDepthwise(x: xp, signed: signed, xZero: xZero, n: n, channels: c, geometry: geometry, taps: taps, blocks: blocks,
                                     epilogue: epilogue, out: op, outBytes: outBytes)
                    case .u8s8(let rows, _, let tailPanels):
                        tailPanels.withUnsafeBufferPointer { tail in
                            runGemmConvolution(x: xp, signed: signed, xZero: xZero, n: n, c: c, plan: plan, geometry: geometry, out: op,
                                               outBytes: outBytes, epilogue: epilogue, gemm: packedGemm(rows, wide: false), tailPanels: tail.baseAddress)
                        }
                    case .s16(let rows):
                        runGemmConvolution(x: xp, signed: signed, xZero: xZero, n: n, c: c, plan: plan, geometry: geometry, out: op,
                                           outBytes: outBytes, epilogue: epilogue, gemm: packedGemm(rows, wide: true))
                    }
                }
            }
        }
    }
    return out
}

/// A 2-D window geometry (input, kernel, strides, dilations, leading pads, output).
struct ConvGeometry2D {
    let h: Int, w: Int, kh: Int, kw: Int, sh: Int, sw: Int, dh: Int, dw: Int, pt: Int, pl: Int, oh: Int, ow: Int
    /// True when the im2col matrix is the input itself (1x1, stride 1, no padding).
    var isPointwise: Bool { kh == 1 && kw == 1 && sh == 1 && sw == 1 && pt == 0 && pl == 0 && oh == h && ow == w }
}

/// One group's GEMM on a packed column range: (group, packed panels, first column, column count, epilogue, output at
/// the first column).
private typealias GemmCall = (_ group: Int, _ packed: UnsafeRawPointer, _ first: Int, _ count: Int, _ ep: osprey_qepilogue,
                              _ target: UnsafeMutableRawPointer) -> Void

/// Per image and group: the K x (OH * OW) byte matrix (the input itself for pointwise convs, else im2col), packed into
/// the GEMM's panels (column ranges split across threads), multiplied by `gemm` into the output rows. With
/// `tailPanels` (u8 x s8 weights as row panels, per group), the columns past the last full panel take
/// `osprey_qconv_column_tail` instead of a padded panel.
private func runGemmConvolution(x: UnsafePointer<UInt8>, signed: Bool, xZero: Int32, n: Int, c: Int, plan: QuantizedConvolutionPlan,
                                geometry gm: ConvGeometry2D, out: UnsafeMutableRawPointer, outBytes: Int,
                                epilogue: (Int) -> osprey_qepilogue, gemm: GemmCall, tailPanels: UnsafePointer<UInt8>? = nil) {
    let g = plan.groups, cg = plan.cg, mg = plan.m / g
    let k = cg * gm.kh * gm.kw, columns = gm.oh * gm.ow
    let panel = Int(OSPREY_QU8_PANEL), panels = (columns + panel - 1) / panel
    let isU8 = plan.usesBytes
    // Bytes of one packed panel: quads x 16 x 4 bytes (u8), pairs x 16 x 2 int16 (s16).
    let panelBytes = isU8 ? ((k + 3) / 4) * 4 * panel : ((k + 1) / 2) * 2 * panel * 2
    // Both buffers come from the pool: fresh allocations of this size are new pages, zeroed by the kernel on each run.
    let packedBytes = max(64, panels * panelBytes), im2colBytes = gm.isPointwise ? 0 : (k * columns + 63) & ~63
    let tail = tailPanels == nil ? 0 : columns % panel, full = columns - tail
    let tailBytes = tail == 0 ? 0 : (Int(osprey_qconv_column_tail_scratch(Int32(mg), Int32(k), Int32(tail))) + 63) & ~63
    let groupTailBytes = (mg + panel - 1) / panel * ((k + 3) / 4) * 64
    BufferPool.shared.withScratch(floats: (packedBytes + im2colBytes + tailBytes) / 4) { scratch in
        let packed = UnsafeMutableRawPointer(scratch)
        let im2col: UnsafeMutablePointer<UInt8>? = gm.isPointwise ? nil : (packed + packedBytes).assumingMemoryBound(to: UInt8.self)
        let tailScratch = (packed + packedBytes + im2colBytes).assumingMemoryBound(to: UInt8.self)
        // Padding must contribute 0 to (x - x_zero): it reads the zero point (as stored: int8 keeps its bit pattern).
        let pad = UInt8(truncatingIfNeeded: xZero)
        for image in 0..<n {
            for group in 0..<g {
                let source = x + (image * c + group * cg) * gm.h * gm.w
                let matrix: UnsafePointer<UInt8>
                if let im2col {
                    // Bands of output rows in parallel (MobileNetV2's stem: 27 x 12544 bytes, a serial tenth of the
                    // conv at one thread): each band writes its own columns of every row.
                    parallelRanges(gm.oh, minimumChunk: max(1, 32_768 / max(1, k * gm.ow))) { rows in
                        osprey_im2col_u8_rows(source, Int32(cg), Int32(gm.h), Int32(gm.w), Int32(gm.kh), Int32(gm.kw), Int32(gm.sh),
                                              Int32(gm.sw), Int32(gm.dh), Int32(gm.dw), Int32(gm.pt), Int32(gm.pl), Int32(gm.oh), Int32(gm.ow),
                                              Int32(rows.lowerBound), Int32(rows.upperBound), pad, im2col)
                    }
                    matrix = UnsafePointer(im2col)
                } else {
                    matrix = source
                }
                let ep = epilogue(group * mg)
                let target = out + (image * plan.m + group * mg) * columns * outBytes
                // About 64K multiply-adds per chunk: below that a hand-off to another thread costs more than it saves.
                // Ranges of whole pairs of panels, which the AVX512-VNNI body multiplies together: ranges of one
                // panel each ran its one-panel body (MobileNetV2's 7x7 layers: 1.7x from one thread to two, paired 2.1x).
                let unit = 2
                parallelRanges((panels + unit - 1) / unit, minimumChunk: max(1, 65_536 / max(1, mg * k * panel * unit))) { units in
                    let range = (units.lowerBound * unit)..<min(panels, units.upperBound * unit)
                    let first = range.lowerBound * panel, end = min(columns, range.upperBound * panel)
                    if let tailPanels, end > full {
                        var e = ep
                        osprey_qconv_column_tail(Int32(mg), Int32(k), Int32(tail), matrix + full, Int32(columns), signed ? 1 : 0,
                                                 plan.fullRange ? 1 : 0, tailPanels + group * groupTailBytes, &e, target + full * outBytes, Int32(columns), tailScratch)
                    }
                    let count = min(end, full) - first
                    guard count > 0 else { return }
                    let dst = packed + range.lowerBound * panelBytes
                    if isU8 {
                        osprey_qpack_u8(Int32(k), Int32(count), matrix + first, Int32(columns), signed ? 1 : 0, dst.assumingMemoryBound(to: UInt8.self))
                    } else {
                        osprey_qpack_s16(Int32(k), Int32(count), matrix + first, Int32(columns), signed ? 1 : 0, xZero, dst.assumingMemoryBound(to: Int16.self))
                    }
                    gemm(group, UnsafeRawPointer(dst), first, count, ep, target + first * outBytes)
                }
            }
        }
    }
}

/// Depthwise: each channel's plane through `osprey_qdepthwise_planes`, planes split across threads.
private func runDepthwise(x: UnsafePointer<UInt8>, signed: Bool, xZero: Int32, n: Int, channels: Int, geometry gm: ConvGeometry2D,
                          taps: [Int32], blocks: [Int32], epilogue: (Int) -> osprey_qepilogue, out: UnsafeMutableRawPointer, outBytes: Int) {
    let scratchCount = Int(osprey_qdepthwise_scratch(Int32(gm.h), Int32(gm.w), Int32(gm.kh), Int32(gm.kw), Int32(gm.sh), Int32(gm.sw),
                                                     Int32(gm.dh), Int32(gm.dw), Int32(gm.pt), Int32(gm.pl), Int32(gm.oh), Int32(gm.ow)))
    let plane = gm.oh * gm.ow
    taps.withUnsafeBufferPointer { t in blocks.withUnsafeBufferPointer { b in
        parallelRanges(n * channels, minimumChunk: max(1, 65_536 / max(1, plane * gm.kh * gm.kw))) { range in
            let scratch = UnsafeMutablePointer<Int32>.allocate(capacity: scratchCount)
            defer { scratch.deallocate() }
            var ep = epilogue(0)
            osprey_qdepthwise_planes(x, signed ? 1 : 0, xZero, Int32(range.lowerBound), Int32(range.count), Int32(channels), Int32(gm.h), Int32(gm.w),
                                     t.baseAddress!, b.baseAddress!, Int32(gm.kh), Int32(gm.kw), Int32(gm.sh), Int32(gm.sw), Int32(gm.dh),
                                     Int32(gm.dw), Int32(gm.pt), Int32(gm.pl), Int32(gm.oh), Int32(gm.ow), &ep, out, scratch)
        }
    } }
}
