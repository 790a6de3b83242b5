import CKernelShim
import Tensor

// Quantized MatMuls with a constant 8-bit B (QLinearMatMul, MatMulInteger, DynamicQuantizeMatMul,
// MatMulIntegerToFloat, QGemm) on the u8 x s8 row GEMM (`osprey_qgemv_u8s8`): A's rows are the broadcast operand,
// read in place, and B is packed once into 16-column panels of s8, so each output row is written in order through a
// per-column vector epilogue (requantized, int32, or scaled to float + bias) and no intermediate int32 or float
// tensor exists. `integerMatMul` stays the reference twin.

/// A constant B (K x N) whose centred values all lie in [-64, 64] (what vpmaddubsw multiplies exactly), or on a VNNI
/// CPU anywhere in int8's range (vpdpbusd has no int16 step), as N rows of K int8 (padded to quads) packed into the
/// row GEMM's panels, with each column's sum for A's zero point.
struct QuantizedMatMulPlan: @unchecked Sendable {
    /// B's rows (reduction length) and columns.
    let k: Int, n: Int
    /// B minus its zero points as `osprey_qgemv_u8s8` panels: per 16 columns and k quad, 16 columns x 4 int8.
    let panels: [UInt8]
    /// Per column of B: the sum of its centred values.
    let sums: [Int32]
    /// Bytes per row (K rounded up to 4).
    let rowStride: Int
    /// True when a centred value leaves [-64, 64]: the kernels then skip their AVX2 body (exact only within it).
    let fullRange: Bool

    /// Bytes of one 16-column panel.
    var panelBytes: Int { rowStride / 4 * 64 }

    /// Nil when B is not 2-D 8-bit, the zero point is not a scalar or per column, or a centred value leaves [-64, 64]
    /// (int8's range when `fullRange`, by default where the CPU's kernels multiply any int8 exactly).
    /// `transposed`: b holds B^T (N x K, Gemm's transB).
    init?(_ b: Tensor, zero: Tensor?, transposed: Bool = false, fullRange allowed: Bool = osprey_qkernels_exact_int8() != 0) {
        guard b.rank == 2, b.dtype == .uint8 || b.dtype == .int8 else { return nil }
        (k, n) = transposed ? (b.shape[1], b.shape[0]) : (b.shape[0], b.shape[1])
        let zeros = zero.map { $0.doubles.map { Int32($0) } } ?? [0]
        guard zeros.count == 1 || zeros.count == n else { return nil }
        let raw: [Int32] = b.dtype == .uint8 ? b.scalars(as: UInt8.self).map { Int32($0) } : b.scalars(as: Int8.self).map { Int32($0) }
        let stride = (k + 3) & ~3
        var rows = [Int8](repeating: 0, count: max(1, n * stride)), sums = [Int32](repeating: 0, count: n)
        let (k, n) = (self.k, self.n)
        let lowest: Int32 = allowed ? -128 : -64, highest: Int32 = allowed ? 127 : 64
        var wide = false
        for r in 0..<k {
            for c in 0..<n {
                let v = raw[transposed ? c * k + r : r * n + c] - zeros[zeros.count == 1 ? 0 : c]
                guard v >= lowest && v <= highest else { return nil }
                wide = wide || abs(v) > 64
                rows[c * stride + r] = Int8(v)
                sums[c] += v
            }
        }
        var panels = [UInt8](repeating: 0, count: max(1, (n + 15) / 16 * stride / 4 * 64))
        rows.withUnsafeBytes { r in
            osprey_qpack_u8_rows(Int32(k), Int32(n), r.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(stride), 0, &panels)
        }
        self.panels = panels
        self.sums = sums
        rowStride = stride
        fullRange = wide
    }
}

/// What a quantized MatMul writes per output column j.
enum QuantizedMatMulOutput {
    /// int32 sums (MatMulInteger).
    case sums
    /// saturate(round_half_even(acc * multipliers[j]) + zero) as uint8 / int8 (QLinearMatMul).
    case requantized(multipliers: [Float], zero: Int32, dtype: DType)
    /// float32 acc * multipliers[j] + bias[j] (DynamicQuantizeMatMul, MatMulIntegerToFloat).
    case scaled(multipliers: [Float], bias: [Float]?)

    /// The output dtype, the C epilogue's kind, zero point, per-column multipliers and float bias of this output.
    var epilogue: (dtype: DType, kind: Int32, zero: Int32, multipliers: [Float], floatBias: [Float]?) {
        switch self {
        case .sums: (.int32, Int32(OSPREY_QOUT_INT32), 0, [], nil)
        case .requantized(let m, let z, let d): (d, Int32(d == .int8 ? OSPREY_QOUT_S8 : OSPREY_QOUT_U8), z, m, nil)
        case .scaled(let m, let b): (.float32, Int32(OSPREY_QOUT_F32), 0, m, b)
        }
    }
}

/// The int32 bias per column of B (`sums` its column sums): `columnBias` minus A's zero point times each column sum.
/// A is read as uint8 (int8 with its sign bit flipped, + 128), so an int8 A's zero point moves by 128.
func foldedColumnBias(sums: [Int32], signed: Bool, aZero: Int32, columnBias: [Int32]?) -> [Int32] {
    let z = signed ? aZero + 128 : aZero
    return sums.enumerated().map { (columnBias?[$0.offset] ?? 0) &- z &* $0.element }
}

/// The output of A [..., M, K] (`shape`) times `plan`'s B as `output` says, filled by `body` from the row count M * leading
/// dims, the C epilogue (bias with A's zero point folded in, multipliers, zero point) and the output's bytes; an empty
/// product skips `body`.
func quantizedProduct(plan: QuantizedMatMulPlan, signed: Bool, aZero: Int32, shape: [Int], output: QuantizedMatMulOutput,
                      columnBias: [Int32]?, outputDType: DType? = nil,
                      _ body: (_ rows: Int, _ epilogue: osprey_qepilogue, _ out: UnsafeMutableRawBufferPointer) -> Void) -> Tensor {
    let rows = shape.dropLast().reduce(1, *)
    let (dtype, kind, zero, multipliers, floatBias) = output.epilogue
    var out = Tensor.pooled(outputDType ?? dtype, shape: Array(shape.dropLast()) + [plan.n])
    guard rows > 0, plan.n > 0 else { return out }
    let bias = foldedColumnBias(sums: plan.sums, signed: signed, aZero: aZero, columnBias: columnBias)
    out.withUnsafeMutableBytes { o in
        bias.withUnsafeBufferPointer { bp in multipliers.withUnsafeBufferPointer { mp in (floatBias ?? []).withUnsafeBufferPointer { fb in
            body(rows, osprey_qepilogue(bias: bp.baseAddress, scale: mp.baseAddress, float_bias: floatBias == nil ? nil : fb.baseAddress,
                                        zero_point: zero, kind: kind, transposed: 0), o)
        } } }
    }
    return out
}

/// DequantizeLinear (per tensor) and an optional bias Add per column applied to a requantized product's bytes.
struct QuantizedMatMulDequantization {
    /// The DequantizeLinear's scale and zero point.
    let scale: Float, zero: Float
    /// The float added per output column afterwards, or nil.
    let bias: [Float]?
}

/// A [..., M, K] (uint8 / int8 bytes, zero point `aZero`) times the plan's B: [..., M, N] as `output` says.
/// `columnBias` (int32 per column, Gemm's C) is added to the sums before the epilogue scales them. With `dequantize`
/// (a `.requantized` output only) the result is float32: the requantized bytes dequantized and biased.
func runQuantizedMatMul(plan: QuantizedMatMulPlan, a: UnsafePointer<UInt8>, signed: Bool, aZero: Int32, shape: [Int],
                        output: QuantizedMatMulOutput, columnBias: [Int32]? = nil, dequantize: QuantizedMatMulDequantization? = nil) -> Tensor {
    let (k, n) = (plan.k, plan.n)
    let panel = Int(OSPREY_QU8_PANEL)
    let outBytes = dequantize != nil ? 4 : output.epilogue.dtype.byteSize
    return quantizedProduct(plan: plan, signed: signed, aZero: aZero, shape: shape, output: output, columnBias: columnBias,
                            outputDType: dequantize != nil ? .float32 : nil) { rows, ep, o in
        let panels = (n + panel - 1) / panel
        plan.panels.withUnsafeBufferPointer { w in
            // About 64K multiply-adds per chunk: below that a hand-off to another thread costs more than it saves.
            parallelRanges(panels, minimumChunk: max(1, 65_536 / max(1, rows * k * panel))) { range in
                let first = range.lowerBound * panel, count = min(n, range.upperBound * panel) - first
                // The epilogue's per-column arrays and the output start at this range's first column.
                var e = ep
                e.bias = ep.bias.map { $0 + first }
                e.scale = ep.scale.map { $0 + first }
                e.float_bias = ep.float_bias.map { $0 + first }
                let weights = w.baseAddress! + range.lowerBound * plan.panelBytes, start = o.baseAddress! + first * outBytes
                guard let dequantize else {
                    osprey_qgemv_u8s8(Int32(rows), Int32(count), Int32(k), a, Int32(k), signed ? 1 : 0, plan.fullRange ? 1 : 0, weights, &e, start, Int32(n))
                    return
                }
                (dequantize.bias ?? []).withUnsafeBufferPointer { bias in
                    var dq = osprey_qdequantize(scale: dequantize.scale, zero: dequantize.zero, bias: dequantize.bias == nil ? nil : bias.baseAddress! + first)
                    osprey_qgemv_u8s8_dequantized(Int32(rows), Int32(count), Int32(k), a, Int32(k), signed ? 1 : 0, plan.fullRange ? 1 : 0, weights, &e, &dq,
                                                  start.assumingMemoryBound(to: Float.self), Int32(n))
                }
            }
        }
    }
}
