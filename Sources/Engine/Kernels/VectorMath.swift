import CKernelShim
import Foundation

/// e^x lane-wise (Cephes expf: range reduction by ln 2, degree-6 polynomial, 2^n built in the exponent bits);
/// relative error about 1e-7, inputs clamped to the finite range of Float.
@inline(__always)
func vectorExp(_ x: FloatVector) -> FloatVector {
    var v = x
    v.replace(with: FloatVector(repeating: 88.37626), where: v .> FloatVector(repeating: 88.37626))
    v.replace(with: FloatVector(repeating: -87.33654), where: v .< FloatVector(repeating: -87.33654))
    // Adding 1.5 * 2^23 rounds x / ln 2 to an integer n held in the low mantissa bits.
    let magic = FloatVector(repeating: 12_582_912)
    let shifted = v * FloatVector(repeating: 1.442_695_04) + magic
    let n = shifted - magic
    let r = v - n * FloatVector(repeating: 0.693_359_375) - n * FloatVector(repeating: -2.121_944_40e-4)
    var p = FloatVector(repeating: 1.987_569_150_0e-4)
    p = p * r + FloatVector(repeating: 1.398_199_950_7e-3)
    p = p * r + FloatVector(repeating: 8.333_451_907_3e-3)
    p = p * r + FloatVector(repeating: 4.166_579_589_4e-2)
    p = p * r + FloatVector(repeating: 1.666_666_545_9e-1)
    p = p * r + FloatVector(repeating: 5.000_000_120_1e-1)
    p = p * (r * r) + r + FloatVector(repeating: 1)
    let exponent = unsafeBitCast(shifted, to: SIMD16<UInt32>.self) &- SIMD16(repeating: 0x4B40_0000 - 127)
    return p * unsafeBitCast(exponent &<< SIMD16(repeating: 23), to: FloatVector.self)
}

/// 1 / (1 + e^-x) lane-wise.
@inline(__always)
func vectorSigmoid(_ x: FloatVector) -> FloatVector {
    FloatVector(repeating: 1) / (FloatVector(repeating: 1) + vectorExp(-x))
}

/// tanh(x) = 1 - 2 / (e^2x + 1) lane-wise (absolute error about 1e-7).
@inline(__always)
func vectorTanh(_ x: FloatVector) -> FloatVector {
    FloatVector(repeating: 1) - FloatVector(repeating: 2) / (vectorExp(x + x) + FloatVector(repeating: 1))
}

/// erf(x) lane-wise: a rational approximation odd in x on [-4, 4] (erf is +-1 to float precision beyond), absolute
/// error about 4e-7.
@inline(__always)
func vectorErf(_ x: FloatVector) -> FloatVector {
    let v = clamp(x, FloatVector(repeating: -4), FloatVector(repeating: 4))
    let x2 = v * v
    var p = FloatVector(repeating: -2.726_142_258_013_06e-10)
    p = p * x2 + FloatVector(repeating: 2.770_681_424_959_02e-08)
    p = p * x2 + FloatVector(repeating: -2.101_024_020_825_08e-06)
    p = p * x2 + FloatVector(repeating: -5.692_506_394_623_46e-05)
    p = p * x2 + FloatVector(repeating: -7.349_906_303_268_55e-04)
    p = p * x2 + FloatVector(repeating: -2.954_599_808_540_25e-03)
    p = p * x2 + FloatVector(repeating: -1.609_603_332_624_15e-02)
    var q = FloatVector(repeating: -1.456_607_184_649_96e-05)
    q = q * x2 + FloatVector(repeating: -2.133_740_552_789_05e-04)
    q = q * x2 + FloatVector(repeating: -1.682_826_974_382_03e-03)
    q = q * x2 + FloatVector(repeating: -7.373_329_167_204_68e-03)
    q = q * x2 + FloatVector(repeating: -1.426_473_905_141_89e-02)
    return p * v / q
}

/// x * tanh(softplus(x)) lane-wise, as x * n(n + 2) / (n(n + 2) + 2) with n = e^x (e^x capped at e^20, past which
/// the ratio is 1 in float).
@inline(__always)
func vectorMish(_ x: FloatVector) -> FloatVector {
    var capped = x
    capped.replace(with: FloatVector(repeating: 20), where: capped .> FloatVector(repeating: 20))
    let n = vectorExp(capped)
    let m = n * (n + FloatVector(repeating: 2))
    return x * m / (m + FloatVector(repeating: 2))
}

/// Softmax over each row of a rows x columns row-major matrix, in place: e^(x - max) / sum, vectorised (the C shim's
/// AVX2 + FMA body where the CPU has it). With `source`, the rows are read from there instead (no copy first).
/// With `nanFill`, a row that comes out NaN (a NaN or +inf input, or every input -inf: exactly the rows whose sum
/// is NaN, and then every element is) is written as `nanFill` instead, as `Where(IsNaN(p), fill, p)` would.
public func softmaxRows(_ data: UnsafeMutablePointer<Float>, rows: Int, columns: Int, nanFill: Float? = nil,
                        from source: UnsafePointer<Float>? = nil) {
    guard columns > 0 else { return }
    parallelRanges(rows, minimumChunk: max(1, 65_536 / columns)) { range in
        let offset = range.lowerBound * columns
        if hasFastLogisticKernel {
            osprey_softmax_rows_f32(source.map { $0 + offset } ?? UnsafePointer(data + offset), data + offset, range.count, columns,
                                    nanFill == nil ? 0 : 1, nanFill ?? 0)
            return
        }
        if let source { (data + offset).update(from: source + offset, count: range.count * columns) }
        softmaxRowsPortable(data + offset, rows: range.count, columns: columns, nanFill: nanFill)
    }
}

/// `softmaxRows` in Swift SIMD on one thread: the path of CPUs without AVX2 + FMA, and the C kernel's test twin.
func softmaxRowsPortable(_ data: UnsafeMutablePointer<Float>, rows: Int, columns: Int, nanFill: Float?) {
    guard columns > 0 else { return }
    let width = FloatVector.scalarCount
    for r in 0..<rows {
        let row = data + r * columns
        var best = -Float.infinity
        var j = 0
        if columns >= width {
            var lanes = FloatVector(repeating: -.infinity)
            while j + width <= columns {
                let v = (row + j).vector(FloatVector.self)
                lanes.replace(with: v, where: v .> lanes)
                j += width
            }
            best = lanes.max()
        }
        while j < columns { best = Swift.max(best, row[j]); j += 1 }
        let shift = FloatVector(repeating: best)
        var sums = FloatVector()
        j = 0
        while j + width <= columns {
            let e = vectorExp((row + j).vector(FloatVector.self) - shift)
            (row + j).store(e)
            sums += e
            j += width
        }
        var sum = sums.sum()
        if j < columns {
            // The tail goes through a zero-padded vector so every element sees the same exp.
            var tail = FloatVector(repeating: -.infinity)
            for i in j..<columns { tail[i - j] = row[i] }
            let e = vectorExp(tail - shift)
            for i in j..<columns { row[i] = e[i - j]; sum += e[i - j] }
        }
        if let nanFill, sum.isNaN {
            row.update(repeating: nanFill, count: columns)
            continue
        }
        let scale = FloatVector(repeating: 1 / sum)
        j = 0
        while j + width <= columns {
            (row + j).store((row + j).vector(FloatVector.self) * scale)
            j += width
        }
        while j < columns { row[j] *= 1 / sum; j += 1 }
    }
}

/// Softmax over each row, one value at a time with Foundation's exp: the twin of `softmaxRows`.
public func softmaxRowsReference(_ data: UnsafeMutablePointer<Float>, rows: Int, columns: Int) {
    for r in 0..<rows {
        let row = data + r * columns
        var best = -Float.infinity
        for j in 0..<columns { best = max(best, row[j]) }
        var sum: Float = 0
        for j in 0..<columns { row[j] = Foundation.exp(row[j] - best); sum += row[j] }
        for j in 0..<columns { row[j] /= sum }
    }
}
