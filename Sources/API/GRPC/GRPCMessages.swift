import HTTP
import Protobuf
import Serving

/// The small messages of `inference.GRPCInferenceService` (grpc_service.proto field numbers) and `grpc.health.v1`.
enum GRPCMessages {
    /// `name` (#1) and `version` (#2): ModelReadyRequest, ModelMetadataRequest, ModelConfigRequest, ModelStatisticsRequest.
    static func decodeNameVersion(_ bytes: [UInt8]) throws -> (name: String, version: String) {
        try decodePair(bytes, ("", "")) { try $0.string("name") } second: { try $0.string("version") }
    }

    /// RepositoryIndexRequest: `repository_name` (#1) and `ready` (#2).
    static func decodeIndexRequest(_ bytes: [UInt8]) throws -> (repository: String, ready: Bool) {
        try decodePair(bytes, ("", false)) { try $0.string("repository_name") } second: { try $0.bool("ready") }
    }

    /// Fields #1 and #2 of a two-field message, each read by its closure; `defaults` stand for absent ones, and other
    /// fields are skipped.
    private static func decodePair<First, Second>(_ bytes: [UInt8], _ defaults: (First, Second), first: (WireField) throws -> First,
                                                  second: (WireField) throws -> Second) throws -> (First, Second) {
        var pair = defaults
        try read(bytes) { field in
            switch field.number {
            case 1: pair.0 = try first(field)
            case 2: pair.1 = try second(field)
            default: break
            }
        }
        return pair
    }

    /// RepositoryModelLoadRequest / RepositoryModelUnloadRequest: `repository_name` (#1), `model_name` (#2) and
    /// `parameters` (#3, map<string, ModelRepositoryParameter>: bool #1, int64 #2, string #3, bytes #4).
    /// Returns the `config` parameter's text (as string or bytes) and every parameter name given.
    static func decodeLoadRequest(_ bytes: [UInt8]) throws -> (repository: String, model: String, config: [UInt8]?, parameterNames: [String]) {
        var repository = "", model = "", config: [UInt8]?, names: [String] = []
        try read(bytes) { field in
            switch field.number {
            case 1: repository = try field.string("repository_name")
            case 2: model = try field.string("model_name")
            case 3:
                var entry = try field.message("parameters")
                var key = "", value: [UInt8]?
                while let f = try entry.next() {
                    if f.number == 1 { key = try f.string("parameters key") }
                    if f.number == 2 {
                        var choice = try f.message("parameters value")
                        while let c = try choice.next() {
                            if c.number == 3 || c.number == 4 { value = try c.byteArray("string_param") }
                        }
                    }
                }
                names.append(key)
                if key == "config" {
                    guard let value else { throw GRPCStatus(.invalidArgument, "parameter 'config' must be a string holding config.json") }
                    config = value
                }
            default: break
            }
        }
        return (repository, model, config, names)
    }

    /// grpc.health.v1.HealthCheckRequest: `service` (#1).
    static func decodeHealthRequest(_ bytes: [UInt8]) throws -> String {
        var service = ""
        try read(bytes) { field in if field.number == 1 { service = try field.string("service") } }
        return service
    }

    /// A message with one bool field #1 (ServerLiveResponse.live, ServerReadyResponse.ready, ModelReadyResponse.ready).
    static func encodeBool(_ value: Bool) -> [UInt8] {
        var writer = WireWriter()
        writer.bool(1, value)
        return writer.bytes
    }

    /// grpc.health.v1.HealthCheckResponse: `status` (#1; SERVING 1, NOT_SERVING 2, SERVICE_UNKNOWN 3).
    static func encodeHealth(_ status: HealthStatus) -> [UInt8] {
        var writer = WireWriter()
        writer.uint64(1, UInt64(status.rawValue))
        return writer.bytes
    }

    /// ServerMetadataResponse: name #1, version #2, extensions #3.
    static func encodeServerMetadata(name: String, version: String, extensions: [String]) -> [UInt8] {
        var writer = WireWriter()
        writer.string(1, name)
        writer.string(2, version)
        for e in extensions { writer.stringAlways(3, e) }
        return writer.bytes
    }

    /// ModelMetadataResponse: name #1, versions #2, platform #3, inputs #4 and outputs #5 (TensorMetadata: name #1,
    /// datatype #2, shape #3 with -1 for dynamic sizes).
    static func encodeModelMetadata(name: String, versions: [String], platform: String, inputs: [V2TensorMetadata], outputs: [V2TensorMetadata]) -> [UInt8] {
        var writer = WireWriter()
        writer.string(1, name)
        for v in versions { writer.stringAlways(2, v) }
        writer.string(3, platform)
        for (number, list) in [(4, inputs), (5, outputs)] {
            for t in list {
                writer.message(number) { m in
                    m.string(1, t.name)
                    m.string(2, t.datatype.rawValue)
                    m.packedInt64s(3, t.shape.map { Int64($0) })
                }
            }
        }
        return writer.bytes
    }

    /// ModelStatisticsResponse: model_stats #1 (ModelStatistics: name #1, version #2, last_inference #3,
    /// inference_count #4, execution_count #5, inference_stats #6 (with cache_hit #7 and cache_miss #8), batch_stats #7),
    /// durations as StatisticDuration (count #1, ns #2).
    static func encodeStatistics(_ stats: [ModelStatistics]) -> [UInt8] {
        func duration(_ w: inout WireWriter, _ number: Int, _ d: DurationStatistic) {
            w.message(number) { m in
                m.uint64(1, d.count)
                m.uint64(2, d.nanoseconds)
            }
        }
        var writer = WireWriter()
        for s in stats {
            writer.message(1) { m in
                m.string(1, s.name)
                m.string(2, String(s.version))
                m.uint64(3, s.lastInferenceMilliseconds)
                m.uint64(4, s.inferenceCount)
                m.uint64(5, s.executionCount)
                m.message(6) { i in
                    duration(&i, 1, s.success)
                    duration(&i, 2, s.fail)
                    duration(&i, 3, s.queue)
                    duration(&i, 4, s.computeInput)
                    duration(&i, 5, s.computeInfer)
                    duration(&i, 6, s.computeOutput)
                    duration(&i, 7, s.cacheHit)
                    duration(&i, 8, s.cacheMiss)
                }
                for b in s.batchStatistics {
                    m.message(7) { e in
                        e.uint64(1, UInt64(b.batchSize))
                        duration(&e, 2, b.computeInput)
                        duration(&e, 3, b.computeInfer)
                        duration(&e, 4, b.computeOutput)
                    }
                }
            }
        }
        return writer.bytes
    }

    /// RepositoryIndexResponse: models #1 (ModelIndex: name #1, version #2, state #3, reason #4).
    static func encodeIndex(_ entries: [ModelIndexEntry]) -> [UInt8] {
        var writer = WireWriter()
        for e in entries {
            writer.message(1) { m in
                m.string(1, e.name)
                if let v = e.version { m.string(2, String(v)) }
                m.string(3, e.state.rawValue)
                if let r = e.reason { m.string(4, r) }
            }
        }
        return writer.bytes
    }

    private static func read(_ bytes: [UInt8], _ body: (WireField) throws -> Void) throws {
        do {
            try bytes.withUnsafeBytes { buffer in
                var reader = WireReader(buffer)
                while let field = try reader.next() { try body(field) }
            }
        } catch let error as ProtobufError {
            throw GRPCStatus(.invalidArgument, "request message is not valid protobuf: \(error.message)")
        }
    }
}

/// grpc.health.v1.HealthCheckResponse.ServingStatus.
enum HealthStatus: Int {
    /// The service answers.
    case serving = 1
    /// The service exists but cannot answer now (loading, draining, no READY version).
    case notServing = 2
    /// No such service (Watch only; Check answers NOT_FOUND instead).
    case serviceUnknown = 3
}
