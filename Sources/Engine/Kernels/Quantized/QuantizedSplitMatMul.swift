import Tensor

// Full-range 8-bit weights (centred values beyond [-64, 64]) on the u8 x s8 kernels, exactly: vpmaddubsw saturates
// a pair of u8 x s8 products past int16, so each centred weight v is split into `pieces` parts in [-64, 64] that sum
// to v, stored as K * pieces rows (row k * pieces + p holds part p of row k), and every value of A is repeated
// `pieces` times along K. The int32 sums are the same as the unsplit product's; the cost is `pieces` times K. On a
// VNNI CPU `QuantizedMatMulPlan` already takes any int8 weights, so only wider ones (uint8 with a zero point) split.

/// A constant B (K x N) whose centred values leave [-64, 64], as a `QuantizedMatMulPlan` over K * `pieces` rows.
struct SplitQuantizedMatMulPlan: @unchecked Sendable {
    /// The plan of the split B (reduction length K * pieces, centred, zero point folded in).
    let plan: QuantizedMatMulPlan
    /// Parts per weight (2 for int8 weights with zero point 0, up to 4).
    let pieces: Int

    /// Nil when B is not 2-D 8-bit or the zero point is not a scalar or per column. `transposed`: b holds B^T (N x K).
    init?(_ b: Tensor, zero: Tensor?, transposed: Bool = false) {
        guard b.rank == 2, b.dtype == .uint8 || b.dtype == .int8 else { return nil }
        let (k, n) = transposed ? (b.shape[1], b.shape[0]) : (b.shape[0], b.shape[1])
        let zeros = zero.map { $0.doubles.map { Int32($0) } } ?? [0]
        guard zeros.count == 1 || zeros.count == n, k > 0, n > 0 else { return nil }
        let raw: [Int32] = b.dtype == .uint8 ? b.scalars(as: UInt8.self).map { Int32($0) } : b.scalars(as: Int8.self).map { Int32($0) }
        var centred = [Int32](repeating: 0, count: k * n)
        for r in 0..<k { for c in 0..<n { centred[r * n + c] = raw[transposed ? c * k + r : r * n + c] - zeros[zeros.count == 1 ? 0 : c] } }
        let widest = centred.map { abs($0) }.max() ?? 0
        let pieces = max(1, (Int(widest) + 63) / 64)
        var split = [Int8](repeating: 0, count: k * pieces * n)
        for r in 0..<k {
            for c in 0..<n {
                for (p, part) in splitWeight(centred[r * n + c], pieces: pieces).enumerated() { split[(r * pieces + p) * n + c] = part }
            }
        }
        guard let plan = QuantizedMatMulPlan(Tensor(shape: [k * pieces, n], scalars: split), zero: nil) else { return nil }
        self.plan = plan
        self.pieces = pieces
    }
}

/// `v` as `pieces` parts whose sum is v, each within ceil(|v| / pieces) of zero (so within [-64, 64] when
/// |v| <= 64 * pieces): the quotient in every part, the remainder's units in the first ones.
func splitWeight(_ v: Int32, pieces: Int) -> [Int8] {
    let p = Int32(pieces), q = v / p, r = v - q * p
    return (0..<pieces).map { Int8(q + (Int32($0) < abs(r) ? r.signum() : 0)) }
}
