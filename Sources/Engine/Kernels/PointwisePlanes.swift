import CKernelShim

/// Pointwise convs with few output channels (SqueezeNet's squeeze convs: 64-512 input channels to 16-64) on AVX-512F,
/// reading the input planes in place instead of packing them into strips.
///
/// With at most `maximumPanels` weight panels every packed value was read by only a few panels, so packing (one read
/// and one strided write of every input value) cost as much as the products (SqueezeNet 1.1: the squeeze convs ran
/// at 2-3x onnxruntime's time). Here each block of 32 columns of one image is read straight from its planes (k a
/// plane apart, masked at the edge) by every panel in turn: the first panel pulls the block into L1, the others
/// reuse it. Lanes sum in the packed path's order, so results match it exactly.
enum PointwisePlanes {
    /// Panels (6 output channels each) up to which the in-place kernel runs: more panels amortise the packing.
    static let maximumPanels = 11

    /// Columns per block: the C tile's two 16-lane strips.
    static let blockWidth = 32

    /// Whether a pointwise conv `g` with `weights` runs here: AVX-512F, few panels, and an epilogue the C tile applies
    /// in registers (a clamp, or nothing but a residual).
    static func suits(_ g: ConvGeometry, weights: ConvWeightPanels, activation: Activation) -> Bool {
        guard osprey_float_avx512() != 0, weights.rows == ConvWeightPanels.gemmRows, weights.panels <= maximumPanels,
              g.isPointwise else { return false }
        return activation.registerClampBounds != nil
    }

    /// out = bias + W x input (+ residual), clamped; output image n starts `imageStride` floats after image n - 1, the
    /// residual is compact. Blocks of all images are shared out in equal contiguous runs, one per thread.
    static func run(_ g: ConvGeometry, weights: ConvWeightPanels, bias: UnsafePointer<Float>?, residual: UnsafePointer<Float>?,
                    activation: Activation, input: UnsafePointer<Float>, output: UnsafeMutablePointer<Float>, imageStride: Int) {
        let outPlane = g.outHeight * g.outWidth, inPlane = g.inHeight * g.inWidth
        let blocksPerImage = (outPlane + blockWidth - 1) / blockWidth
        let blocks = g.batch * g.groups * blocksPerImage
        let threads = EngineThreads.threads
        let chunks = threads > 1 ? min(blocks, threads) : 1
        let bounds = activation.registerClampBounds ?? (-.infinity, .infinity)
        let mg = g.outChannelsPerGroup, rows = ConvWeightPanels.gemmRows
        let depth = weights.depth, copies = crowdsL1(planeFloats: inPlane, depth: depth)
        parallelFor(chunks) { chunk in
            withThreadScratch(depth * blockWidth) { packed in
                var starts = [Float](repeating: 0, count: rows)
                for block in (blocks * chunk / chunks)..<(blocks * (chunk + 1) / chunks) {
                    let image = block / (g.groups * blocksPerImage), rest = block % (g.groups * blocksPerImage)
                    let group = rest / blocksPerImage, column = (rest % blocksPerImage) * blockWidth
                    let width = min(blockWidth, outPlane - column)
                    let b = input + (image * g.inChannels + group * g.inChannelsPerGroup) * inPlane + column
                    if copies { copyBlock(b, planeStride: inPlane, depth: depth, width: width, into: packed) }
                    for p in 0..<weights.panels {
                        let firstChannel = group * mg + p * rows, valid = min(rows, mg - p * rows)
                        for r in 0..<rows { starts[r] = r < valid ? bias?[firstChannel + r] ?? 0 : 0 }
                        let o = output + image * imageStride + firstChannel * outPlane + column
                        let res = residual.map { $0 + (image * g.outChannels + firstChannel) * outPlane + column }
                        // In place, the first panel prefetches the next block of the same planes (the others find this one in L1).
                        let ahead = !copies && p == 0 && column + 2 * blockWidth <= outPlane ? blockWidth : 0
                        osprey_conv_planes_tile_avx512(valid, width, depth, weights.panel(group: group, index: p), copies ? UnsafePointer(packed) : b,
                                                       copies ? blockWidth : inPlane, ahead, starts, o, outPlane, res, outPlane, bounds.low, bounds.high)
                    }
                }
            }
        }
    }

    /// Whether a block read in place from `depth` planes `planeFloats` apart crowds L1 (32 KB, 8 ways of 64 sets of
    /// 64-byte lines): its two lines per plane fall in few sets when the planes are a multiple of 1 KB apart, and
    /// more than half of those sets' ways would hold them. Then the block is copied first: the copy cost 2% of
    /// SqueezeNet (55x55 planes, spread over every set), and saved 11% of RegNetY's 112x112 conv.
    static func crowdsL1(planeFloats: Int, depth: Int) -> Bool {
        guard planeFloats % 16 == 0 else { return false }
        var a = 64, b = (planeFloats / 16) % 64
        while b != 0 { (a, b) = (b, a % b) }
        let sets = 64 / a
        return depth > 4 * sets
    }

    /// The block's `width` columns of `depth` planes, `planeStride` floats apart, as rows of `blockWidth` floats.
    ///
    /// Every panel reads the block from this copy: read in place, planes a multiple of 1 KB apart (112x112: 49 KB)
    /// put the block's 64 lines in 8 of L1's 64 sets, and each panel missed L1 on them again (RegNetY's 32 -> 48 conv
    /// at 112x112 ran at half the FMA rate).
    private static func copyBlock(_ b: UnsafePointer<Float>, planeStride: Int, depth: Int, width: Int, into packed: UnsafeMutablePointer<Float>) {
        if width == blockWidth {
            for k in 0..<depth {
                let source = b + k * planeStride, target = packed + k * blockWidth
                target.store(source.vector(SIMD16<Float>.self))
                (target + 16).store((source + 16).vector(SIMD16<Float>.self))
            }
        } else {
            for k in 0..<depth { (packed + k * blockWidth).update(from: b + k * planeStride, count: width) }
        }
    }
}
