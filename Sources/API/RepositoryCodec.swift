import HTTP
import Serving

/// Bodies of the repository and statistics routes, as openapi.yaml describes them.
public enum RepositoryCodec {
    /// Reads `{"version": "2"}` (a JSON integer is accepted too) for `POST .../default`.
    public static func decodeDefaultVersionRequest(_ body: [UInt8]) throws -> Int {
        let value: JSONValue
        do { value = try JSONValue.parse(body) } catch let error as JSONError {
            throw APIError.badRequest("invalid JSON: \(error)")
        }
        guard let object = value.objectValue else { throw APIError.badRequest("body must be a JSON object like {\"version\": \"2\"}") }
        guard let field = object["version"] else { throw APIError.badRequest("missing 'version'") }
        let text: String
        switch field {
        case .string(let s): text = s
        case .integer(let i): text = String(i)
        default: throw APIError.badRequest("'version' must be a positive integer or its string, got \(field.kindName)")
        }
        guard PathParameterRules.isValidVersion(text), let version = Int(text) else {
            throw APIError.badRequest("'version' must be a positive integer, got '\(text.prefix(40))'")
        }
        return version
    }

    /// Parses an optional JSON body: nil when it is empty or only whitespace; invalid JSON is a 400.
    private static func optionalJSON(_ body: [UInt8]) throws -> JSONValue? {
        if body.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) { return nil }
        do { return try JSONValue.parse(body) } catch let error as JSONError {
            throw APIError.badRequest("invalid JSON: \(error)")
        }
    }

    /// Reads the optional `{"ready": true}` body of `POST /v2/repository/index`: true lists only ready versions.
    public static func decodeIndexRequest(_ body: [UInt8]) throws -> Bool {
        guard let value = try optionalJSON(body) else { return false }
        guard let object = value.objectValue else { throw APIError.badRequest("body must be a JSON object") }
        guard let ready = object["ready"] else { return false }
        guard let flag = ready.boolValue else { throw APIError.badRequest("'ready' must be a boolean") }
        return flag
    }

    /// Reads the optional body of `POST .../load`: `{"parameters": {"config": "<config.json as a string>"}}`
    /// returns the config bytes; an empty body or no `config` means reload as is. File overrides are refused.
    public static func decodeLoadRequest(_ body: [UInt8]) throws -> [UInt8]? {
        guard let value = try optionalJSON(body) else { return nil }
        guard let object = value.objectValue else { throw APIError.badRequest("load body must be a JSON object, got \(value.kindName)") }
        guard let parameters = object["parameters"] else { return nil }
        guard let members = parameters.objectValue else {
            throw APIError.badRequest("'parameters' must be an object, got \(parameters.kindName)")
        }
        for key in members.keys where key.hasPrefix("file:") {
            throw APIError.badRequest("parameter '\(key)': file overrides are not supported; upload with PUT /v2/repository/models/{model}/versions/{version}")
        }
        guard let config = members["config"] else { return nil }
        guard let text = config.stringValue else {
            throw APIError.badRequest("parameter 'config' must be a string holding config.json, got \(config.kindName)")
        }
        return Array(text.utf8)
    }

    /// The upload's `replace` query parameter: absent or `false` keeps an existing version (409), `true` replaces it.
    public static func decodeReplaceParameter(_ value: String?) throws -> Bool {
        switch value?.lowercased() {
        case nil, "false", "0": return false
        case "true", "1", "": return true
        case let other?: throw APIError.badRequest("query parameter 'replace' must be true or false, got '\(other.prefix(20))'")
        }
    }

    /// `[{"name","version","state","reason","memory_bytes","traffic","traffic_source"}]`.
    public static func encodeIndex(_ entries: [ModelIndexEntry]) -> HTTPResponse {
        .json(.array(entries.map { e in
            var o: JSONObject = ["name": .string(e.name)]
            if let v = e.version { o["version"] = .string(String(v)) }
            o["state"] = .string(e.state.rawValue)
            if let r = e.reason { o["reason"] = .string(r) }
            if let m = e.memoryBytes { o["memory_bytes"] = .integer(Int64(m)) }
            if e.traffic != nil { for (key, value) in TrafficCodec.fields(e.traffic) { o[key] = value } }
            return .object(o)
        }))
    }

    /// `{"model_stats":[...]}` in the shape of Triton's statistics extension.
    public static func encodeStatistics(_ stats: [ModelStatistics]) -> HTTPResponse {
        .json(.object(["model_stats": .array(stats.map(statisticsEntry))]))
    }

    private static func duration(_ d: DurationStatistic) -> JSONValue {
        .object(["count": .integer(Int64(clamping: d.count)), "ns": .integer(Int64(clamping: d.nanoseconds))])
    }

    private static func statisticsEntry(_ s: ModelStatistics) -> JSONValue {
        let inference: JSONObject = [
            "success": duration(s.success), "fail": duration(s.fail), "queue": duration(s.queue),
            "compute_input": duration(s.computeInput), "compute_infer": duration(s.computeInfer),
            "compute_output": duration(s.computeOutput),
            "cache_hit": duration(s.cacheHit), "cache_miss": duration(s.cacheMiss),
        ]
        let batches: [JSONValue] = s.batchStatistics.map { b in
            let fields: JSONObject = ["batch_size": .integer(Int64(b.batchSize)), "compute_input": duration(b.computeInput),
                                      "compute_infer": duration(b.computeInfer), "compute_output": duration(b.computeOutput)]
            return .object(fields)
        }
        var fields: JSONObject = ["name": .string(s.name), "version": .string(String(s.version))]
        fields["last_inference"] = .integer(Int64(clamping: s.lastInferenceMilliseconds))
        fields["inference_count"] = .integer(Int64(clamping: s.inferenceCount))
        fields["execution_count"] = .integer(Int64(clamping: s.executionCount))
        fields["inference_stats"] = .object(inference)
        fields["batch_stats"] = .array(batches)
        return .object(fields)
    }
}
