import Foundation
import Tensor

// com.microsoft GroupQueryAttention, as onnxruntime-genai's model builder writes decoder LLMs (Llama, Phi-3, Qwen,
// Mistral): query heads share key/value heads in groups, the key/value cache travels as past_* / present_* tensors
// [B, kv_heads, length, head], `seqlens_k` holds each row's total length minus one, and rotary embedding may be applied
// inside (do_rotary, cos/sin caches [positions, rotary / 2]). On the first prompt (sequence length equal to
// total_sequence_length) positions count from 0 and there is no past; later, row b's past is seqlens_k[b] + 1 - S
// tokens long and its new keys are written right after them in present_*. Each query sees the keys up to its own
// position (causal) and within the row's total length, within local_window_size when that is set. Optional inputs
// as onnxruntime's CPU kernel reads them: position_ids [B, S] give the rotary positions past the first prompt (a prompt
// counts from 0), attention_bias [B or 1, N or 1, S, T] is added to the scores after softcap, and head_sink [N] is one
// more logit per head in the softmax's denominator (smooth_softmax's zero logit, per head).

/// The `com.microsoft` GroupQueryAttention and RotaryEmbedding operators.
let contribDecoderOperators: OperatorTable = [
    "GroupQueryAttention": { ctx in
        let heads = try ctx.int("num_heads", 0), kvHeads = try ctx.int("kv_num_heads", 0)
        guard heads > 0, kvHeads > 0, heads % kvHeads == 0 else {
            throw ctx.error(.invalidModel, "num_heads (\(heads)) must be a positive multiple of kv_num_heads (\(kvHeads))")
        }
        let options = GroupedAttentionOptions(heads: heads, kvHeads: kvHeads, scale: try ctx.float("scale", 0), window: try ctx.int("local_window_size", -1),
                                              rotary: try ctx.int("do_rotary", 0) != 0, interleaved: try ctx.int("rotary_interleaved", 0) != 0,
                                              softcap: try ctx.float("softcap", 0), smooth: try ctx.int("smooth_softmax", 0) != 0)
        return PreparedKernel { inputs in try groupQueryAttention(inputs, options, ctx) }
    },
    // input [B, S, H * D] or [B, H, S, D], position_ids [B, S] (or one offset), cos/sin caches: the default-domain
    // RotaryEmbedding with its inputs in this operator's order.
    "RotaryEmbedding": { ctx in
        let attributes = ctx.attributes(dropping: ["scale", "is_packed_batching"])
        let rotary = try ctx.delegate("RotaryEmbedding", inputs: [0, 2, 3, 1], attributes: attributes)
        return PreparedKernel(kernel: { inputs in
            let x = try inputs.required(0, ctx), ids = try inputs.required(1, ctx)
            // One offset: positions offset, offset + 1, ... of every row.
            if ids.count == 1, x.rank >= 3 {
                let (batch, sequence) = (x.shape[0], x.rank == 4 ? x.shape[2] : x.shape[1]), offset = ids.ints[0]
                inputs.values[1] = Tensor(shape: [batch, sequence], scalars: (0..<(batch * sequence)).map { Int64(offset + $0 % sequence) })
            }
            return try rotary.kernel(&inputs)
        }, consumedInputs: rotary.consumedInputs)
    },
]

/// The attributes of one GroupQueryAttention node.
struct GroupedAttentionOptions {
    let heads: Int, kvHeads: Int, scale: Float, window: Int, rotary: Bool, interleaved: Bool, softcap: Float, smooth: Bool
}

/// Runs GroupQueryAttention: (query, key, value, past_key, past_value, seqlens_k, total_sequence_length, cos, sin,
/// position_ids, attention_bias, head_sink) -> (output, present_key, present_value).
private func groupQueryAttention(_ inputs: KernelInputs, _ o: GroupedAttentionOptions, _ ctx: OpContext) throws -> [Tensor] {
    let query = try inputs.required(0, ctx)
    guard query.dtype == .float32, query.rank == 3 else { throw ctx.error(.executionFailed, "query must be float32 [B, S, hidden], got \(query.dtype) \(query.shape)") }
    let (batch, sequence, width) = (query.shape[0], query.shape[1], query.shape[2])
    let packed = inputs[1] == nil
    let head = width / (packed ? o.heads + 2 * o.kvHeads : o.heads)
    guard head > 0, width == head * (packed ? o.heads + 2 * o.kvHeads : o.heads) else {
        throw ctx.error(.executionFailed, "query's last axis \(width) does not split into \(o.heads) heads\(packed ? " plus 2 x \(o.kvHeads) key/value heads" : "")")
    }
    let kvWidth = o.kvHeads * head
    let lengths = try inputs.required(5, ctx).ints, total = try inputs.required(6, ctx).ints.first ?? 0
    guard lengths.count == batch else { throw ctx.error(.executionFailed, "seqlens_k has \(lengths.count) entries, expected the batch \(batch)") }
    let pastKey = inputs[3], pastValue = inputs[4]
    let pastLength = pastKey?.shape.count == 4 ? pastKey!.shape[2] : 0
    if let pastKey, pastKey.shape != [batch, o.kvHeads, pastLength, head] || pastValue?.shape != pastKey.shape {
        throw ctx.error(.executionFailed, "past_key and past_value must be [\(batch), \(o.kvHeads), past, \(head)], got \(pastKey.shape) and \(pastValue?.shape ?? [])")
    }
    let firstPrompt = sequence == total
    let presentLength = max(total, pastLength)

    // Q, K, V as [B, N, S, D].
    var q: [Float], k: [Float], v: [Float]
    if packed {
        (q, k, v) = query.floatPointer { p in
            (splitHeads(p, batch: batch, sequence: sequence, rowStride: width, offset: 0, heads: o.heads, size: head),
             splitHeads(p, batch: batch, sequence: sequence, rowStride: width, offset: o.heads * head, heads: o.kvHeads, size: head),
             splitHeads(p, batch: batch, sequence: sequence, rowStride: width, offset: o.heads * head + kvWidth, heads: o.kvHeads, size: head))
        }
    } else {
        let key = try inputs.required(1, ctx), value = try inputs.required(2, ctx)
        guard key.dtype == .float32, value.dtype == .float32, key.shape == [batch, sequence, kvWidth], value.shape == key.shape else {
            throw ctx.error(.executionFailed, "key and value must be float32 [\(batch), \(sequence), \(kvWidth)], got \(key.shape) and \(value.shape)")
        }
        q = query.floatPointer { splitHeads($0, batch: batch, sequence: sequence, rowStride: width, offset: 0, heads: o.heads, size: head) }
        k = key.floatPointer { splitHeads($0, batch: batch, sequence: sequence, rowStride: kvWidth, offset: 0, heads: o.kvHeads, size: head) }
        v = value.floatPointer { splitHeads($0, batch: batch, sequence: sequence, rowStride: kvWidth, offset: 0, heads: o.kvHeads, size: head) }
    }
    // Row b's past length and the position of its first new token.
    let past = try (0..<batch).map { b -> Int in
        let value = firstPrompt ? 0 : lengths[b] + 1 - sequence
        guard value >= 0, value + sequence <= presentLength else {
            throw ctx.error(.executionFailed, "seqlens_k[\(b)] = \(lengths[b]) does not fit \(sequence) new tokens in a cache of \(presentLength)")
        }
        return value
    }
    if o.rotary {
        let cosT = try inputs.required(7, ctx), sinT = try inputs.required(8, ctx)
        let half = cosT.shape.last ?? 0
        guard cosT.rank == 2, sinT.shape == cosT.shape, half > 0, 2 * half <= head else {
            throw ctx.error(.executionFailed, "cos_cache and sin_cache must be [positions, rotary / 2] with rotary <= \(head), got \(cosT.shape) and \(sinT.shape)")
        }
        let positions = cosT.shape[0]
        // The new token s of row b sits at position past[b] + s, or where position_ids put it after the first prompt.
        var position = (0..<(batch * sequence)).map { past[$0 / sequence] + $0 % sequence }
        if !firstPrompt, let ids = inputs[9] {
            guard ids.count == batch * sequence, ids.dtype == .int64 || ids.dtype == .int32 else {
                throw ctx.error(.executionFailed, "position_ids must be int64 [\(batch), \(sequence)], got \(ids.dtype) \(ids.shape)")
            }
            position = ids.ints
        }
        guard position.allSatisfy({ $0 >= 0 && $0 < positions }) else {
            throw ctx.error(.executionFailed, "positions \(position.min() ?? 0)...\(position.max() ?? 0) beyond the \(positions) cached ones")
        }
        let cosines = cosT.scalars(as: Float.self), sines = sinT.scalars(as: Float.self)
        // Q and K as [B, N, S, D].
        func rotate(_ x: inout [Float], heads: Int) {
            x.withUnsafeMutableBufferPointer { p in
                for b in 0..<batch { for n in 0..<heads { for s in 0..<sequence {
                    rotateHead(p.baseAddress! + ((b * heads + n) * sequence + s) * head, cosines: cosines, sines: sines,
                               row: position[b * sequence + s], half: half, interleaved: o.interleaved)
                } } }
            }
        }
        rotate(&q, heads: o.heads)
        rotate(&k, heads: o.kvHeads)
    }
    // present = the past of each row, then its new keys / values, zero beyond: whole [length, head] blocks copied.
    func present(_ pastTensor: Tensor?, _ new: [Float]) -> Tensor {
        var out = Tensor(uninitialized: .float32, shape: [batch, o.kvHeads, presentLength, head])
        out.withUnsafeMutableBufferPointer(of: Float.self) { dst in
            new.withUnsafeBufferPointer { fresh in
                for b in 0..<batch { for n in 0..<o.kvHeads {
                    let bn = b * o.kvHeads + n, block = dst.baseAddress! + bn * presentLength * head
                    let kept = min(past[b], pastLength)
                    if let pastTensor, kept > 0 {
                        pastTensor.withUnsafeBufferPointer(of: Float.self) { old in
                            block.update(from: old.baseAddress! + bn * pastLength * head, count: kept * head)
                        }
                    }
                    (block + kept * head).update(repeating: 0, count: (past[b] - kept) * head)
                    (block + past[b] * head).update(from: fresh.baseAddress! + bn * sequence * head, count: sequence * head)
                    let written = past[b] + sequence
                    (block + written * head).update(repeating: 0, count: (presentLength - written) * head)
                } }
            }
        }
        return out
    }
    let presentKey = present(pastKey, k), presentValue = present(pastValue, v)
    let scale = o.scale == 0 ? 1 / Float(head).squareRoot() : o.scale, group = o.heads / o.kvHeads
    // attention_bias [B or 1, N or 1, S, T]: element strides of its batch and head axes (0 when broadcast).
    var bias: [Float] = [], biasStrides = (batch: 0, head: 0, row: 0)
    if let b = inputs[10] {
        let longest = (0..<batch).map { min(past[$0] + sequence, lengths[$0] + 1, presentLength) }.max() ?? 0
        guard b.dtype == .float32, b.rank == 4, [1, batch].contains(b.shape[0]), [1, o.heads].contains(b.shape[1]),
              b.shape[2] == sequence, b.shape[3] >= longest else {
            throw ctx.error(.executionFailed, "attention_bias must be float32 [\(batch) or 1, \(o.heads) or 1, \(sequence), \(presentLength)], got \(b.dtype) \(b.shape)")
        }
        bias = b.scalars(as: Float.self)
        biasStrides = (b.shape[0] == 1 ? 0 : b.shape[1] * sequence * b.shape[3], b.shape[1] == 1 ? 0 : sequence * b.shape[3], b.shape[3])
    }
    var sinks: [Float]?
    if let t = inputs[11] {
        guard t.dtype == .float32, t.count == o.heads else {
            throw ctx.error(.executionFailed, "head_sink must be float32 [\(o.heads)], got \(t.dtype) \(t.shape)")
        }
        sinks = t.scalars(as: Float.self)
    }
    var output = [Float](repeating: 0, count: batch * sequence * o.heads * head)
    // The `group` query heads sharing one key/value head are consecutive in q ([B, N, S, D]): one [group * S, D]
    // matrix, so each cached key and value is read once per kv head (what makes a decode step memory-bound).
    let rows = group * sequence
    var scores = [Float](repeating: 0, count: rows * presentLength)
    var context = [Float](repeating: 0, count: rows * head)
    q.withUnsafeBufferPointer { qp in presentKey.withUnsafeBufferPointer(of: Float.self) { kp in presentValue.withUnsafeBufferPointer(of: Float.self) { vp in
        scores.withUnsafeMutableBufferPointer { sp in context.withUnsafeMutableBufferPointer { cp in
            for b in 0..<batch { for kvHead in 0..<o.kvHeads {
                let kvOffset = (b * o.kvHeads + kvHead) * presentLength * head, firstHead = kvHead * group
                sgemm(transposeA: false, transposeB: true, m: rows, n: presentLength, k: head, alpha: scale,
                      a: qp.baseAddress! + (b * o.heads + firstHead) * sequence * head, lda: head, b: kp.baseAddress! + kvOffset, ldb: head,
                      beta: 0, c: sp.baseAddress!, ldc: presentLength)
                for r in 0..<rows {
                    let n = firstHead + r / sequence, s = r % sequence
                    let row = sp.baseAddress! + r * presentLength
                    // Right-padded prompt rows (beyond the row's total length) see only its valid keys.
                    let end = min(past[b] + s + 1, lengths[b] + 1, presentLength)
                    let start = o.window > 0 ? max(0, end - o.window) : 0
                    let biasBase = b * biasStrides.batch + n * biasStrides.head + s * biasStrides.row
                    var peak = -Float.infinity
                    for t in start..<max(start, end) {
                        var score = row[t]
                        if o.softcap > 0 { score = o.softcap * tanh(score / o.softcap) }
                        if !bias.isEmpty { score += bias[biasBase + t] }
                        row[t] = score
                        peak = max(peak, score)
                    }
                    // One more logit in the denominator: the head's sink, or smooth_softmax's zero.
                    let sink: Float? = sinks.map { $0[n] } ?? (o.smooth ? 0 : nil)
                    if let sink { peak = max(peak, sink) }
                    var sum: Float = sink.map { exp($0 - peak) } ?? 0
                    for t in start..<max(start, end) { row[t] = exp(row[t] - peak); sum += row[t] }
                    for t in 0..<presentLength { row[t] = t >= start && t < end ? row[t] / sum : 0 }
                }
                sgemm(transposeA: false, transposeB: false, m: rows, n: head, k: presentLength, alpha: 1, a: sp.baseAddress!,
                      lda: presentLength, b: vp.baseAddress! + kvOffset, ldb: head, beta: 0, c: cp.baseAddress!, ldc: head)
                for r in 0..<rows {
                    let n = firstHead + r / sequence, s = r % sequence
                    let outBase = (b * sequence + s) * o.heads * head + n * head
                    for d in 0..<head { output[outBase + d] = cp[r * head + d] }
                }
            } }
        } }
    } } }
    return [Tensor(shape: [batch, sequence, o.heads * head], scalars: output), presentKey, presentValue]
}
