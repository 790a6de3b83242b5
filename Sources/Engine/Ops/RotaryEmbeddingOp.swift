import Tensor

/// RotaryEmbedding (opset 23): rotates the first `rotary_embedding_dim` features of each head by the cached angles of
/// its position, as halves (x1, x2 = first and second half) or interleaved pairs, leaving the rest as they are.
/// X is [batch, heads, sequence, head] or [batch, sequence, heads * head] (with num_heads); the caches are
/// [positions, rotary / 2] indexed by position_ids [batch, sequence], or [batch, sequence, rotary / 2] without them.
let rotaryEmbeddingOperators: OperatorTable = [
    "RotaryEmbedding": { ctx in
        let interleaved = try ctx.int("interleaved", 0) == 1
        let rotaryAttribute = try ctx.int("rotary_embedding_dim", 0), headsAttribute = try ctx.int("num_heads", 0)
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx), cosT = try inputs.required(1, ctx), sinT = try inputs.required(2, ctx)
            guard x.dtype == .float32, cosT.dtype == .float32, sinT.dtype == .float32 else {
                throw ctx.error(.unsupportedDType, "X and the caches must be float32, got \(x.dtype), \(cosT.dtype), \(sinT.dtype)")
            }
            let batch = x.shape.first ?? 0
            let heads: Int, sequence: Int, head: Int
            switch x.rank {
            case 4: (heads, sequence, head) = (x.shape[1], x.shape[2], x.shape[3])
            case 3:
                guard headsAttribute > 0, x.shape[2] % headsAttribute == 0 else {
                    throw ctx.error(.executionFailed, "a 3-D X needs num_heads dividing its last axis \(x.shape[2]), got \(headsAttribute)")
                }
                (heads, sequence, head) = (headsAttribute, x.shape[1], x.shape[2] / headsAttribute)
            default: throw ctx.error(.executionFailed, "X must be [B, H, S, D] or [B, S, H*D], got \(x.shape)")
            }
            let rotary = rotaryAttribute == 0 ? head : rotaryAttribute
            guard rotary <= head, rotary % 2 == 0 else { throw ctx.error(.executionFailed, "rotary_embedding_dim \(rotary) must be even and at most \(head)") }
            let half = rotary / 2
            guard cosT.shape.last == half, sinT.shape == cosT.shape else {
                throw ctx.error(.executionFailed, "the caches must both end in rotary_embedding_dim / 2 = \(half), got \(cosT.shape) and \(sinT.shape)")
            }
            // Row of the caches for (b, s).
            let rows: [Int]
            if let ids = inputs[3] {
                guard ids.shape == [batch, sequence] || ids.count == sequence else { throw ctx.error(.executionFailed, "position_ids \(ids.shape) do not match [\(batch), \(sequence)]") }
                let positions = cosT.count / half, values = ids.ints
                rows = try (0..<(batch * sequence)).map { i in
                    let p = values[ids.count == sequence ? i % sequence : i]
                    guard p >= 0 && p < positions else { throw ctx.error(.executionFailed, "position \(p) is outside the \(positions) cached positions") }
                    return p
                }
            } else {
                guard cosT.count == batch * sequence * half else { throw ctx.error(.executionFailed, "without position_ids the caches must be [\(batch), \(sequence), \(half)], got \(cosT.shape)") }
                rows = Array(0..<(batch * sequence))
            }
            let cosines = cosT.scalars(as: Float.self), sines = sinT.scalars(as: Float.self)
            var y = x  // copied on first write unless X is no longer shared
            y.withUnsafeMutableBufferPointer(of: Float.self) { out in
                for b in 0..<batch {
                    for h in 0..<heads {
                        for s in 0..<sequence {
                            // Feature d of head h at (b, s): [B, H, S, D] or [B, S, H, D] layouts.
                            let base = x.rank == 4 ? ((b * heads + h) * sequence + s) * head : ((b * sequence + s) * heads + h) * head
                            rotateHead(out.baseAddress! + base, cosines: cosines, sines: sines, row: rows[b * sequence + s],
                                       half: half, interleaved: interleaved)
                        }
                    }
                }
            }
            return [y]
        }
    },
]

/// Rotates the first 2 * `half` features of one head vector by the cached angles of position `row` ([positions, half]
/// caches): halves (x1, x2 = first and second half) or interleaved pairs.
@inline(__always)
func rotateHead(_ x: UnsafeMutablePointer<Float>, cosines: [Float], sines: [Float], row: Int, half: Int, interleaved: Bool) {
    let at = row * half
    for i in 0..<half {
        let (j1, j2) = interleaved ? (2 * i, 2 * i + 1) : (i, i + half)
        let x1 = x[j1], x2 = x[j2], c = cosines[at + i], sn = sines[at + i]
        x[j1] = c * x1 - sn * x2
        x[j2] = sn * x1 + c * x2
    }
}
