import Engine
import HTTP
import Imaging
import Serving
import Tensor

extension ServiceContext {
    /// `GET /v2/models/{model}[/versions/{version}]/config`: the effective configuration in Triton's shape,
    /// so `tritonclient`'s `get_model_config` works; dims leave out the batch dimension when batching is on.
    func modelConfiguration(_ p: PathParameters) throws -> HTTPResponse {
        let served = try registry.resolve(model: p.model ?? "", version: p.version)
        let batched = served.maxBatchSize > 0
        func tensors(_ specs: [TensorSpec]) -> JSONValue {
            .array(specs.map { spec in
                let dims = (batched ? Array(spec.shape.dropFirst()) : spec.shape).map { JSONValue.integer(Int64($0.sizeOrMinusOne)) }
                let type = spec.dtype == .string ? "TYPE_STRING" : "TYPE_" + V2Datatype(spec.dtype).rawValue
                return .object(["name": .string(spec.name), "data_type": .string(type), "dims": .array(dims)])
            })
        }
        let batching = served.config.dynamicBatching
        var config: JSONObject = [
            "name": .string(served.name),
            "platform": .string("onnx"),
            "backend": .string("osprey"),
            "max_batch_size": .integer(Int64(served.maxBatchSize)),
            "input": tensors(served.inputs),
            "output": tensors(served.outputs),
        ]
        if served.batchingEnabled {
            config["dynamic_batching"] = .object([
                "max_queue_delay_microseconds": .integer(Int64(batching.maxQueueDelayMicroseconds)),
                "preferred_batch_size": .array(batching.preferredBatchSizes.map { .integer(Int64($0)) }),
                "max_queue_size": .integer(Int64(batching.maxQueueSize)),
                "default_timeout_microseconds": .integer(Int64(batching.defaultTimeoutMicroseconds)),
            ])
        }
        config["instance_group"] = .array([.object(["count": .integer(Int64(served.config.instanceCount)), "kind": .string("KIND_CPU")])])
        switch served.config.versionPolicy {
        case .latest(let count): config["version_policy"] = .object(["latest": .object(["num_versions": .integer(Int64(count))])])
        case .all: config["version_policy"] = .object(["all": .object([:])])
        case .specific(let versions): config["version_policy"] = .object(["specific": .object(["versions": .array(versions.map { .integer(Int64($0)) })])])
        }
        // Triton's key: the model's setting (answers come from the cache only when the server has one, `--cache-bytes`).
        config["response_cache"] = .object(["enable": .bool(served.config.responseCacheEnabled)])
        if let plan = try served.imageInputPlan() {
            config["image"] = plan.preprocessing.jsonValue(input: plan.input.name)
        }
        if let cascade = served.config.cascade { config["cascade"] = cascade.jsonValue }
        return .json(.object(config))
    }
}

extension PreprocessConfig {
    /// The settings as config.json's `image` keys (plus the input they feed), for config and inspect output.
    public func jsonValue(input: String) -> JSONValue {
        let members: [(String, JSONValue)] = [
            ("input", .string(input)), ("width", .integer(Int64(width))), ("height", .integer(Int64(height))),
            ("resize_mode", .string(resizeMode.rawValue)),
            ("resize_size", resizeShorterSide.map { .integer(Int64($0)) } ?? .null),
            ("interpolation", .string(interpolation.rawValue)), ("antialias", .bool(antialias)),
            ("channel_order", .string(channelOrder.rawValue)), ("layout", .string(layout.rawValue)),
            ("scale", .double(Double(scale))), ("mean", .array(mean.map { .double(Double($0)) })),
            ("std", .array(std.map { .double(Double($0)) })), ("dtype", .string(dtype.description)),
            ("background", .array(background.map { .integer(Int64($0)) })), ("pad_value", .integer(Int64(padValue))),
        ]
        var object = JSONObject()
        for (key, value) in members.sorted(by: { $0.0 < $1.0 }) { object[key] = value }
        return .object(object)
    }
}
