import Engine
import Protobuf
import Serving

/// ModelConfigResponse (config #1) holding Triton's `inference.ModelConfig` (model_config.proto): name #1,
/// platform #2, backend #17, version_policy #3, max_batch_size #4, input #5, output #6, instance_group #7
/// (ModelInstanceGroup: count #2, kind #4), dynamic_batching #11, response_cache #24 (ModelResponseCache: enable #1).
/// The same facts `GET .../config` reports; dims leave out the batch dimension when batching is on.
enum GRPCModelConfigEncoder {
    /// The serialized ModelConfigResponse for `served`.
    static func encode(_ served: ServedVersion) -> [UInt8] {
        let batched = served.maxBatchSize > 0
        var writer = WireWriter()
        writer.message(1) { config in
            config.string(1, served.name)
            config.string(2, "onnx")
            config.string(17, "osprey")
            config.message(3) { policy in
                switch served.config.versionPolicy {
                case .latest(let count): policy.message(1) { $0.uint64(1, UInt64(max(0, count))) }
                case .all: policy.message(2) { _ in }
                case .specific(let versions): policy.message(3) { $0.packedInt64s(1, versions.map { Int64($0) }) }
                }
            }
            config.int32(4, Int32(clamping: served.maxBatchSize))
            for spec in served.inputs {
                config.message(5) { input in
                    input.string(1, spec.name)
                    input.uint64(2, UInt64(dataType(spec)))
                    input.packedInt64s(4, dims(spec, batched))
                }
            }
            for spec in served.outputs {
                config.message(6) { output in
                    output.string(1, spec.name)
                    output.uint64(2, UInt64(dataType(spec)))
                    output.packedInt64s(3, dims(spec, batched))
                }
            }
            // One CPU group with the summed count, as `GET .../config` reports it (Kind KIND_CPU = 2).
            config.message(7) { group in
                group.uint64(2, UInt64(max(1, served.config.instanceCount)))
                group.uint64(4, 2)
            }
            if served.batchingEnabled {
                let batching = served.config.dynamicBatching
                config.message(11) { dynamic in
                    dynamic.packedVarints(1, batching.preferredBatchSizes.map { UInt64(bitPattern: Int64($0)) })
                    dynamic.uint64(2, UInt64(max(0, batching.maxQueueDelayMicroseconds)))
                    // default_queue_policy (#6): ModelQueuePolicy default_timeout_microseconds #2, max_queue_size #4.
                    dynamic.message(6) { queue in
                        queue.uint64(2, UInt64(max(0, batching.defaultTimeoutMicroseconds)))
                        queue.uint64(4, UInt64(max(0, batching.maxQueueSize)))
                    }
                }
            }
            config.message(24) { $0.bool(1, served.config.responseCacheEnabled) }
        }
        return writer.bytes
    }

    private static func dims(_ spec: TensorSpec, _ batched: Bool) -> [Int64] {
        (batched ? Array(spec.shape.dropFirst()) : spec.shape).map { Int64($0.sizeOrMinusOne) }
    }

    /// model_config.proto's DataType enum value (TYPE_BOOL 1 ... TYPE_BF16 14).
    static func dataType(_ spec: TensorSpec) -> Int {
        switch V2Datatype(spec.dtype) {
        case .bool: 1
        case .uint8: 2
        case .uint16: 3
        case .uint32: 4
        case .uint64: 5
        case .int8: 6
        case .int16: 7
        case .int32: 8
        case .int64: 9
        case .fp16: 10
        case .fp32: 11
        case .fp64: 12
        case .bytes: 13
        case .bf16: 14
        }
    }
}
