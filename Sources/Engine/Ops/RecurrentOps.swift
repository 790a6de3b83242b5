import Foundation
import Tensor

/// One activation of the recurrent ops, by ONNX name with its alpha/beta.
private func recurrentActivation(_ name: String, alpha: Float?, beta: Float?, _ ctx: OpContext) throws -> @Sendable (Float) -> Float {
    switch name.lowercased() {
    case "sigmoid": return { 1 / (1 + Foundation.exp(-$0)) }
    case "tanh": return { Foundation.tanh($0) }
    case "relu": return { max($0, 0) }
    case "affine": let a = alpha ?? 1, b = beta ?? 0; return { a * $0 + b }
    case "leakyrelu": let a = alpha ?? 0.01; return { $0 >= 0 ? $0 : a * $0 }
    case "thresholdedrelu": let a = alpha ?? 1; return { $0 > a ? $0 : 0 }
    case "scaledtanh": let a = alpha ?? 1, b = beta ?? 1; return { a * Foundation.tanh(b * $0) }
    case "hardsigmoid": let a = alpha ?? 0.2, b = beta ?? 0.5; return { max(0, min(1, a * $0 + b)) }
    case "elu": let a = alpha ?? 1; return { $0 >= 0 ? $0 : a * (Foundation.exp($0) - 1) }
    case "softsign": return { $0 / (1 + abs($0)) }
    case "softplus": return { Foundation.log1p(Foundation.exp($0)) }
    default: throw ctx.unsupported("activations", "'\(name)'")
    }
}

/// Which cell a recurrent node runs.
private enum Cell { case rnn, gru, lstm }

private func recurrentFactory(_ cell: Cell) -> @Sendable (OpContext) throws -> PreparedKernel {
    { ctx in
        let gates = cell == .rnn ? 1 : (cell == .gru ? 3 : 4)
        let direction = try ctx.string("direction", "forward")
        guard ["forward", "reverse", "bidirectional"].contains(direction) else { throw ctx.unsupported("direction", "'\(direction)'") }
        let directions = direction == "bidirectional" ? 2 : 1
        let hidden = try ctx.int("hidden_size", 0)
        let clip: Float? = ctx.has("clip") ? try ctx.float("clip", 0) : nil
        let layout = try ctx.int("layout", 0)
        let linearBeforeReset = try ctx.int("linear_before_reset", 0) == 1
        if try ctx.int("input_forget", 0) != 0 { throw ctx.unsupported("input_forget", "= 1") }
        let perDirection = cell == .rnn ? 1 : (cell == .gru ? 2 : 3)
        let defaults = cell == .rnn ? ["Tanh"] : (cell == .gru ? ["Sigmoid", "Tanh"] : ["Sigmoid", "Tanh", "Tanh"])
        var names: [String] = []
        if case .strings(let given)? = ctx.node.attributes["activations"] { names = given.map { String(decoding: $0, as: UTF8.self) } }
        if names.isEmpty { names = Array((0..<directions).map { _ in defaults }.joined()) }
        guard names.count == perDirection * directions else { throw ctx.unsupported("activations", "\(names) (expected \(perDirection * directions))") }
        let alphas = try ctx.floats("activation_alpha") ?? [], betas = try ctx.floats("activation_beta") ?? []
        var functions: [@Sendable (Float) -> Float] = []
        var parameterIndex = 0
        for name in names {
            let takes = ["affine", "leakyrelu", "thresholdedrelu", "scaledtanh", "hardsigmoid", "elu"].contains(name.lowercased())
            let a = takes && parameterIndex < alphas.count ? alphas[parameterIndex] : nil
            let b = takes && parameterIndex < betas.count ? betas[parameterIndex] : nil
            if takes { parameterIndex += 1 }
            functions.append(try recurrentActivation(name, alpha: a, beta: b, ctx))
        }
        let acts = functions
        return PreparedKernel { inputs in
            var x = try castTensor(inputs.required(0, ctx), to: .float32, ctx)
            let w = try inputs.required(1, ctx), r = try inputs.required(2, ctx)
            guard x.rank == 3, w.rank == 3, r.rank == 3, w.shape[0] == directions, w.shape[1] == gates * hidden, hidden > 0 else {
                throw ctx.error(.executionFailed, "X \(x.shape), W \(w.shape), R \(r.shape) do not match hidden_size \(hidden) and \(directions) direction(s)")
            }
            if layout == 1 { x = permutedCopy(x, viewShape: x.shape, perm: [1, 0, 2], outShape: [x.shape[1], x.shape[0], x.shape[2]]) }
            let (steps, batch, inputSize) = (x.shape[0], x.shape[1], x.shape[2])
            guard w.shape[2] == inputSize, r.shape[2] == hidden else { throw ctx.error(.executionFailed, "W \(w.shape) / R \(r.shape) do not match input size \(inputSize)") }
            let G = gates * hidden
            let wv = try w.floatScalars(ctx), rv = try r.floatScalars(ctx)
            let bias = try inputs[3]?.floatScalars(ctx) ?? [Float](repeating: 0, count: directions * 2 * G)
            let lens = inputs[4]?.ints ?? [Int](repeating: steps, count: batch)
            let h0 = try inputs[5]?.floatScalars(ctx) ?? [Float](repeating: 0, count: directions * batch * hidden)
            let c0 = cell == .lstm ? (try inputs[6]?.floatScalars(ctx) ?? [Float](repeating: 0, count: directions * batch * hidden)) : []
            let peep = cell == .lstm ? (try inputs[7]?.floatScalars(ctx) ?? [Float](repeating: 0, count: directions * 3 * hidden)) : []
            guard r.count == directions * G * hidden, c0.count == (cell == .lstm ? directions * batch * hidden : 0),
                  peep.count == (cell == .lstm ? directions * 3 * hidden : 0), lens.allSatisfy({ $0 >= 0 && $0 <= steps }) else {
                throw ctx.error(.executionFailed, "R \(r.shape), initial_c, P or sequence_lens do not match hidden_size \(hidden), batch \(batch), \(steps) steps")
            }
            guard bias.count == directions * 2 * G, lens.count == batch, h0.count == directions * batch * hidden else {
                throw ctx.error(.executionFailed, "B, sequence_lens or initial_h do not match the declared sizes")
            }
            let xv = x.scalars(as: Float.self)
            var y = [Float](repeating: 0, count: steps * directions * batch * hidden)
            var yh = [Float](repeating: 0, count: directions * batch * hidden), yc = yh
            for d in 0..<directions {
                let reverse = direction == "reverse" || d == 1
                let f = acts[d * perDirection], g = perDirection > 1 ? acts[d * perDirection + 1] : f, hAct = perDirection > 2 ? acts[d * perDirection + 2] : f
                let W = Array(wv[(d * G * inputSize)..<((d + 1) * G * inputSize)]), R = Array(rv[(d * G * hidden)..<((d + 1) * G * hidden)])
                let wb = Array(bias[(d * 2 * G)..<(d * 2 * G + G)]), rb = Array(bias[(d * 2 * G + G)..<((d + 1) * 2 * G)])
                var h = Array(h0[(d * batch * hidden)..<((d + 1) * batch * hidden)])
                var c = cell == .lstm ? Array(c0[(d * batch * hidden)..<((d + 1) * batch * hidden)]) : []
                var xw = [Float](repeating: 0, count: batch * G), hr = xw
                for step in 0..<steps {
                    // Gate pre-activations for every batch row: X_t W^T and H R^T.
                    for b in 0..<batch {
                        let t = reverse ? lens[b] - 1 - step : step
                        for j in 0..<G {
                            var s = wb[j]
                            if t >= 0 && t < steps { for k in 0..<inputSize { s += xv[(t * batch + b) * inputSize + k] * W[j * inputSize + k] } }
                            xw[b * G + j] = s
                            var q = rb[j]
                            for k in 0..<hidden { q += h[b * hidden + k] * R[j * hidden + k] }
                            hr[b * G + j] = q
                        }
                    }
                    for b in 0..<batch where step < lens[b] {
                        let t = reverse ? lens[b] - 1 - step : step
                        let clipped = { (v: Float) -> Float in clip.map { min(max(v, -$0), $0) } ?? v }
                        var next = [Float](repeating: 0, count: hidden)
                        switch cell {
                        case .rnn:
                            for k in 0..<hidden { next[k] = f(clipped(xw[b * G + k] + hr[b * G + k])) }
                        case .gru:
                            var reset = [Float](repeating: 0, count: hidden)
                            for k in 0..<hidden { reset[k] = f(clipped(xw[b * G + hidden + k] + hr[b * G + hidden + k])) }
                            for k in 0..<hidden {
                                let z = f(clipped(xw[b * G + k] + hr[b * G + k]))
                                var pre: Float
                                if linearBeforeReset {
                                    pre = xw[b * G + 2 * hidden + k] + reset[k] * hr[b * G + 2 * hidden + k]
                                } else {
                                    var q = rb[2 * hidden + k]
                                    for m in 0..<hidden { q += reset[m] * h[b * hidden + m] * R[(2 * hidden + k) * hidden + m] }
                                    pre = xw[b * G + 2 * hidden + k] + q
                                }
                                let candidate = g(clipped(pre))
                                next[k] = (1 - z) * candidate + z * h[b * hidden + k]
                            }
                        case .lstm:
                            for k in 0..<hidden {
                                let prevC = c[b * hidden + k]
                                let i = f(clipped(xw[b * G + k] + hr[b * G + k] + peep[d * 3 * hidden + k] * prevC))
                                let fg = f(clipped(xw[b * G + 2 * hidden + k] + hr[b * G + 2 * hidden + k] + peep[d * 3 * hidden + 2 * hidden + k] * prevC))
                                let cand = g(clipped(xw[b * G + 3 * hidden + k] + hr[b * G + 3 * hidden + k]))
                                let newC = fg * prevC + i * cand
                                let o = f(clipped(xw[b * G + hidden + k] + hr[b * G + hidden + k] + peep[d * 3 * hidden + hidden + k] * newC))
                                c[b * hidden + k] = newC
                                next[k] = o * hAct(newC)
                            }
                        }
                        for k in 0..<hidden {
                            h[b * hidden + k] = next[k]
                            y[((t * directions + d) * batch + b) * hidden + k] = next[k]
                        }
                    }
                }
                for i in 0..<(batch * hidden) {
                    yh[d * batch * hidden + i] = h[i]
                    if cell == .lstm { yc[d * batch * hidden + i] = c[i] }
                }
            }
            var outY = Tensor(shape: [steps, directions, batch, hidden], scalars: y)
            var outH = Tensor(shape: [directions, batch, hidden], scalars: yh)
            var outC = Tensor(shape: [directions, batch, hidden], scalars: yc)
            if layout == 1 {
                outY = permutedCopy(outY, viewShape: outY.shape, perm: [2, 0, 1, 3], outShape: [batch, steps, directions, hidden])
                outH = permutedCopy(outH, viewShape: outH.shape, perm: [1, 0, 2], outShape: [batch, directions, hidden])
                outC = permutedCopy(outC, viewShape: outC.shape, perm: [1, 0, 2], outShape: [batch, directions, hidden])
            }
            return cell == .lstm ? [outY, outH, outC] : [outY, outH]
        }
    }
}

let recurrentOperators: OperatorTable = [
    "RNN": recurrentFactory(.rnn),
    "GRU": recurrentFactory(.gru),
    "LSTM": recurrentFactory(.lstm),
]
