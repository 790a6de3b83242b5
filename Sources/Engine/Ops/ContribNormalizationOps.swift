import Foundation
import Tensor

/// Normalizes each row of `rows` x `width` in place: LayerNorm (mean removed) or RMSNorm (`simplified`), then
/// scale by gamma and add beta. Returns each row's mean (0 for RMSNorm) and inverse standard deviation.
func normalizeRows(_ data: UnsafeMutablePointer<Float>, rows: Int, width: Int, gamma: [Float], beta: [Float]?, epsilon: Float,
                           simplified: Bool) -> ([Float], [Float]) {
    var means = [Float](repeating: 0, count: rows), inverse = [Float](repeating: 0, count: rows)
    for r in 0..<rows {
        let row = data + r * width
        var mean: Float = 0
        if !simplified {
            var sum: Float = 0
            for i in 0..<width { sum += row[i] }
            mean = sum / Float(width)
        }
        var sq: Float = 0
        for i in 0..<width { let d = row[i] - mean; sq += d * d }
        let inv = 1 / (sq / Float(width) + epsilon).squareRoot()
        means[r] = mean; inverse[r] = inv
        if let beta {
            for i in 0..<width { row[i] = (row[i] - mean) * inv * gamma[i] + beta[i] }
        } else {
            for i in 0..<width { row[i] = (row[i] - mean) * inv * gamma[i] }
        }
    }
    return (means, inverse)
}

/// A LayerNormalization scale or bias broadcast to the normalized shape (the axes from `axis` on).
func normalizationParameter(_ t: Tensor, to normShape: [Int], _ ctx: OpContext) throws -> [Float] {
    guard let s = broadcastShape(t.shape, normShape), s == normShape else {
        throw ctx.error(.executionFailed, "\(t.shape) does not broadcast to the normalized shape \(normShape)")
    }
    return stridedCopy(t, shape: normShape, strides: broadcastStrides(t.shape, to: normShape), offset: 0).scalars(as: Float.self)
}

/// A 1-D parameter of `width` elements (gamma, beta, bias).
private func vector(_ t: Tensor?, width: Int, _ what: String, _ ctx: OpContext) throws -> [Float]? {
    guard let t else { return nil }
    let v = try floatValues(t, what, ctx)
    guard v.count == width else { throw ctx.error(.executionFailed, "\(what) has \(v.count) elements, expected the hidden size \(width)") }
    return v
}

/// SkipLayerNormalization and SkipSimplifiedLayerNormalization: normalize input + skip (+ bias); outputs
/// (output, mean, inv_std_var, input_skip_bias_sum), the last three optional.
private func skipNormalization(simplified: Bool) -> @Sendable (OpContext) throws -> PreparedKernel {
    { ctx in
        let epsilon = try ctx.float("epsilon", 1e-12)
        // SkipSimplifiedLayerNormalization has no beta: its bias is input 3.
        let betaIndex: Int? = simplified ? nil : 3, biasIndex = simplified ? 3 : 4
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx), skip = try inputs.required(1, ctx)
            guard x.dtype == .float32, skip.dtype == .float32, x.rank >= 1 else { throw ctx.error(.unsupportedDType, "input and skip must be float32") }
            let width = x.shape[x.rank - 1], rows = x.count / max(width, 1)
            guard let s = broadcastShape(x.shape, skip.shape), s == x.shape else {
                throw ctx.error(.executionFailed, "skip \(skip.shape) does not broadcast to input \(x.shape)")
            }
            let gamma = try vector(inputs.required(2, ctx), width: width, "gamma", ctx)!
            let beta = try betaIndex.flatMap { try vector(inputs[$0], width: width, "beta", ctx) }
            let bias = try vector(inputs[biasIndex], width: width, "bias", ctx)
            var sum = try broadcastBinary(x, skip, ctx) { (a: Float, b: Float) -> Float in a + b }
            if let bias {
                sum.withUnsafeMutableBufferPointer(of: Float.self) { p in
                    for r in 0..<rows { for i in 0..<width { p[r * width + i] += bias[i] } }
                }
            }
            var y = sum
            let (means, inverse) = y.withUnsafeMutableBufferPointer(of: Float.self) { p in
                normalizeRows(p.baseAddress!, rows: rows, width: width, gamma: gamma, beta: beta, epsilon: epsilon, simplified: simplified)
            }
            let statShape = Array(x.shape.dropLast()) + [1]
            return [y, Tensor(shape: statShape, scalars: means), Tensor(shape: statShape, scalars: inverse), sum]
        }
    }
}

/// SimplifiedLayerNormalization (RMSNorm): X / sqrt(mean(X^2) + epsilon) * scale over the axes from `axis` on.
private let simplifiedLayerNormalization: @Sendable (OpContext) throws -> PreparedKernel = { ctx in
    let axis = try ctx.int("axis", -1), epsilon = try ctx.float("epsilon", 1e-5)
    return PreparedKernel { inputs in
        let normalized = try layerNormalization(inputs, axis: axis, epsilon: epsilon, simplified: true, ctx)
        return [normalized.y, normalized.inverse]
    }
}

/// ONNX LayerNormalization, or with `simplified` its RMS form (no mean removed, no bias), of X over the axes from
/// `axis` on: Y, and each row's mean and inverse standard deviation shaped like X with the normalized axes set to 1.
func layerNormalization(_ inputs: KernelInputs, axis axisAttr: Int, epsilon: Float, simplified: Bool, _ ctx: OpContext) throws
    -> (y: Tensor, mean: Tensor, inverse: Tensor) {
    let x = try inputs.required(0, ctx), scaleT = try inputs.required(1, ctx)
    guard x.dtype == .float32, scaleT.dtype == .float32 else {
        throw ctx.error(.unsupportedDType, "X and scale must be float32, got \(x.dtype) and \(scaleT.dtype)")
    }
    let axis = try ctx.axis(axisAttr, rank: x.rank)
    let normShape = Array(x.shape[axis...])
    let width = normShape.reduce(1, *), rows = x.count / max(width, 1)
    let gamma = try normalizationParameter(scaleT, to: normShape, ctx)
    let beta = simplified ? nil : try inputs[2].map { try normalizationParameter($0, to: normShape, ctx) }
    let (y, means, inverse): (Tensor, [Float], [Float])
    if simplified {
        var copy = stridedCopy(x, shape: x.shape, strides: Tensor.contiguousStrides(x.shape), offset: 0)
        let stats = copy.withUnsafeMutableBufferPointer(of: Float.self) { p in
            guard let base = p.baseAddress else { return ([Float](), [Float]()) }
            return normalizeRows(base, rows: rows, width: width, gamma: gamma, beta: beta, epsilon: epsilon, simplified: true)
        }
        (y, means, inverse) = (copy, stats.0, stats.1)
    } else {
        // The vectorised rows read X in place and write Y (normalizeRows is their reference in the tests).
        var out = Tensor.pooled(.float32, shape: x.shape)
        var m = [Float](repeating: 0, count: rows), inv = [Float](repeating: 0, count: rows)
        out.withUnsafeMutableBufferPointer(of: Float.self) { p in
            guard let base = p.baseAddress, width > 0 else { return }
            x.floatPointer { source in
                m.withUnsafeMutableBufferPointer { mp in inv.withUnsafeMutableBufferPointer { ip in
                    layerNormRows(base, rows: rows, width: width, gamma: gamma, beta: beta, epsilon: epsilon, source: source,
                                  statistics: (mp.baseAddress!, ip.baseAddress!))
                } }
            }
        }
        (y, means, inverse) = (out, m, inv)
    }
    let statShape = x.shape.indices.map { $0 < axis ? x.shape[$0] : 1 }
    return (y, Tensor(shape: statShape, scalars: means), Tensor(shape: statShape, scalars: inverse))
}

/// SimplifiedLayerNormalization, which onnxruntime registers in the default domain (not in com.microsoft).
let defaultDomainContribOperators: OperatorTable = ["SimplifiedLayerNormalization": simplifiedLayerNormalization]

/// Integer ids of an int32/int64 tensor.
private func ids(_ t: Tensor, _ what: String, _ ctx: OpContext) throws -> [Int] {
    guard t.dtype == .int32 || t.dtype == .int64 else { throw ctx.error(.unsupportedDType, "\(what) is \(t.dtype), expected int32") }
    return t.ints
}

let contribNormalizationOperators: OperatorTable = [
    "SkipLayerNormalization": skipNormalization(simplified: false),
    "SkipSimplifiedLayerNormalization": skipNormalization(simplified: true),
    "SimplifiedLayerNormalization": simplifiedLayerNormalization,
    // BERT's embedding: word + position (+ segment) embeddings, layer-normalized; mask_index counts each row's
    // unmasked tokens; embedding_sum is the sum before normalization.
    "EmbedLayerNormalization": { ctx in
        let epsilon = try ctx.float("epsilon", 1e-12)
        return PreparedKernel { inputs in
            let inputIDs = try inputs.required(0, ctx)
            guard inputIDs.rank == 2 else { throw ctx.error(.executionFailed, "input_ids must be 2-D (batch, sequence), got \(inputIDs.shape)") }
            let (batch, sequence) = (inputIDs.shape[0], inputIDs.shape[1])
            let words = try inputs.required(2, ctx), positions = try inputs.required(3, ctx)
            guard words.rank == 2, positions.rank == 2, words.shape[1] == positions.shape[1] else {
                throw ctx.error(.executionFailed, "word_embedding \(words.shape) and position_embedding \(positions.shape) must be 2-D with one hidden size")
            }
            let hidden = words.shape[1]
            let wordTable = try floatValues(words, "word_embedding", ctx), positionTable = try floatValues(positions, "position_embedding", ctx)
            let word = try ids(inputIDs, "input_ids", ctx)
            let segment = try inputs[1].map { t -> [Int] in
                guard t.shape == inputIDs.shape else { throw ctx.error(.executionFailed, "segment_ids \(t.shape) must match input_ids \(inputIDs.shape)") }
                return try ids(t, "segment_ids", ctx)
            }
            let segmentTable = try inputs[4].map { try floatValues($0, "segment_embedding", ctx) }
            if segment != nil && segmentTable == nil { throw ctx.error(.invalidModel, "segment_ids need a segment_embedding") }
            let gamma = try vector(inputs.required(5, ctx), width: hidden, "gamma", ctx)!
            let beta = try vector(inputs.required(6, ctx), width: hidden, "beta", ctx)!
            var positionIDs: [Int]? = nil
            if let p = inputs[8] {
                guard p.count == sequence || p.count == batch * sequence else {
                    throw ctx.error(.executionFailed, "position_ids \(p.shape) must be (1, \(sequence)) or (\(batch), \(sequence))")
                }
                positionIDs = try ids(p, "position_ids", ctx)
            }
            var sum = [Float](repeating: 0, count: batch * sequence * hidden)
            for b in 0..<batch {
                for s in 0..<sequence {
                    let token = b * sequence + s
                    let w = word[token]
                    let p = positionIDs.map { $0.count == sequence ? $0[s] : $0[token] } ?? s
                    guard w >= 0, w < words.shape[0] else { throw ctx.error(.executionFailed, "input id \(w) is outside the vocabulary of \(words.shape[0])") }
                    guard p >= 0, p < positions.shape[0] else { throw ctx.error(.executionFailed, "position \(p) is outside the \(positions.shape[0]) position embeddings") }
                    let base = token * hidden
                    for i in 0..<hidden { sum[base + i] = wordTable[w * hidden + i] + positionTable[p * hidden + i] }
                    if let segment, let segmentTable {
                        let g = segment[token]
                        guard g >= 0, g * hidden < segmentTable.count else { throw ctx.error(.executionFailed, "segment id \(g) is out of range") }
                        for i in 0..<hidden { sum[base + i] += segmentTable[g * hidden + i] }
                    }
                }
            }
            var y = sum
            y.withUnsafeMutableBufferPointer { p in
                _ = normalizeRows(p.baseAddress!, rows: batch * sequence, width: hidden, gamma: gamma, beta: beta, epsilon: epsilon, simplified: false)
            }
            var maskIndex = [Int32](repeating: 0, count: batch)
            if let mask = inputs[7] {
                guard mask.shape == inputIDs.shape else { throw ctx.error(.executionFailed, "mask \(mask.shape) must match input_ids \(inputIDs.shape)") }
                let m = mask.ints
                for b in 0..<batch { maskIndex[b] = Int32(m[(b * sequence)..<((b + 1) * sequence)].filter { $0 != 0 }.count) }
            }
            let shape = [batch, sequence, hidden]
            return [Tensor(shape: shape, scalars: y), Tensor(shape: [batch], scalars: maskIndex), Tensor(shape: shape, scalars: sum)]
        }
    },
]
