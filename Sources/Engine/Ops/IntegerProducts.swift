import Foundation
import Tensor

/// ConvInteger / QLinearConv sums for 1-D and 2-D convolutions through im2col and the exact double product
/// (`exactIntegerProduct`): the same int32-accumulated values as `integerConvolution`, its reference twin, at BLAS
/// speed. Padding reads the zero point, which centres to 0. Nil for 3-D convolutions (the reference handles them).
/// `centeredWeights` is W minus its zero points when the caller prepared it once (constant weights).
func integerConvolutionFast(_ ctx: OpContext, _ attrs: WindowAttributes, groups: Int, x: Tensor, xZero: Tensor?, w: Tensor, wZero: Tensor?,
                            bias: Tensor?, centeredWeights: [Double]? = nil) throws -> ([Int64], [Int])? {
    guard x.rank == w.rank, x.rank == 3 || x.rank == 4 else { return nil }
    guard x.shape[1] == w.shape[1] * groups, w.shape[0] % groups == 0 else {
        throw ctx.error(.executionFailed, "X \(x.shape) does not match W \(w.shape) with group \(groups)")
    }
    let twoD = x.rank == 4
    let kernel = Array(w.shape[2...]), spatial = Array(x.shape[2...])
    let r = try attrs.resolve(spatial: kernel.count, inputSpatial: spatial, kernel: kernel, ctx)
    let (n, c, m) = (x.shape[0], x.shape[1], w.shape[0])
    let (h, wd) = (twoD ? spatial[0] : 1, spatial.last!)
    let (kh, kw) = (twoD ? kernel[0] : 1, kernel.last!)
    let (sh, sw) = (twoD ? r.strides[0] : 1, r.strides.last!)
    let (dh, dw) = (twoD ? r.dilations[0] : 1, r.dilations.last!)
    let (pt, pl) = (twoD ? r.padBegin[0] : 0, r.padBegin.last!)
    let (pb, pr) = (twoD ? r.padEnd[0] : 0, r.padEnd.last!)
    let outH = (h + pt + pb - dh * (kh - 1) - 1) / sh + 1, outW = (wd + pl + pr - dw * (kw - 1) - 1) / sw + 1
    guard outH > 0, outW > 0, h + pt + pb - dh * (kh - 1) - 1 >= 0, wd + pl + pr - dw * (kw - 1) - 1 >= 0 else {
        throw ctx.error(.executionFailed, "input \(x.shape) is too small for kernel \(kernel)")
    }
    let xz = xZero?.doubleValue(at: 0) ?? 0
    let wz = wZero?.doubles ?? [0]
    guard wz.count == 1 || wz.count == m else { throw ctx.error(.executionFailed, "w_zero_point must be a scalar or per output channel") }
    let cg = c / groups, mg = m / groups, k = cg * kh * kw, plane = outH * outW
    var xc = x.doubles
    if xz != 0 { for i in 0..<xc.count { xc[i] -= xz } }
    let wc = centeredWeights ?? centeredConvolutionWeights(w, zero: wZero)
    let b = bias?.ints
    if let b, b.count != m { throw ctx.error(.executionFailed, "bias has \(b.count) values for \(m) output channels") }
    var result = [Int64](repeating: 0, count: n * m * plane)
    var columns = [Double](repeating: 0, count: k * plane)
    for batch in 0..<n {
        for g in 0..<groups {
            for i in 0..<columns.count { columns[i] = 0 }
            for ic in 0..<cg {
                let source = ((batch * c + g * cg + ic) * h) * wd
                for ky in 0..<kh {
                    for kx in 0..<kw {
                        let row = ((ic * kh + ky) * kw + kx) * plane
                        for oy in 0..<outH {
                            let iy = oy * sh - pt + ky * dh
                            if iy < 0 || iy >= h { continue }
                            for ox in 0..<outW {
                                let ix = ox * sw - pl + kx * dw
                                if ix >= 0 && ix < wd { columns[row + oy * outW + ox] = xc[source + iy * wd + ix] }
                            }
                        }
                    }
                }
            }
            let sums = exactIntegerProduct(Array(wc[(g * mg * k)..<((g + 1) * mg * k)]), columns, m: mg, k: k, n: plane)
            for oc in 0..<mg {
                let channel = g * mg + oc
                let offset = Int64(b?[channel] ?? 0), base = (batch * m + channel) * plane
                for p in 0..<plane { result[base + p] = Int64(sums[oc * plane + p]) + offset }
            }
        }
    }
    return (result, twoD ? [n, m, outH, outW] : [n, m, outW])
}

/// W [M, C/group, k...] minus its scalar or per-output-channel zero point, as doubles.
func centeredConvolutionWeights(_ w: Tensor, zero: Tensor?) -> [Double] {
    var values = w.doubles
    let zeros = zero?.doubles ?? [0]
    let perChannel = values.count / max(w.shape.first ?? 1, 1)
    if zeros.count == 1 {
        if zeros[0] != 0 { for i in 0..<values.count { values[i] -= zeros[0] } }
    } else if zeros.count == w.shape.first {
        for i in 0..<values.count { values[i] -= zeros[i / perChannel] }
    }
    return values
}

/// MatMulInteger / QLinearMatMul sums for a 2-D B through the exact double product: the values of `integerMatMul`,
/// its reference twin. Nil when B is batched (the reference broadcasts those).
func integerMatMulFast(_ a: Tensor, zero aZeroT: Tensor?, _ b: Tensor, zero bZeroT: Tensor?, _ ctx: OpContext) throws -> ([Int64], [Int])? {
    guard b.rank == 2, a.rank >= 1 else { return nil }
    let (k, n) = (b.shape[0], b.shape[1])
    guard a.shape[a.rank - 1] == k else { throw ctx.error(.executionFailed, "inner dimensions differ: \(a.shape) x \(b.shape)") }
    let m = a.rank >= 2 ? a.shape[a.rank - 2] : 1
    let aZero = aZeroT?.doubles ?? [0], bZero = bZeroT?.doubles ?? [0]
    guard aZero.count == 1 || aZero.count == m, bZero.count == 1 || bZero.count == n else {
        throw ctx.error(.unsupportedAttribute, "zero points must be scalars or per-row/per-column vectors")
    }
    let rows = a.count / max(k, 1)
    var ac = a.doubles
    for i in 0..<ac.count { ac[i] -= aZero[aZero.count == 1 ? 0 : (i / k) % m] }
    var bc = b.doubles
    for i in 0..<bc.count { bc[i] -= bZero[bZero.count == 1 ? 0 : i % n] }
    let sums = exactIntegerProduct(ac, bc, m: rows, k: k, n: n).map { Int64($0) }
    return (sums, a.rank == 1 ? [n] : Array(a.shape.dropLast()) + [n])
}
