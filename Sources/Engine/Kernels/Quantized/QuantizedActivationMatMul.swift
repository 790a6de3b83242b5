import CKernelShim
import Tensor

// QLinearMatMul whose B is computed at run time (attention's Q x K^T and P x V, in QOperator graphs and in QDQ graphs
// after the rewrite): per batch matrix, A's rows widened to int16 minus a_zero, B packed minus b_zero by
// `osprey_qpack_s16` (vectorized), one int16-pair GEMM whose epilogue requantizes with a_scale * b_scale / y_scale,
// so no int32 tensor is written. int16 pairs are exact for any 8-bit values (an activation B need not fit the
// u8 x s8 kernel's [-64, 64]). The general path (`fastIntegerMatMul` + `requantizedMatMulSums`) is its twin.

/// A [..., M, K] x B [..., K, N] (numpy batch broadcasting), requantized to y_zero's type, for per-tensor scales and
/// zero points; nil when a parameter is not per tensor, an operand is not 8-bit or has rank < 2, or K is 0.
func qlinearMatMulRuntimeB(a: Tensor, aScale: Tensor, aZero: Tensor?, b: Tensor, bScale: Tensor, bZero: Tensor?,
                           yScale: Tensor, yZero: Tensor, _ ctx: OpContext) throws -> Tensor? {
    func eightBit(_ d: DType) -> Bool { d == .uint8 || d == .int8 }
    guard a.rank >= 2, b.rank >= 2, eightBit(a.dtype), eightBit(b.dtype), eightBit(yZero.dtype), aScale.count == 1, bScale.count == 1,
          yScale.count == 1, yZero.count == 1, aZero.map({ $0.count == 1 }) ?? true, bZero.map({ $0.count == 1 }) ?? true else { return nil }
    let (m, k, n) = (a.shape[a.rank - 2], a.shape[a.rank - 1], b.shape[b.rank - 1])
    guard b.shape[b.rank - 2] == k else { throw ctx.error(.executionFailed, "inner dimensions differ: \(a.shape) x \(b.shape)") }
    guard k > 0 else { return nil }
    let aBatch = Array(a.shape.dropLast(2)), bBatch = Array(b.shape.dropLast(2))
    guard let batch = broadcastShape(aBatch, bBatch) else { throw ctx.error(.executionFailed, "cannot broadcast \(a.shape) and \(b.shape)") }
    let aStrides = broadcastStrides(aBatch, to: batch), bStrides = broadcastStrides(bBatch, to: batch)
    let batchStrides = Tensor.contiguousStrides(batch), count = batch.reduce(1, *)
    var out = Tensor.pooled(yZero.dtype, shape: batch + [m, n])
    guard m > 0, n > 0, count > 0 else { return out }
    let multiplier = Float(aScale.doubleValue(at: 0)) * Float(bScale.doubleValue(at: 0)) / Float(yScale.doubleValue(at: 0))
    let scales = [Float](repeating: multiplier, count: m)
    let az = Int32(aZero?.doubleValue(at: 0) ?? 0), bz = Int32(bZero?.doubleValue(at: 0) ?? 0)
    let kind = Int32(yZero.dtype == .int8 ? OSPREY_QOUT_S8 : OSPREY_QOUT_U8), yz = Int32(yZero.doubleValue(at: 0))
    let stride = quantizedRowStride(k), kpairs = (k + 1) / 2
    let panel = Int(OSPREY_QGEMM_PANEL), packedCount = (n + panel - 1) / panel * kpairs * 2 * panel
    a.withUnsafeBytes { pa in b.withUnsafeBytes { pb in out.withUnsafeMutableBytes { po in scales.withUnsafeBufferPointer { sp in
        let ap = pa.baseAddress!.assumingMemoryBound(to: UInt8.self), bp = pb.baseAddress!.assumingMemoryBound(to: UInt8.self)
        let op = po.baseAddress!
        parallelRanges(count, minimumChunk: max(1, 65_536 / max(1, m * n * k))) { range in
            let widened = UnsafeMutablePointer<Int16>.allocate(capacity: m * stride), packed = UnsafeMutablePointer<Int16>.allocate(capacity: packedCount)
            defer { widened.deallocate(); packed.deallocate() }
            var ep = osprey_qepilogue(bias: nil, scale: sp.baseAddress, float_bias: nil, zero_point: yz, kind: kind, transposed: 0)
            for i in range {
                var rem = i, ao = 0, bo = 0
                for d in 0..<batch.count {
                    let q = rem / batchStrides[d]; rem %= batchStrides[d]
                    ao += q * aStrides[d]; bo += q * bStrides[d]
                }
                if a.dtype == .int8 {
                    widenQuantizedRows(m: m, k: k, values: UnsafeRawPointer(ap + ao * m * k).assumingMemoryBound(to: Int8.self), rowStride: k,
                                       zeroPoints: [az], into: widened)
                } else {
                    widenQuantizedRows(m: m, k: k, values: ap + ao * m * k, rowStride: k, zeroPoints: [az], into: widened)
                }
                osprey_qpack_s16(Int32(k), Int32(n), bp + bo * k * n, Int32(n), b.dtype == .int8 ? 1 : 0, bz, packed)
                osprey_qgemm_s16_epilogue(Int32(m), Int32(n), Int32(kpairs), widened, Int32(stride), packed, &ep, op + i * m * n, Int32(n))
            }
        }
    } } } }
    return out
}
