import Foundation
import Tensor

/// One direction's quantized weights: W or R minus its zero points ([rows, 4H], as doubles for the exact product)
/// and the per-column scales.
private struct QuantizedGateWeights {
    var centered: [Double]
    var scales: [Float]

    /// Direction `d` of a [D, rows, 4H] integer tensor with [D] or [D, 4H] scales and zero points.
    init(_ w: Tensor, scale: Tensor, zero: Tensor, direction d: Int, _ ctx: OpContext) throws {
        guard w.dtype == .uint8 || w.dtype == .int8, w.rank == 3 else { throw ctx.error(.unsupportedDType, "quantized weights must be 3-D uint8/int8, got \(w.dtype) \(w.shape)") }
        let (directions, rows, columns) = (w.shape[0], w.shape[1], w.shape[2])
        let s = scale.doubles, z = zero.doubles
        let perChannel = s.count == directions * columns
        guard perChannel || s.count == directions, z.count == s.count else {
            throw ctx.error(.executionFailed, "scale \(scale.shape) and zero point \(zero.shape) must be [\(directions)] or [\(directions), \(columns)]")
        }
        let all = w.doubles
        centered = [Double](repeating: 0, count: rows * columns)
        scales = [Float](repeating: 0, count: columns)
        for c in 0..<columns {
            let p = perChannel ? d * columns + c : d
            scales[c] = Float(s[p])
            for r in 0..<rows { centered[r * columns + c] = all[(d * rows + r) * columns + c] - z[p] }
        }
    }

    /// rows x 4H float product of a float block quantized on the fly (onnxruntime's dynamic uint8 range) with these weights.
    func product(_ values: [Float], rows: Int, inner: Int) -> [Float] {
        let columns = scales.count
        let (scale, zero) = values.withUnsafeBufferPointer { dynamicQuantizationParameters($0) }
        let q = values.withUnsafeBufferPointer { dynamicallyQuantizedCentered($0, scale: scale, zero: zero) }
        let sums = exactIntegerProduct(q, centered, m: rows, k: inner, n: columns)
        return sums.enumerated().map { Float($0.element) * (scale * scales[$0.offset % columns]) }
    }
}

@inline(__always) private func sigmoid(_ x: Float) -> Float { 1 / (1 + Foundation.exp(-x)) }

/// DynamicQuantizeLSTM: an LSTM (gates i, o, f, c; default activations) whose W [D, I, 4H] and R [D, H, 4H] are
/// quantized; X (all steps at once) and each sequence's hidden state (per step) are quantized to uint8 on the fly before the integer products, as
/// onnxruntime does.
let contribQuantizedLSTMOperators: OperatorTable = [
    "DynamicQuantizeLSTM": { ctx in
        let direction = try ctx.string("direction", "forward")
        guard ["forward", "reverse", "bidirectional"].contains(direction) else { throw ctx.unsupported("direction", "'\(direction)'") }
        let directions = direction == "bidirectional" ? 2 : 1
        let hidden = try ctx.int("hidden_size", 0)
        let clip: Float? = ctx.has("clip") ? try ctx.float("clip", 0) : nil
        if try ctx.int("input_forget", 0) != 0 { throw ctx.unsupported("input_forget", "= 1") }
        if case .strings(let names)? = ctx.node.attributes["activations"] {
            let given = names.map { String(decoding: $0, as: UTF8.self).lowercased() }
            guard given == Array(repeating: ["sigmoid", "tanh", "tanh"], count: directions).flatMap({ $0 }) else {
                throw ctx.unsupported("activations", "\(given) (only the default Sigmoid, Tanh, Tanh)")
            }
        }
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            let xv = try floatValues(x, "X", ctx)
            let w = try inputs.required(1, ctx), r = try inputs.required(2, ctx)
            guard x.rank == 3, hidden > 0, w.rank == 3, w.shape == [directions, x.shape[2], 4 * hidden], r.shape == [directions, hidden, 4 * hidden] else {
                throw ctx.error(.executionFailed, "X \(x.shape), W \(w.shape), R \(r.shape) do not match hidden_size \(hidden) and \(directions) direction(s)")
            }
            let (steps, batch, inputSize) = (x.shape[0], x.shape[1], x.shape[2])
            let gates = 4 * hidden
            let bias = try inputs[3].map { try floatValues($0, "B", ctx) }
            if let bias, bias.count != directions * 2 * gates { throw ctx.error(.executionFailed, "B must be [\(directions), \(2 * gates)]") }
            let lengths = inputs[4]?.ints ?? [Int](repeating: steps, count: batch)
            guard lengths.count == batch, lengths.allSatisfy({ $0 >= 0 && $0 <= steps }) else { throw ctx.error(.executionFailed, "sequence_lens must hold \(batch) lengths in 0...\(steps)") }
            let initialH = try inputs[5].map { try floatValues($0, "initial_h", ctx) }
            let initialC = try inputs[6].map { try floatValues($0, "initial_c", ctx) }
            for state in [initialH, initialC] where state != nil && state!.count != directions * batch * hidden {
                throw ctx.error(.executionFailed, "initial states must be [\(directions), \(batch), \(hidden)]")
            }
            let peepholes = try inputs[7].map { try floatValues($0, "P", ctx) }
            if let peepholes, peepholes.count != directions * 3 * hidden { throw ctx.error(.executionFailed, "P must be [\(directions), \(3 * hidden)]") }
            let wScale = try inputs.required(8, ctx), wZero = try inputs.required(9, ctx)
            let rScale = try inputs.required(10, ctx), rZero = try inputs.required(11, ctx)

            var y = [Float](repeating: 0, count: steps * directions * batch * hidden)
            var yh = [Float](repeating: 0, count: directions * batch * hidden), yc = yh
            for d in 0..<directions {
                let reverse = direction == "reverse" || d == 1
                let wd = try QuantizedGateWeights(w, scale: wScale, zero: wZero, direction: d, ctx)
                let rd = try QuantizedGateWeights(r, scale: rScale, zero: rZero, direction: d, ctx)
                // The input projection of every step at once (one quantization range for all of X).
                let projected = wd.product(xv, rows: steps * batch, inner: inputSize)
                var h = initialH.map { Array($0[(d * batch * hidden)..<((d + 1) * batch * hidden)]) } ?? [Float](repeating: 0, count: batch * hidden)
                var c = initialC.map { Array($0[(d * batch * hidden)..<((d + 1) * batch * hidden)]) } ?? [Float](repeating: 0, count: batch * hidden)
                let bw = bias.map { Array($0[(d * 2 * gates)..<(d * 2 * gates + gates)]) }
                let br = bias.map { Array($0[(d * 2 * gates + gates)..<((d + 1) * 2 * gates)]) }
                let p = peepholes.map { Array($0[(d * 3 * hidden)..<((d + 1) * 3 * hidden)]) }
                for j in 0..<steps {
                    for b in 0..<batch where j < lengths[b] {
                        let t = reverse ? lengths[b] - 1 - j : j
                        // Each sequence's hidden state gets its own quantization range, so a row's result does not
                        // depend on what it is batched with. onnxruntime quantizes per chunk of ceil(batch / threads)
                        // rows: the same at threads >= batch, a different range (and result) below that.
                        let recurrent = rd.product(Array(h[(b * hidden)..<((b + 1) * hidden)]), rows: 1, inner: hidden)
                        var g = [Float](repeating: 0, count: gates)
                        for k in 0..<gates {
                            var v = projected[(t * batch + b) * gates + k] + recurrent[k]
                            if let bw, let br { v += bw[k] + br[k] }
                            g[k] = v
                        }
                        for u in 0..<hidden {
                            let cPrev = c[b * hidden + u]
                            func clipped(_ v: Float) -> Float { clip.map { min(max(v, -$0), $0) } ?? v }
                            let i = sigmoid(clipped(g[u] + (p?[u] ?? 0) * cPrev))
                            let f = sigmoid(clipped(g[2 * hidden + u] + (p?[2 * hidden + u] ?? 0) * cPrev))
                            let candidate = Foundation.tanh(clipped(g[3 * hidden + u]))
                            let cNew = f * cPrev + i * candidate
                            let o = sigmoid(clipped(g[hidden + u] + (p?[hidden + u] ?? 0) * cNew))
                            let hNew = o * Foundation.tanh(cNew)
                            c[b * hidden + u] = cNew
                            h[b * hidden + u] = hNew
                            y[((t * directions + d) * batch + b) * hidden + u] = hNew
                        }
                    }
                }
                for i in 0..<(batch * hidden) { yh[d * batch * hidden + i] = h[i]; yc[d * batch * hidden + i] = c[i] }
            }
            return [Tensor(shape: [steps, directions, batch, hidden], scalars: y), Tensor(shape: [directions, batch, hidden], scalars: yh),
                    Tensor(shape: [directions, batch, hidden], scalars: yc)]
        }
    },
]
