import Foundation
import Tensor

/// softmax(scale * Q K^T + mask) V for every batch and head.
/// q [B, N, S, H], k [B, N, T, H], v [B, N, T, Hv] (contiguous); `mask(b, n, scores)` adds to one [S, T] score block.
/// Returns [B, S, N * Hv].
func scaledDotProductAttention(q: [Float], k: [Float], v: [Float], batch: Int, heads: Int, queries: Int, keys: Int, headSize: Int,
                               valueHeadSize: Int, scale: Float, mask: (Int, Int, UnsafeMutablePointer<Float>) -> Void) -> [Float] {
    var out = [Float](repeating: 0, count: batch * queries * heads * valueHeadSize)
    guard queries > 0, keys > 0 else { return out }
    var scores = [Float](repeating: 0, count: queries * keys)
    var context = [Float](repeating: 0, count: queries * valueHeadSize)
    q.withUnsafeBufferPointer { qp in k.withUnsafeBufferPointer { kp in v.withUnsafeBufferPointer { vp in
        scores.withUnsafeMutableBufferPointer { sp in context.withUnsafeMutableBufferPointer { cp in
            for b in 0..<batch {
                for n in 0..<heads {
                    let bn = b * heads + n
                    let qb = qp.baseAddress! + bn * queries * headSize, kb = kp.baseAddress! + bn * keys * headSize
                    let vb = vp.baseAddress! + bn * keys * valueHeadSize
                    if headSize > 0 {
                        sgemm(transposeA: false, transposeB: true, m: queries, n: keys, k: headSize, alpha: scale, a: qb, lda: headSize,
                              b: kb, ldb: headSize, beta: 0, c: sp.baseAddress!, ldc: keys)
                    } else {
                        sp.baseAddress!.initialize(repeating: 0, count: queries * keys)
                    }
                    mask(b, n, sp.baseAddress!)
                    softmaxRows(sp.baseAddress!, rows: queries, columns: keys)
                    sgemm(transposeA: false, transposeB: false, m: queries, n: valueHeadSize, k: keys, alpha: 1, a: sp.baseAddress!, lda: keys,
                          b: vb, ldb: valueHeadSize, beta: 0, c: cp.baseAddress!, ldc: valueHeadSize)
                    for s in 0..<queries {
                        for j in 0..<valueHeadSize { out[(b * queries + s) * heads * valueHeadSize + n * valueHeadSize + j] = cp[s * valueHeadSize + j] }
                    }
                }
            }
        } }
    } } }
    return out
}

/// Columns [offset, offset + heads * size) of a [B * S, rowStride] matrix, as [B, N, S, size].
func splitHeads(_ rows: UnsafePointer<Float>, batch: Int, sequence: Int, rowStride: Int, offset: Int, heads: Int, size: Int) -> [Float] {
    var out = [Float](repeating: 0, count: batch * heads * sequence * size)
    for b in 0..<batch {
        for s in 0..<sequence {
            let row = rows + (b * sequence + s) * rowStride + offset
            for n in 0..<heads {
                let dst = ((b * heads + n) * sequence + s) * size
                for j in 0..<size { out[dst + j] = row[n * size + j] }
            }
        }
    }
    return out
}

/// [B, N, P, H] past followed by [B, N, T, H] new values along the sequence axis.
func appendKeys(past: [Float], _ new: [Float], batch: Int, heads: Int, pastLength: Int, newLength: Int, size: Int) -> [Float] {
    guard pastLength > 0 else { return new }
    var out: [Float] = []
    out.reserveCapacity(batch * heads * (pastLength + newLength) * size)
    for bn in 0..<(batch * heads) {
        out += past[(bn * pastLength * size)..<((bn + 1) * pastLength * size)]
        out += new[(bn * newLength * size)..<((bn + 1) * newLength * size)]
    }
    return out
}

/// The additive [B, S, T] mask of onnxruntime's attention operators: `filter` where a raw mask holds 0, where a key lies
/// outside a 1-D index's [start, end) range, or (unidirectional) where a key follows the query; nil when nothing is masked.
func attentionMask(_ mask: Tensor?, batch: Int, queries: Int, keys: Int, pastLength: Int, causal: Bool, filter: Float, _ ctx: OpContext) throws -> [Float]? {
    guard mask != nil || causal else { return nil }
    var additive = [Float](repeating: 0, count: batch * queries * keys)
    if let mask {
        guard mask.dtype == .int32 || mask.dtype == .int64 || mask.dtype == .bool else {
            throw ctx.error(.unsupportedDType, "mask is \(mask.dtype), expected int32")
        }
        let m = mask.ints
        switch mask.rank {
        case 1 where m.count == batch || m.count == 2 * batch:
            // Right padding: valid keys are [0, end); with 2 * batch values, [start, end) (left padding).
            for b in 0..<batch {
                let end = m[b], start = m.count == 2 * batch ? m[batch + b] : 0
                for s in 0..<queries { for t in 0..<keys where t >= end || t < start { additive[(b * queries + s) * keys + t] = filter } }
            }
        case 2 where mask.shape == [batch, keys]:
            for b in 0..<batch { for s in 0..<queries { for t in 0..<keys where m[b * keys + t] == 0 { additive[(b * queries + s) * keys + t] = filter } } }
        case 3 where mask.shape == [batch, queries, keys]:
            for i in 0..<additive.count where m[i] == 0 { additive[i] = filter }
        case 4 where mask.shape[0] == batch && mask.shape[1] == 1 && mask.shape[2] >= pastLength + queries && mask.shape[3] >= keys:
            // (B, 1, max_sequence_length, max_sequence_length): the block for this run's query rows.
            let maxLength = mask.shape[3]
            for b in 0..<batch {
                for s in 0..<queries {
                    for t in 0..<keys where m[(b * mask.shape[2] + pastLength + s) * maxLength + t] == 0 { additive[(b * queries + s) * keys + t] = filter }
                }
            }
        default:
            throw ctx.error(.executionFailed, "mask \(mask.shape) is none of (\(batch)), (\(2 * batch)), (\(batch), \(keys)), (\(batch), \(queries), \(keys)) or (\(batch), 1, max, max)")
        }
    }
    if causal {
        for b in 0..<batch { for s in 0..<queries { for t in (pastLength + s + 1)..<max(keys, pastLength + s + 1) { additive[(b * queries + s) * keys + t] += filter } } }
    }
    return additive
}

/// Adds the optional mask and the optional attention_bias (B or 1, N or 1, S, T) to one [S, T] score block.
func addMasks(_ scores: UnsafeMutablePointer<Float>, b: Int, n: Int, queries: Int, keys: Int, mask: [Float]?, bias: [Float]?, biasShape: [Int]) {
    let block = queries * keys
    if let mask { for i in 0..<block { scores[i] += mask[b * block + i] } }
    if let bias {
        let bb = biasShape[0] == 1 ? 0 : b, nn = biasShape[1] == 1 ? 0 : n
        let base = (bb * biasShape[1] + nn) * block
        for i in 0..<block { scores[i] += bias[base + i] }
    }
}

/// The tail Attention and MultiHeadAttention share: the padding/causal mask and additive bias (from their input
/// tensors) applied to q·k scores scaled by `customScale` or 1/sqrt(headSize), then softmax and the sum over v.
/// q is [B, heads, queries, headSize], k and v [B, heads, keys, size]; returns [B, queries, heads * valueHeadSize].
func maskedAttention(q: [Float], k: [Float], v: [Float], mask maskInput: Tensor?, bias biasInput: Tensor?, batch: Int, heads: Int,
                     queries: Int, pastLength: Int, keys: Int, headSize: Int, valueHeadSize: Int, causal: Bool, filter: Float,
                     customScale: Float?, _ ctx: OpContext) throws -> [Float] {
    let mask = try attentionMask(maskInput, batch: batch, queries: queries, keys: keys, pastLength: pastLength, causal: causal, filter: filter, ctx)
    let (bias, biasShape) = try attentionBias(biasInput, batch: batch, heads: heads, queries: queries, keys: keys, ctx)
    let scale = customScale ?? 1 / Float(headSize).squareRoot()
    return scaledDotProductAttention(q: q, k: k, v: v, batch: batch, heads: heads, queries: queries, keys: keys, headSize: headSize,
                                     valueHeadSize: valueHeadSize, scale: scale) { b, n, scores in
        addMasks(scores, b: b, n: n, queries: queries, keys: keys, mask: mask, bias: bias, biasShape: biasShape)
    }
}

/// Checks attention_bias against (B or 1, N or 1, S, T).
func attentionBias(_ t: Tensor?, batch: Int, heads: Int, queries: Int, keys: Int, _ ctx: OpContext) throws -> ([Float]?, [Int]) {
    guard let t else { return (nil, []) }
    guard t.rank == 4, t.shape[0] == 1 || t.shape[0] == batch, t.shape[1] == 1 || t.shape[1] == heads, t.shape[2] == queries, t.shape[3] == keys else {
        throw ctx.error(.executionFailed, "attention_bias \(t.shape) must be (\(batch) or 1, \(heads) or 1, \(queries), \(keys))")
    }
    return (try floatValues(t, "attention_bias", ctx), t.shape)
}

let contribAttentionOperators: OperatorTable = [
    // BERT/GPT-2 self-attention with one packed Q/K/V projection: input (B, S, D) x weights (D, Dq + Dk + Dv) + bias.
    "Attention": { ctx in
        let heads = try ctx.int("num_heads", 0)
        guard heads > 0 else { throw ctx.error(.invalidModel, "num_heads must be positive") }
        let causal = try ctx.int("unidirectional", 0) != 0
        let filter = try ctx.float("mask_filter_value", -10000)
        let sizes = try ctx.ints("qkv_hidden_sizes")
        let customScale: Float? = ctx.has("scale") ? try ctx.float("scale", 0) : nil
        if try ctx.int("do_rotary", 0) != 0 { throw ctx.unsupported("do_rotary", "= 1") }
        if try ctx.int("past_present_share_buffer", 0) != 0 { throw ctx.unsupported("past_present_share_buffer", "= 1") }
        let wantsPresent = ctx.node.outputs.count > 1 && !ctx.node.outputs[1].isEmpty
        if let sizes, sizes.count != 3 || sizes.contains(where: { $0 <= 0 || $0 % heads != 0 }) {
            throw ctx.error(.invalidModel, "qkv_hidden_sizes \(sizes) must be three positive multiples of num_heads \(heads)")
        }
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx), w = try inputs.required(1, ctx)
            guard x.rank == 3, w.rank == 2, x.shape[2] == w.shape[0] else {
                throw ctx.error(.executionFailed, "input \(x.shape) and weights \(w.shape) must be (B, S, D) and (D, 3 * hidden)")
            }
            let (batch, sequence, total) = (x.shape[0], x.shape[1], w.shape[1])
            let split = sizes ?? [total / 3, total / 3, total / 3]
            guard split.reduce(0, +) == total, split.allSatisfy({ $0 % heads == 0 }), split[0] == split[1] else {
                throw ctx.error(.executionFailed, "weights \(w.shape) do not split into Q/K/V hidden sizes \(split) over \(heads) heads")
            }
            let headSize = split[0] / heads, valueHeadSize = split[2] / heads
            var projected = try matmul(x.reshaped([batch * sequence, x.shape[2]]), w, ctx)
            if let bias = inputs[2] {
                guard bias.count == total else { throw ctx.error(.executionFailed, "bias \(bias.shape) must have \(total) elements") }
                let bv = try floatValues(bias, "bias", ctx)
                projected.withUnsafeMutableBufferPointer(of: Float.self) { p in
                    for r in 0..<(batch * sequence) { for j in 0..<total { p[r * total + j] += bv[j] } }
                }
            }
            var (q, k, v) = projected.floatPointer { p in
                (splitHeads(p, batch: batch, sequence: sequence, rowStride: total, offset: 0, heads: heads, size: headSize),
                 splitHeads(p, batch: batch, sequence: sequence, rowStride: total, offset: split[0], heads: heads, size: headSize),
                 splitHeads(p, batch: batch, sequence: sequence, rowStride: total, offset: split[0] + split[1], heads: heads, size: valueHeadSize))
            }
            var pastLength = 0
            if let past = inputs[4] {
                guard past.rank == 5, past.shape[0] == 2, past.shape[1] == batch, past.shape[2] == heads, past.shape[4] == headSize, headSize == valueHeadSize else {
                    throw ctx.error(.executionFailed, "past \(past.shape) must be (2, \(batch), \(heads), past_length, \(headSize))")
                }
                pastLength = past.shape[3]
                let pv = try floatValues(past, "past", ctx)
                let half = pv.count / 2
                k = appendKeys(past: Array(pv[..<half]), k, batch: batch, heads: heads, pastLength: pastLength, newLength: sequence, size: headSize)
                v = appendKeys(past: Array(pv[half...]), v, batch: batch, heads: heads, pastLength: pastLength, newLength: sequence, size: valueHeadSize)
            }
            let keys = pastLength + sequence
            let out = try maskedAttention(q: q, k: k, v: v, mask: inputs[3], bias: inputs[5], batch: batch, heads: heads, queries: sequence,
                                          pastLength: pastLength, keys: keys, headSize: headSize, valueHeadSize: valueHeadSize,
                                          causal: causal, filter: filter, customScale: customScale, ctx)
            let output = Tensor(shape: [batch, sequence, heads * valueHeadSize], scalars: out)
            guard wantsPresent else { return [output] }
            guard headSize == valueHeadSize else { throw ctx.error(.executionFailed, "present needs equal K and V head sizes, got \(headSize) and \(valueHeadSize)") }
            return [output, Tensor(shape: [2, batch, heads, keys, headSize], scalars: k + v)]
        }
    },
    // Self or cross attention on separate (or packed) Q, K, V with an optional projection bias.
    "MultiHeadAttention": { ctx in
        let heads = try ctx.int("num_heads", 0)
        guard heads > 0 else { throw ctx.error(.invalidModel, "num_heads must be positive") }
        let causal = try ctx.int("unidirectional", 0) != 0
        let filter = try ctx.float("mask_filter_value", -10000)
        let customScale: Float? = ctx.has("scale") ? try ctx.float("scale", 0) : nil
        return PreparedKernel { inputs in
            let query = try inputs.required(0, ctx)
            guard query.dtype == .float32 else { throw ctx.error(.unsupportedDType, "query is \(query.dtype), expected float32") }
            let batch = query.shape.first ?? 0, sequence = query.rank >= 2 ? query.shape[1] : 0
            let bias = try inputs[3].map { try floatValues($0, "bias", ctx) }
            var q: [Float], k: [Float], v: [Float]
            var headSize: Int, valueHeadSize: Int, kvLength: Int
            if query.rank == 5 {
                // Packed QKV (B, S, N, 3, H).
                guard query.shape[2] == heads, query.shape[3] == 3, inputs[1] == nil, inputs[2] == nil else {
                    throw ctx.error(.executionFailed, "packed QKV \(query.shape) must be (B, S, \(heads), 3, H) with no key or value")
                }
                headSize = query.shape[4]; valueHeadSize = headSize; kvLength = sequence
                let h = headSize
                var packed = query.scalars(as: Float.self)
                if let bias {
                    guard bias.count == 3 * heads * h else { throw ctx.error(.executionFailed, "bias must have \(3 * heads * h) elements") }
                    for r in 0..<(batch * sequence) { for n in 0..<heads { for part in 0..<3 { for j in 0..<h {
                        packed[((r * heads + n) * 3 + part) * h + j] += bias[part * heads * h + n * h + j]
                    } } } }
                }
                (q, k, v) = packed.withUnsafeBufferPointer { p in
                    // Each part is a column block of a [B * S, N * 3 * H] matrix after viewing (N, 3) as interleaved heads.
                    (0..<3).map { part -> [Float] in
                        var out = [Float](repeating: 0, count: batch * heads * sequence * h)
                        for b in 0..<batch { for s in 0..<sequence { for n in 0..<heads { for j in 0..<h {
                            out[((b * heads + n) * sequence + s) * h + j] = p[((((b * sequence + s) * heads + n) * 3) + part) * h + j]
                        } } } }
                        return out
                    }.splat3()
                }
            } else {
                guard query.rank == 3, query.shape[2] % heads == 0 else {
                    throw ctx.error(.executionFailed, "query \(query.shape) must be (B, S, hidden) with hidden divisible by \(heads) heads")
                }
                let hidden = query.shape[2]
                headSize = hidden / heads
                var qv = query.scalars(as: Float.self)
                if let bias { for r in 0..<(batch * sequence) { for j in 0..<hidden { qv[r * hidden + j] += bias[j] } } }
                q = qv.withUnsafeBufferPointer { splitHeads($0.baseAddress!, batch: batch, sequence: sequence, rowStride: hidden, offset: 0, heads: heads, size: headSize) }
                let key = try inputs.required(1, ctx)
                if key.rank == 5 {
                    // Packed KV (B, L, N, 2, H).
                    guard key.shape[0] == batch, key.shape[2] == heads, key.shape[3] == 2, key.shape[4] == headSize, inputs[2] == nil else {
                        throw ctx.error(.executionFailed, "packed KV \(key.shape) must be (\(batch), L, \(heads), 2, \(headSize)) with no value")
                    }
                    kvLength = key.shape[1]; valueHeadSize = headSize
                    var packed = try floatValues(key, "key", ctx)
                    let h = headSize, length = kvLength
                    if let bias {
                        guard bias.count == 3 * hidden else { throw ctx.error(.executionFailed, "bias must have \(3 * hidden) elements") }
                        for r in 0..<(batch * length) { for n in 0..<heads { for part in 0..<2 { for j in 0..<h {
                            packed[((r * heads + n) * 2 + part) * h + j] += bias[(part + 1) * hidden + n * h + j]
                        } } } }
                    }
                    let parts = (0..<2).map { part -> [Float] in
                        var out = [Float](repeating: 0, count: batch * heads * length * h)
                        for b in 0..<batch { for s in 0..<length { for n in 0..<heads { for j in 0..<h {
                            out[((b * heads + n) * length + s) * h + j] = packed[((((b * length + s) * heads + n) * 2) + part) * h + j]
                        } } } }
                        return out
                    }
                    k = parts[0]; v = parts[1]
                } else {
                    let value = try inputs.required(2, ctx)
                    if key.rank == 4 {
                        // Already split into heads (B, N, L, H): used as given (no bias, as onnxruntime).
                        guard key.shape[0] == batch, key.shape[1] == heads, key.shape[3] == headSize, value.rank == 4, value.shape[0] == batch,
                              value.shape[1] == heads, value.shape[2] == key.shape[2] else {
                            throw ctx.error(.executionFailed, "key \(key.shape) and value \(value.shape) must be (\(batch), \(heads), L, H)")
                        }
                        kvLength = key.shape[2]; valueHeadSize = value.shape[3]
                        k = try floatValues(key, "key", ctx); v = try floatValues(value, "value", ctx)
                    } else {
                        guard key.rank == 3, value.rank == 3, key.shape[0] == batch, value.shape[0] == batch, key.shape[1] == value.shape[1],
                              key.shape[2] == hidden, value.shape[2] % heads == 0 else {
                            throw ctx.error(.executionFailed, "key \(key.shape) and value \(value.shape) must be (\(batch), L, \(hidden)) and (\(batch), L, v_hidden)")
                        }
                        kvLength = key.shape[1]
                        let vHidden = value.shape[2]
                        valueHeadSize = vHidden / heads
                        var kv = try floatValues(key, "key", ctx), vv = try floatValues(value, "value", ctx)
                        if let bias {
                            guard bias.count == 2 * hidden + vHidden else { throw ctx.error(.executionFailed, "bias must have \(2 * hidden + vHidden) elements") }
                            for r in 0..<(batch * kvLength) {
                                for j in 0..<hidden { kv[r * hidden + j] += bias[hidden + j] }
                                for j in 0..<vHidden { vv[r * vHidden + j] += bias[2 * hidden + j] }
                            }
                        }
                        let length = kvLength, vh = valueHeadSize, hs = headSize
                        k = kv.withUnsafeBufferPointer { splitHeads($0.baseAddress!, batch: batch, sequence: length, rowStride: hidden, offset: 0, heads: heads, size: hs) }
                        v = vv.withUnsafeBufferPointer { splitHeads($0.baseAddress!, batch: batch, sequence: length, rowStride: vHidden, offset: 0, heads: heads, size: vh) }
                    }
                }
            }
            var pastLength = 0
            if let pastKey = inputs[6], let pastValue = inputs[7] {
                guard pastKey.rank == 4, pastKey.shape[0] == batch, pastKey.shape[1] == heads, pastKey.shape[3] == headSize,
                      pastValue.rank == 4, pastValue.shape[2] == pastKey.shape[2], pastValue.shape[3] == valueHeadSize else {
                    throw ctx.error(.executionFailed, "past_key \(pastKey.shape) and past_value \(pastValue.shape) must be (\(batch), \(heads), P, H)")
                }
                pastLength = pastKey.shape[2]
                k = appendKeys(past: try floatValues(pastKey, "past_key", ctx), k, batch: batch, heads: heads, pastLength: pastLength, newLength: kvLength, size: headSize)
                v = appendKeys(past: try floatValues(pastValue, "past_value", ctx), v, batch: batch, heads: heads, pastLength: pastLength, newLength: kvLength, size: valueHeadSize)
            }
            let keys = pastLength + kvLength
            let out = try maskedAttention(q: q, k: k, v: v, mask: inputs[4], bias: inputs[5], batch: batch, heads: heads, queries: sequence,
                                          pastLength: pastLength, keys: keys, headSize: headSize, valueHeadSize: valueHeadSize,
                                          causal: causal, filter: filter, customScale: customScale, ctx)
            return [Tensor(shape: [batch, sequence, heads * valueHeadSize], scalars: out),
                    Tensor(shape: [batch, heads, keys, headSize], scalars: k), Tensor(shape: [batch, heads, keys, valueHeadSize], scalars: v)]
        }
    },
]

private extension Array {
    /// The first three elements as a tuple.
    func splat3() -> (Element, Element, Element) { (self[0], self[1], self[2]) }
}
