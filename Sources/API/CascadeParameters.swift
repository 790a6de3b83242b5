import Serving

extension V2Codec {
    /// A cascade report as response parameters: `cascaded`, `answered_by` (one `"<model>/<version>"`, or one per row
    /// when rows differ), `first_score` (a number for one row, else one per row) and `cascade_unavailable` when an
    /// unsure row kept the first answer because the target could not answer. Empty without a report.
    public static func cascadeParameters(_ report: CascadeReport?) -> JSONObject {
        guard let report else { return JSONObject() }
        var parameters = JSONObject()
        parameters["cascaded"] = .bool(report.cascaded)
        if let first = report.answeredBy.first, report.answeredBy.allSatisfy({ $0 == first }) {
            parameters["answered_by"] = .string(first)
        } else {
            parameters["answered_by"] = .array(report.answeredBy.map { .string($0) })
        }
        // float32 probabilities print in their own shortest form (0.4297, not 0.42970001697540283), as classify scores do.
        let scores = report.firstScores.map { JSONValue.double(Double(Float($0).description) ?? $0) }
        parameters["first_score"] = scores.count == 1 ? scores[0] : .array(scores)
        if report.unavailable { parameters["cascade_unavailable"] = .bool(true) }
        return parameters
    }
}

extension CascadePolicy {
    /// The policy as config.json spells it (`version` only when the config names one), for `/config`.
    public var jsonValue: JSONValue {
        var object: JSONObject = ["model": .string(model), "min_confidence": .double(minConfidence)]
        if let version { object["version"] = .integer(Int64(version)) }
        return .object(object)
    }
}
