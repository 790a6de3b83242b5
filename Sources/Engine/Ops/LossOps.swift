import Foundation
import Tensor

/// Negative log-likelihood of `logProb` [N, C, d...] at `target` [N, d...], with optional class weights and ignore_index.
private func negativeLogLikelihood(_ logProb: [Double], shape: [Int], target: [Int], weight: [Double]?, reduction: String,
                                   ignoreIndex: Int?, _ ctx: OpContext) throws -> (values: [Double], shape: [Int]) {
    let (n, c) = (shape[0], shape[1])
    let inner = shape[2...].reduce(1, *)
    guard target.count == n * inner else { throw ctx.error(.executionFailed, "target has \(target.count) elements, expected \(n * inner)") }
    var losses = [Double](repeating: 0, count: n * inner)
    var weightSum: Double = 0
    for b in 0..<n {
        for i in 0..<inner {
            let t = target[b * inner + i]
            if let ignore = ignoreIndex, t == ignore { continue }
            guard t >= 0 && t < c else { throw ctx.error(.executionFailed, "target \(t) is out of range for \(c) classes") }
            let w = weight?[t] ?? 1
            losses[b * inner + i] = -logProb[(b * c + t) * inner + i] * w
            weightSum += w
        }
    }
    switch reduction {
    case "none": return (losses, [n] + Array(shape[2...]))
    case "sum": return ([losses.reduce(0, +)], [])
    default: return ([weightSum == 0 ? 0 : losses.reduce(0, +) / weightSum], [])
    }
}

/// The attributes both losses take: `reduction` (none, sum or mean) and the optional `ignore_index`.
private func lossAttributes(_ ctx: OpContext) throws -> (reduction: String, ignoreIndex: Int?) {
    let reduction = try ctx.string("reduction", "mean")
    guard ["none", "sum", "mean"].contains(reduction) else { throw ctx.unsupported("reduction", "'\(reduction)'") }
    return (reduction, ctx.has("ignore_index") ? try ctx.int("ignore_index", 0) : nil)
}

let lossOperators: OperatorTable = [
    "NegativeLogLikelihoodLoss": { ctx in
        let (reduction, ignoreIndex) = try lossAttributes(ctx)
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx), target = try inputs.required(1, ctx)
            guard x.rank >= 2, x.dtype.isFloatingPoint else { throw ctx.error(.executionFailed, "input \(x) must be floating point [N, C, ...]") }
            let r = try negativeLogLikelihood(x.doubles, shape: x.shape, target: target.ints, weight: inputs[2]?.doubles,
                                              reduction: reduction, ignoreIndex: ignoreIndex, ctx)
            return [try castTensor(Tensor(shape: r.shape, scalars: r.values), to: x.dtype, ctx)]
        }
    },
    "SoftmaxCrossEntropyLoss": { ctx in
        let (reduction, ignoreIndex) = try lossAttributes(ctx)
        return PreparedKernel { inputs in
            let scores = try inputs.required(0, ctx), labels = try inputs.required(1, ctx)
            guard scores.rank >= 2, scores.dtype.isFloatingPoint else { throw ctx.error(.executionFailed, "scores \(scores) must be floating point [N, C, ...]") }
            let (n, c) = (scores.shape[0], scores.shape[1])
            let inner = scores.shape[2...].reduce(1, *)
            let values = scores.doubles
            var logProb = [Double](repeating: 0, count: values.count)
            for b in 0..<n {
                for i in 0..<inner {
                    var m = -Double.infinity
                    for k in 0..<c { m = max(m, values[(b * c + k) * inner + i]) }
                    var sum: Double = 0
                    for k in 0..<c { sum += Foundation.exp(values[(b * c + k) * inner + i] - m) }
                    let l = Foundation.log(sum)
                    for k in 0..<c { logProb[(b * c + k) * inner + i] = values[(b * c + k) * inner + i] - m - l }
                }
            }
            let r = try negativeLogLikelihood(logProb, shape: scores.shape, target: labels.ints, weight: inputs[2]?.doubles,
                                              reduction: reduction, ignoreIndex: ignoreIndex, ctx)
            return [try castTensor(Tensor(shape: r.shape, scalars: r.values), to: scores.dtype, ctx),
                    try castTensor(Tensor(shape: scores.shape, scalars: logProb), to: scores.dtype, ctx)]
        }
    },
]
