import Foundation
import Tensor

/// float32 Softmax along one axis of a [outer, dim, inner] view, vectorised: the last axis (inner 1) through
/// `softmaxRows`, an inner axis (YOLO's DFL, channel-wise softmax) 16 positions of `inner` at a time. The scalar
/// `softmax` is the reference twin (and the LogSoftmax path). With `nanFill`, NaN results become `nanFill`.
func softmaxFast(_ x: Tensor, outer: Int, dim: Int, inner: Int, nanFill: Float? = nil) -> Tensor {
    var out = Tensor.pooled(.float32, shape: x.shape)
    guard out.count > 0, dim > 0 else { return out }
    x.withUnsafeBufferPointer(of: Float.self) { src in out.withUnsafeMutableBufferPointer(of: Float.self) { dst in
        let s = src.baseAddress!, d = dst.baseAddress!
        if inner == 1 {
            softmaxRows(d, rows: outer, columns: dim, nanFill: nanFill, from: s)
            return
        }
        let width = FloatVector.scalarCount
        let blocks = (inner + width - 1) / width
        parallelRanges(outer * blocks, minimumChunk: max(1, 4096 / max(1, dim * width))) { range in
            for job in range {
                let o = job / blocks, i = (job % blocks) * width
                let base = o * dim * inner + i
                guard i + width <= inner else {
                    // Tail positions one at a time.
                    for t in i..<inner {
                        var m = -Float.infinity
                        for k in 0..<dim { m = Swift.max(m, s[base - i + t + k * inner]) }
                        var sum: Float = 0
                        for k in 0..<dim {
                            let e = Foundation.exp(s[base - i + t + k * inner] - m)
                            d[base - i + t + k * inner] = e
                            sum += e
                        }
                        for k in 0..<dim { d[base - i + t + k * inner] *= 1 / sum }
                    }
                    continue
                }
                var m = FloatVector(repeating: -.infinity)
                for k in 0..<dim {
                    let v = (s + base + k * inner).vector(FloatVector.self)
                    m.replace(with: v, where: v .> m)
                }
                var sum = FloatVector()
                for k in 0..<dim {
                    let e = vectorExp((s + base + k * inner).vector(FloatVector.self) - m)
                    (d + base + k * inner).store(e)
                    sum += e
                }
                let r = FloatVector(repeating: 1) / sum
                for k in 0..<dim { (d + base + k * inner).store((d + base + k * inner).vector(FloatVector.self) * r) }
            }
        }
    } }
    if let nanFill, inner != 1 {
        out.withUnsafeMutableBufferPointer(of: Float.self) { replaceNaN($0.baseAddress!, count: $0.count, with: nanFill) }
    }
    return out
}
