import Serving

/// The canary split on the wire: the body of `POST /v2/repository/models/{m}/traffic` and the `traffic` fields of
/// the repository index, in config.json's form `{"2": 90, "3": 10}`.
public enum TrafficCodec {
    /// Reads `{"2": 90, "3": 10}`; 400 naming the key and what was expected otherwise (the same rules as config.json).
    public static func decodeSplit(_ body: [UInt8]) throws -> TrafficSplit {
        let value: JSONValue
        do { value = try JSONValue.parse(body) } catch let error as JSONError {
            throw APIError.badRequest("invalid JSON: \(error); expected an object of version: weight like {\"2\": 90, \"3\": 10}")
        }
        guard let object = value.objectValue else {
            throw APIError.badRequest("body must be a JSON object of version: weight like {\"2\": 90, \"3\": 10}, got \(value.kindName)")
        }
        var members: [String: ConfigValue] = [:]
        for (key, member) in object { members[key] = configValue(member) }
        do {
            return try TrafficSplit(parsing: .object(members), key: "traffic")
        } catch ServingError.invalidConfig(let key, let expected, let got) {
            throw APIError.badRequest("'\(key)': expected \(expected), got \(got)")
        }
    }

    /// `"traffic"` (`{"2": 90, "3": 10}`) and `"traffic_source"` (`"config"` or `"override"`), both null without a split.
    public static func fields(_ traffic: ModelTraffic?) -> JSONObject {
        guard let traffic else { return ["traffic": .null, "traffic_source": .null] }
        return ["traffic": json(traffic.split), "traffic_source": .string(traffic.source.rawValue)]
    }

    /// `{"2": 90, "3": 10}`: whole weights as JSON integers, others as decimals.
    static func json(_ split: TrafficSplit) -> JSONValue {
        var object = JSONObject()
        for (version, weight) in split.weights {
            object[String(version)] = weight == weight.rounded() && abs(weight) < 9e15 ? .integer(Int64(weight)) : .double(weight)
        }
        return .object(object)
    }

    /// The member as config.json's parser would see it; only numbers matter, the other kinds keep their type name for the error.
    private static func configValue(_ value: JSONValue) -> ConfigValue {
        switch value {
        case .integer(let i): return .number(Double(i))
        case .double(let d): return .number(d)
        case .null: return .null
        case .bool(let b): return .bool(b)
        case .string(let s): return .string(s)
        case .array: return .array([])
        case .object: return .object([:])
        }
    }
}
