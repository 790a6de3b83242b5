import CKernelShim

/// A constant right operand B [k, n] of a row-major product packed once into strips of 16 columns interleaved by k
/// (strip s, row p at pointer[(s * depth + p) * 16]; columns past n zero), the layout the 6x16 micro-kernel reads.
///
/// Transformer and ConvNeXt Linear layers are MatMuls against constant weights. OpenBLAS re-packs both operands
/// and zeroes C on every call (12-15% of the whole model's time in MiniLM and ConvNeXt-T), then the bias and GELU
/// need another pass over C; here B is packed at compile time, A is read in place, and bias, activation and a
/// residual are applied to the accumulators before the single store.
public final class PackedMatrixB: @unchecked Sendable {
    /// Rows of B (the product's inner dimension).
    public let depth: Int
    /// Columns of B.
    public let columns: Int
    /// Strips of 16 columns.
    let strips: Int
    /// [strip][depth][16] floats.
    let pointer: UnsafeMutablePointer<Float>

    /// Zeroed strips for a depth x columns B (the columns past n stay zero).
    private init(depth: Int, columns: Int) {
        self.depth = depth
        self.columns = columns
        strips = (columns + productStrip - 1) / productStrip
        let count = strips * depth * productStrip
        pointer = allocateFloats(count)
        pointer.initialize(repeating: 0, count: count)
    }

    /// Packs row-major `b` (depth x columns floats).
    public convenience init(_ b: UnsafePointer<Float>, depth: Int, columns: Int) {
        self.init(depth: depth, columns: columns)
        for s in 0..<strips {
            let width = min(productStrip, columns - s * productStrip)
            for p in 0..<depth {
                (pointer + (s * depth + p) * productStrip).update(from: b + p * columns + s * productStrip, count: width)
            }
        }
    }

    /// Packs B = scale * w^T from row-major `w` (columns x depth floats, a Gemm's transB weights) in one pass that
    /// reads w in order: transposing into a dense copy first read it a column at a time (a few ms for a 1000-class head).
    public convenience init(transposed w: UnsafePointer<Float>, depth: Int, columns: Int, scale: Float) {
        self.init(depth: depth, columns: columns)
        for c in 0..<columns {
            let (s, j) = c.quotientAndRemainder(dividingBy: productStrip)
            let source = w + c * depth, target = pointer + s * depth * productStrip + j
            for p in 0..<depth { target[p * productStrip] = scale * source[p] }
        }
    }

    /// `other` with row p of B multiplied by `factors[p]` (a per-image channel scale folded into the weights).
    init(_ other: PackedMatrixB, scalingRowsBy factors: UnsafePointer<Float>) {
        (depth, columns, strips) = (other.depth, other.columns, other.strips)
        pointer = allocateFloats(strips * depth * productStrip)
        other.scaleRows(strips: 0..<strips, by: factors, into: pointer)
    }

    /// Strips `strips` of B with row p multiplied by `factors[p]`, written where the packed layout has them in
    /// `target` (room for the whole matrix; other strips untouched).
    func scaleRows(strips: Range<Int>, by factors: UnsafePointer<Float>, into target: UnsafeMutablePointer<Float>) {
        for s in strips {
            for p in 0..<depth {
                let at = (s * depth + p) * productStrip
                (target + at).store((pointer + at).vector(SIMD16<Float>.self) * factors[p])  // productStrip is 16
            }
        }
    }

    deinit { pointer.deallocate() }
}

/// Columns per packed strip (the micro-kernel's width).
private let productStrip = 16
/// Rows of A per micro-kernel call.
private let productRows = 6

/// out[i][j] = activation(bias[j] + sum_p a[i * lda + p] * B[p][j] + residual[i * columns + j]) for i < rows, with
/// B packed; `out` and `residual` are rows x B.columns, row-major and dense.
///
/// Columns of B go in blocks small enough to stay in L2 while every 6-row band of A passes over them; the threads
/// split the bands, or the strips when B is wider than A is tall or there are few rows.
public func packedMatmul(_ a: UnsafePointer<Float>, lda: Int, rows: Int, _ b: PackedMatrixB, bias: UnsafePointer<Float>?,
                         residual: UnsafePointer<Float>?, activation: Activation, out: UnsafeMutablePointer<Float>) {
    let bands = (rows + productRows - 1) / productRows
    let product = BandProduct(a: a, lda: lda, rows: rows, b: b, bias: bias, residual: residual, activation: activation, out: out)
    let threads = EngineThreads.threads
    let pairs = (b.strips + 1) / 2
    // Below about a million multiply-adds a second thread's wake-up costs more than it saves.
    if threads == 1 || rows * b.columns * b.depth < 1 << 20 {
        product.run(bands: 0..<bands, strips: 0..<b.strips)
    } else if ((b.columns > rows && pairs >= 2 * threads) || (bands < 4 * threads && bands < b.strips))
                && !bandsKeepAInCache(rows: rows, b, threads: threads) {
        // Split by bands, every thread streams all of B; by strips, all of A. The smaller one is read twice: for
        // ConvNeXt-T's last stage (49 rows, 9 MB of B each) the band split ran no faster at two threads than at one.
        // Whole strip pairs per part keep the two-strip kernel in use. Two parts per thread, not four: at two threads
        // MiniLM's 384-deep products ran 10-14% faster (0.79 -> 0.68 ms for 128 x 384 by 384 x 1536), level elsewhere.
        parallelRanges(pairs, partsPerThread: 2) { product.run(bands: 0..<bands, strips: 2 * $0.lowerBound ..< min(b.strips, 2 * $0.upperBound)) }
    } else {
        parallelRanges(bands, minimumChunk: 2) { product.run(bands: $0, strips: 0..<b.strips) }
    }
}

/// Whether splitting the bands beats splitting the strips although B is wider than A is tall: B small enough that
/// every thread streaming all of it costs little (it stays in L3), A too large to stay in L2 beside a column block
/// (the strip split reads all of A again for each block), a thread's share of A small enough to stay. ConvNeXt-T's
/// 14x14 MLP output (196 x 1536 by 1536 x 384): 1.27 -> 1.13 ms at two threads (2.03 ms at one).
private func bandsKeepAInCache(rows: Int, _ b: PackedMatrixB, threads: Int) -> Bool {
    let block = columnBlockStrips(depth: b.depth) * b.depth * productStrip * 4
    let a = rows * b.depth * 4, bBytes = b.depth * b.columns * 4
    return bBytes <= 4 << 20 && a + block > levelTwoCacheBytes && a / threads + block <= levelTwoCacheBytes
}

/// Strips of packed B per column block of `BandProduct.run`: about 192 KB, and at least two, so the two-strip kernel
/// runs even when one strip passes 192 KB (ViT's and BERT's 3072-deep MLP outputs: 3% faster than strip by strip).
private func columnBlockStrips(depth: Int) -> Int { max(2, 196_608 / max(1, depth * productStrip * 4)) }

/// Rows `row ..< row + count` of band `band` (of `(rows + 5) / 6`): six each, except that a remainder of one to three
/// rows is evened out with the band before it (7 -> 4 + 3, 8 -> 4 + 4, 9 -> 5 + 4): the strip kernel runs four to six
/// rows at the full FMA rate, fewer at a fraction of it.
@inline(__always)
func bandRows(_ band: Int, rows: Int) -> (row: Int, count: Int) {
    let whole = rows / 6, rest = rows - whole * 6
    guard (1...3).contains(rest), whole >= 1, band >= whole - 1 else { return (band * 6, min(6, rows - band * 6)) }
    let first = (6 + rest + 1) / 2, start = (whole - 1) * 6
    return band == whole - 1 ? (start, first) : (start + first, 6 + rest - first)
}

/// One `packedMatmul` call's operands.
private struct BandProduct {
    let a: UnsafePointer<Float>
    let lda: Int, rows: Int
    let b: PackedMatrixB
    let bias: UnsafePointer<Float>?
    let residual: UnsafePointer<Float>?
    let activation: Activation
    let out: UnsafeMutablePointer<Float>

    /// Bands of 6 rows of A times strips of B, in column blocks of about 192 KB of packed B (two strips at least).
    func run(bands: Range<Int>, strips: Range<Int>) {
        let depth = b.depth
        let block = columnBlockStrips(depth: depth)
        var first = strips.lowerBound
        while first < strips.upperBound {
            let last = min(strips.upperBound, first + block)
            for band in bands {
                let (row, count) = bandRows(band, rows: rows)
                multiply(row: row, count: count, strips: first..<last)
            }
            first = last
        }
    }

    /// Up to six rows of A (output rows `row ..< row + count`) times each strip (two at a time where nothing is left to
/// apply after the kernel).
    @inline(__always)
    func multiply(row: Int, count: Int, strips: Range<Int>) {
        let depth = b.depth, columns = b.columns
        let source = a + row * lda
        // GELU (either form) in the C kernel's registers, the rest through `Activation.vector` here: Swift's SIMD16
        // tanh-GELU there cost GPT-2 twice its separate pass.
        let directGelu: Int32 = hasFastLogisticKernel ? (activation == .gelu ? 1 : activation == .geluTanh ? 2 : 0) : 0
        let direct = residual == nil && (directGelu != 0 || activation == .none)
        var s = strips.lowerBound
        while s < strips.upperBound {
            defer { s += 1 }
            let column = s * productStrip
            if direct && s + 1 < strips.upperBound && column + 2 * productStrip <= columns {
                // Two whole strips in one call (the AVX-512 body reads each A value once for both), straight to the output.
                let starts = bias.map { ($0.advanced(by: column).vector(SIMD16<Float>.self), $0.advanced(by: column + productStrip).vector(SIMD16<Float>.self)) }
                    ?? (SIMD16<Float>(), SIMD16<Float>())
                withUnsafeBytes(of: starts) { first in
                    osprey_sgemm_strip_pair(count, depth, source, lda, b.pointer + s * depth * productStrip, productStrip, depth * productStrip,
                                            first.baseAddress!.assumingMemoryBound(to: Float.self), out + row * columns + column, columns,
                                            directGelu)
                }
                s += 1
                continue
            }
            var start = SIMD16<Float>()
            if let bias {
                if column + productStrip <= columns {
                    start = bias.advanced(by: column).vector(SIMD16<Float>.self)
                } else {
                    for j in 0..<(columns - column) { start[j] = bias[column + j] }
                }
            }
            let o = out + row * columns + column
            let strip = UnsafePointer(b.pointer + s * depth * productStrip)
            let whole = column + productStrip <= columns
            if whole && direct {
                // Nothing left to apply in Swift: the kernel stores straight into the output rows.
                withUnsafeBytes(of: start) { first in
                    osprey_sgemm_strip(count, depth, source, lda, strip, productStrip, first.baseAddress!.assumingMemoryBound(to: Float.self),
                                       o, columns, directGelu)
                }
                continue
            }
            var c = Tile6x16(start, start, start, start, start, start)
            withUnsafeMutableBytes(of: &c) { tile in
                withUnsafeBytes(of: start) { first in
                    osprey_sgemm_strip(count, depth, source, lda, strip, productStrip, first.baseAddress!.assumingMemoryBound(to: Float.self),
                                       tile.baseAddress!.assumingMemoryBound(to: Float.self), productStrip, 0)
                }
            }
            if whole {
                if let residual { c = addingRows(c, rows: count, at: residual + row * columns + column, stride: columns) }
                if case .none = activation {} else {
                    c = (activation.vector(c.0), activation.vector(c.1), activation.vector(c.2), activation.vector(c.3),
                         activation.vector(c.4), activation.vector(c.5))
                }
                storeRows(c, rows: count, at: o, stride: columns)
            } else {
                // A last strip narrower than 16 columns, lane by lane.
                withUnsafeBytes(of: c) { raw in
                    let tile = raw.bindMemory(to: Float.self)
                    for r in 0..<count {
                        for j in 0..<(columns - column) {
                            let at = (row + r) * columns + column + j
                            out[at] = activation(tile[r * productStrip + j] + (residual?[at] ?? 0))
                        }
                    }
                }
            }
        }
    }
}

/// `packedMatmul`'s contract on the unpacked row-major B (depth x columns) as a plain triple loop: the twin for tests.
public func packedMatmulReference(_ a: UnsafePointer<Float>, lda: Int, rows: Int, b: UnsafePointer<Float>, depth: Int, columns: Int,
                                  bias: UnsafePointer<Float>?, residual: UnsafePointer<Float>?, activation: Activation,
                                  out: UnsafeMutablePointer<Float>) {
    for i in 0..<rows {
        for j in 0..<columns {
            var sum: Float = bias?[j] ?? 0
            for p in 0..<depth { sum += a[i * lda + p] * b[p * columns + j] }
            out[i * columns + j] = activation(sum + (residual?[i * columns + j] ?? 0))
        }
    }
}
