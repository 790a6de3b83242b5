import Foundation
import Tensor

/// ONNX Attention (opsets 23-24, float32): softmax(softcap(scale * Q K^T) + bias) V per batch and query head, with
/// Q, K, V as [B, heads, S, D] or [B, S, heads * D] (q_num_heads / kv_num_heads), grouped-query heads (each K/V head
/// serves heads_q / heads_kv query heads), past_key / past_value appended before the new keys (present outputs),
/// attn_mask (bool: false masks; float: added; broadcast to [B, heads, S, T], short masks padded as masked), is_causal
/// aligned bottom-right by the past length or nonpad_kv_seqlen, nonpad_kv_seqlen padding (opset 24), sliding windows,
/// and qk_matmul_output (mode 0/1 the scaled, soft-capped products; 2 with the bias; 3 the softmax). A row with every
/// key masked attends nothing (zeros), as the spec's reference does.
let attentionOperators: OperatorTable = [
    "Attention": { ctx in
        let causal = try ctx.int("is_causal", 0) == 1
        let qHeadsAttribute = try ctx.int("q_num_heads", 0), kvHeadsAttribute = try ctx.int("kv_num_heads", 0)
        let scaleAttribute = ctx.has("scale") ? try ctx.float("scale", 1) : nil
        let softcap = try ctx.float("softcap", 0), mode = try ctx.int("qk_matmul_output_mode", 0)
        let leftWindow = try ctx.int("left_window_size", -1), rightWindow = try ctx.int("right_window_size", -1)
        guard (0...3).contains(mode) else { throw ctx.unsupported("qk_matmul_output_mode", "\(mode)") }
        let attention: @Sendable (inout KernelInputs) throws -> [Tensor] = { inputs in
            let q = try inputs.required(0, ctx), k = try inputs.required(1, ctx), v = try inputs.required(2, ctx)
            guard q.rank == k.rank, k.rank == v.rank, q.rank == 3 || q.rank == 4 else {
                throw ctx.error(.executionFailed, "Q, K and V must all be 3-D or all 4-D, got \(q.shape), \(k.shape), \(v.shape)")
            }
            let batch = q.shape[0]
            let heads = try AttentionHeads(q: q, k: k, v: v, qHeads: qHeadsAttribute, kvHeads: kvHeadsAttribute, ctx)
            let qs = heads.split(q, heads.qHeads, heads.qSize), ks = heads.split(k, heads.kvHeads, heads.kSize)
            let vs = heads.split(v, heads.kvHeads, heads.vSize)
            // Past keys and values [B, kvHeads, P, size] go first.
            var pastLength = 0
            var keys = ks, values = vs
            if let pk = inputs[4], let pv = inputs[5] {
                guard pk.shape.count == 4, pk.shape[0] == batch, pk.shape[1] == heads.kvHeads, pk.shape[3] == heads.kSize,
                      pv.shape == [batch, heads.kvHeads, pk.shape[2], heads.vSize] else {
                    throw ctx.error(.executionFailed, "past_key \(pk.shape) / past_value \(pv.shape) do not match [\(batch), \(heads.kvHeads), P, \(heads.kSize) / \(heads.vSize)]")
                }
                pastLength = pk.shape[2]
                keys = appendKeys(past: pk.scalars(as: Float.self), ks, batch: batch, heads: heads.kvHeads, pastLength: pastLength,
                                  newLength: heads.kvLength, size: heads.kSize)
                values = appendKeys(past: pv.scalars(as: Float.self), vs, batch: batch, heads: heads.kvHeads, pastLength: pastLength,
                                    newLength: heads.kvLength, size: heads.vSize)
            } else if inputs[4] != nil || inputs[5] != nil {
                throw ctx.error(.invalidModel, "past_key and past_value must be given together")
            }
            let queries = heads.qLength, total = pastLength + heads.kvLength
            let bias = try AttentionBias(mask: inputs[3], nonpad: inputs[6], batch: batch, heads: heads.qHeads, queries: queries, keys: total,
                                         causal: causal, pastLength: pastLength, leftWindow: leftWindow, rightWindow: rightWindow,
                                         hasPast: inputs[4] != nil, ctx)
            let scale = scaleAttribute ?? 1 / Float(heads.qSize).squareRoot()
            var y = [Float](repeating: 0, count: batch * heads.qHeads * queries * heads.vSize)
            var products = [Float](repeating: 0, count: batch * heads.qHeads * queries * total)
            let group = heads.qHeads / heads.kvHeads
            var scores = [Float](repeating: 0, count: total), biasRow = [Float](repeating: 0, count: total)
            for b in 0..<batch {
                for h in 0..<heads.qHeads {
                    let kvh = h / group
                    for i in 0..<queries {
                        let qRow = ((b * heads.qHeads + h) * queries + i) * heads.qSize
                        bias.row(b: b, h: h, i: i, into: &biasRow)
                        var best = -Float.infinity
                        for j in 0..<total {
                            let kRow = ((b * heads.kvHeads + kvh) * total + j) * heads.kSize
                            var dot: Float = 0
                            for d in 0..<heads.qSize { dot += qs[qRow + d] * keys[kRow + d] }
                            var s = dot * scale
                            if softcap > 0 { s = Foundation.tanh(s / softcap) * softcap }
                            let out = ((b * heads.qHeads + h) * queries + i) * total + j
                            if mode <= 1 { products[out] = s }
                            s += biasRow[j]
                            if mode == 2 { products[out] = s }
                            scores[j] = s
                            best = Swift.max(best, s)
                        }
                        let allMasked = biasRow.allSatisfy { $0 == -.infinity }
                        var sum: Float = 0
                        for j in 0..<total {
                            let e = allMasked || scores[j] == -.infinity ? 0 : Foundation.exp(scores[j] - best)
                            scores[j] = e
                            sum += e
                        }
                        let inverse: Float = sum > 0 ? 1 / sum : 0
                        let yRow = ((b * heads.qHeads + h) * queries + i) * heads.vSize
                        for j in 0..<total {
                            let p = scores[j] * inverse
                            if mode == 3 { products[((b * heads.qHeads + h) * queries + i) * total + j] = p }
                            guard p != 0 else { continue }
                            let vRow = ((b * heads.kvHeads + kvh) * total + j) * heads.vSize
                            for d in 0..<heads.vSize { y[yRow + d] += p * values[vRow + d] }
                        }
                    }
                }
            }
            let output: Tensor
            if q.rank == 3 {
                // [B, heads, S, Dv] back to [B, S, heads * Dv].
                var merged = [Float](repeating: 0, count: y.count)
                for b in 0..<batch { for h in 0..<heads.qHeads { for i in 0..<queries { for d in 0..<heads.vSize {
                    merged[((b * queries + i) * heads.qHeads + h) * heads.vSize + d] = y[((b * heads.qHeads + h) * queries + i) * heads.vSize + d]
                } } } }
                output = Tensor(shape: [batch, queries, heads.qHeads * heads.vSize], scalars: merged)
            } else {
                output = Tensor(shape: [batch, heads.qHeads, queries, heads.vSize], scalars: y)
            }
            return [output, Tensor(shape: [batch, heads.kvHeads, total, heads.kSize], scalars: keys),
                    Tensor(shape: [batch, heads.kvHeads, total, heads.vSize], scalars: values),
                    Tensor(shape: [batch, heads.qHeads, queries, total], scalars: products)]
        }
        return PreparedKernel { inputs in
            // float16 and bfloat16 compute in float32 and round back, as the spec's reference does per operation.
            let dtype = try inputs.required(0, ctx).dtype
            guard [DType.float32, .float16, .bfloat16].contains(dtype) else { throw ctx.error(.unsupportedDType, "Q must be float32, float16 or bfloat16, got \(dtype)") }
            for index in [0, 1, 2, 4, 5] {
                guard let t = inputs[index] else { continue }
                guard t.dtype == dtype else { throw ctx.error(.unsupportedDType, "input \(index) is \(t.dtype), Q is \(dtype)") }
                if dtype != .float32 { inputs.values[index] = try castTensor(t, to: .float32, ctx) }
            }
            if let m = inputs[3], m.dtype != .bool, m.dtype != .float32 { inputs.values[3] = try castTensor(m, to: .float32, ctx) }
            let results = try attention(&inputs)
            return dtype == .float32 ? results : try results.map { try castTensor($0, to: dtype, ctx) }
        }
    },
]

/// Head counts and sizes of an Attention call, and the split of 3-D inputs into [B, heads, S, size].
private struct AttentionHeads {
    let qHeads: Int, kvHeads: Int, qSize: Int, kSize: Int, vSize: Int, qLength: Int, kvLength: Int

    init(q: Tensor, k: Tensor, v: Tensor, qHeads qAttribute: Int, kvHeads kvAttribute: Int, _ ctx: OpContext) throws {
        if q.rank == 4 {
            (qHeads, kvHeads) = (q.shape[1], k.shape[1])
            (qSize, kSize, vSize, qLength, kvLength) = (q.shape[3], k.shape[3], v.shape[3], q.shape[2], k.shape[2])
            guard v.shape[1] == kvHeads, v.shape[2] == kvLength else { throw ctx.error(.executionFailed, "K \(k.shape) and V \(v.shape) disagree") }
        } else {
            guard qAttribute > 0, kvAttribute > 0, q.shape[2] % qAttribute == 0, k.shape[2] % kvAttribute == 0, v.shape[2] % kvAttribute == 0 else {
                throw ctx.error(.invalidModel, "3-D inputs need q_num_heads and kv_num_heads dividing their hidden sizes (got \(qAttribute), \(kvAttribute))")
            }
            (qHeads, kvHeads) = (qAttribute, kvAttribute)
            (qSize, kSize, vSize, qLength, kvLength) = (q.shape[2] / qAttribute, k.shape[2] / kvAttribute, v.shape[2] / kvAttribute, q.shape[1], k.shape[1])
            guard v.shape[1] == kvLength else { throw ctx.error(.executionFailed, "K \(k.shape) and V \(v.shape) disagree") }
        }
        guard k.shape[0] == q.shape[0], v.shape[0] == q.shape[0], qSize == kSize, kvHeads > 0, qHeads % kvHeads == 0 else {
            throw ctx.error(.executionFailed, "Q \(q.shape), K \(k.shape), V \(v.shape): batches, query/key head sizes or head counts (a multiple) disagree")
        }
    }

    /// `x` as [B, heads, S, size] floats (4-D inputs as they are).
    func split(_ x: Tensor, _ heads: Int, _ size: Int) -> [Float] {
        guard x.rank == 3 else { return x.scalars(as: Float.self) }
        return x.floatPointer { splitHeads($0, batch: x.shape[0], sequence: x.shape[1], rowStride: heads * size, offset: 0, heads: heads, size: size) }
    }
}

/// The additive bias of each score row: the mask (bool or float, broadcast to [B, heads, S, T], padded as masked to T
/// keys), the causal and sliding-window frontiers and the nonpad_kv_seqlen padding.
private struct AttentionBias {
    let mask: [Float]?, maskStrides: [Int], maskKeys: Int
    let nonpad: [Int]?
    let causal: Bool, pastLength: Int, queries: Int, leftWindow: Int, rightWindow: Int

    init(mask maskTensor: Tensor?, nonpad nonpadTensor: Tensor?, batch: Int, heads: Int, queries: Int, keys: Int, causal: Bool, pastLength: Int,
         leftWindow: Int, rightWindow: Int, hasPast: Bool, _ ctx: OpContext) throws {
        self.causal = causal
        self.pastLength = pastLength
        self.queries = queries
        self.leftWindow = leftWindow
        self.rightWindow = rightWindow
        if let nonpadTensor {
            guard !hasPast else { throw ctx.error(.invalidModel, "nonpad_kv_seqlen cannot be combined with past_key / past_value") }
            guard nonpadTensor.count == batch else { throw ctx.error(.executionFailed, "nonpad_kv_seqlen has \(nonpadTensor.count) values for batch \(batch)") }
            nonpad = nonpadTensor.ints
        } else {
            nonpad = nil
        }
        guard let m = maskTensor else { (mask, maskStrides, maskKeys) = (nil, [0, 0, 0, 0], 0); return }
        guard (1...4).contains(m.rank), let lastKeys = m.shape.last, lastKeys <= keys else {
            throw ctx.error(.executionFailed, "attn_mask \(m.shape) does not broadcast to [\(batch), \(heads), \(queries), \(keys)]")
        }
        let shape4 = Array(repeating: 1, count: 4 - m.rank) + m.shape
        for (axis, size) in [batch, heads, queries].enumerated() where shape4[axis] != 1 && shape4[axis] != size {
            throw ctx.error(.executionFailed, "attn_mask \(m.shape) does not broadcast to [\(batch), \(heads), \(queries), \(keys)]")
        }
        let raw: [Float]
        switch m.dtype {
        case .bool: raw = m.scalars(as: Bool.self).map { $0 ? 0 : -.infinity }
        case .float32: raw = m.scalars(as: Float.self)
        default: raw = try castTensor(m, to: .float32, ctx).scalars(as: Float.self)
        }
        mask = raw
        let strides = Tensor.contiguousStrides(shape4)
        maskStrides = (0..<4).map { shape4[$0] == 1 ? 0 : strides[$0] }
        maskKeys = lastKeys
    }

    /// The bias of query `i` of head `h` in batch `b` against every key.
    func row(b: Int, h: Int, i: Int, into out: inout [Float]) {
        let keys = out.count
        // Causal and window frontiers are aligned bottom-right: query i sits at absolute position offset + i.
        let offset = nonpad.map { $0[b] - queries } ?? pastLength
        for j in 0..<keys {
            var value: Float = 0
            if let mask {
                value = j < maskKeys ? mask[b * maskStrides[0] + h * maskStrides[1] + i * maskStrides[2] + j * maskStrides[3]] : -.infinity
            }
            if causal && j > i + offset { value = -.infinity }
            let diff = i + offset - j
            if leftWindow >= 0 && diff > leftWindow { value = -.infinity }
            if rightWindow >= 0 && -diff > rightWindow { value = -.infinity }
            if let nonpad, j >= nonpad[b] { value = -.infinity }
            out[j] = value
        }
    }
}
