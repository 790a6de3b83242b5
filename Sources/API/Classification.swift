import HTTP
import Tensor

/// One ranked class of a classification result.
public struct Classification: Sendable, Equatable {
    /// Class index in the model output.
    public var index: Int
    /// The model's score for it (as produced: logits or probabilities).
    public var score: Double
    /// Its label when the model has labels.
    public var label: String?

    /// A classification value.
    public init(index: Int, score: Double, label: String? = nil) {
        self.index = index
        self.score = score
        self.label = label
    }
}

extension V2Codec {
    /// The `k` highest scores per row: rank >= 2 treats axis 0 as the batch and the rest as classes,
    /// rank <= 1 is a single row. Ties keep the lower index first; NaN ranks last.
    public static func topK(_ tensor: Tensor, k: Int, labels: [String]? = nil) throws -> [[Classification]] {
        guard tensor.dtype != .string else { throw V2CodecError(.datatypeMismatch, "cannot classify a BYTES output") }
        let rows = tensor.rank >= 2 ? tensor.shape[0] : 1
        let classes = rows == 0 ? 0 : tensor.count / rows
        let take = min(k, classes)
        let scores = tensor.elementDoubles
        var result: [[Classification]] = []
        result.reserveCapacity(rows)
        for row in 0..<rows {
            let base = row * classes
            var order = Array(0..<classes)
            order.sort { a, b in
                // NaN ranks with -inf so the ordering stays a strict weak order.
                let x = scores[base + a].isNaN ? -Double.infinity : scores[base + a]
                let y = scores[base + b].isNaN ? -Double.infinity : scores[base + b]
                return x > y || (x == y && a < b)
            }
            result.append(order.prefix(take).map { i in
                Classification(index: i, score: scores[base + i], label: labels.flatMap { i < $0.count ? $0[i] : nil })
            })
        }
        return result
    }

    /// Triton's classification extension: a BYTES tensor of `value:index[:label]`, shape `[batch, k]` (or `[k]`).
    static func classificationTensor(_ tensor: Tensor, top k: Int, labels: [String]?, outputName: String) throws -> Tensor {
        let ranked: [[Classification]]
        do {
            ranked = try topK(tensor, k: k, labels: labels)
        } catch let error as V2CodecError {
            throw V2CodecError(error.kind, "output '\(outputName)': \(error.message)")
        }
        let integral = !tensor.dtype.isFloatingPoint
        var strings: [[UInt8]] = []
        for row in ranked {
            for c in row {
                var text = integral ? String(Int64(c.score)) : fixedSix(c.score)
                text += ":\(c.index)"
                if let label = c.label { text += ":" + label }
                strings.append(Array(text.utf8))
            }
        }
        let take = ranked.first?.count ?? 0
        return Tensor(shape: tensor.rank >= 2 ? [ranked.count, take] : [take], strings: strings)
    }

    /// Encodes the `/classify` response `{"model_name","model_version","classifications":[[{index,label,score}]]}`,
    /// with a top-level `parameters` object when there are any (the cascade's).
    public static func encodeClassifyResponse(modelName: String, modelVersion: String, classifications: [[Classification]],
                                              parameters: JSONObject = JSONObject()) -> HTTPResponse {
        var writer = JSONWriter(capacity: 128 + classifications.reduce(0) { $0 + $1.count * 64 })
        writer.beginObject()
        writer.key("model_name"); writer.string(modelName)
        writer.key("model_version"); writer.string(modelVersion)
        if !parameters.isEmpty { writer.key("parameters"); writer.value(.object(parameters)) }
        writer.key("classifications")
        writer.beginArray()
        for row in classifications {
            writer.beginArray()
            for c in row {
                writer.beginObject()
                writer.key("index"); writer.int(c.index)
                writer.key("label")
                if let label = c.label { writer.string(label) } else { writer.null() }
                // float32 scores print in their own shortest form (0.9996165, not 0.99961650371551514).
                writer.key("score")
                if let single = Float(exactly: c.score) { writer.float(single) } else { writer.double(c.score) }
                writer.endObject()
            }
            writer.endArray()
        }
        writer.endArray()
        writer.endObject()
        return .json(writer.bytes)
    }
}

/// `%f`-style text with six decimals, as Triton prints classification scores.
func fixedSix(_ value: Double) -> String {
    guard value.isFinite else { return value.isNaN ? "nan" : (value < 0 ? "-inf" : "inf") }
    guard abs(value) < 1e12 else { return String(value) }
    let scaled = (abs(value) * 1_000_000).rounded()
    let whole = Int64(scaled / 1_000_000)
    let fraction = Int64(scaled) - whole * 1_000_000
    var digits = String(fraction)
    digits = String(repeating: "0", count: 6 - digits.count) + digits
    return (value < 0 && scaled != 0 ? "-" : "") + "\(whole).\(digits)"
}
