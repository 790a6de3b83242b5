import Infrastructure
import Engine
import Tensor

/// One loaded model version: its runtime (shared by all requests), config, labels and batcher.
///
/// Requests hold a strong reference while they run, so a version unloaded or replaced by a hot swap finishes
/// its admitted requests and is freed (with its runtime) after the last one.
public final class ServedVersion: Sendable {
    /// Model name.
    public let name: String
    /// Version number.
    public let version: Int
    /// The config the version was loaded with.
    public let config: ModelConfig
    /// Class labels from labels.txt, else from the model's metadata (`labels`, `classes`, ...); empty when neither has any.
    public let labels: [String]
    /// Declared inputs.
    public let inputs: [TensorSpec]
    /// Declared outputs.
    public let outputs: [TensorSpec]
    /// Maximum rows per request and per execution; 0 when the model is not batched (the batch dimension is free or fixed).
    public let maxBatchSize: Int
    /// True when concurrent requests are coalesced into one execution.
    public let batchingEnabled: Bool
    /// Seconds the load and warm-up took.
    public let loadSeconds: Double
    /// Bytes the version holds while loaded: weights and packed constants plus its activations at `maxBatchSize` rows.
    public let memoryBytes: Int

    private let batchDimensionIsDynamic: Bool
    private let defaultTimeoutNanos: UInt64?
    private let instruments: VersionInstruments
    private let batcher: DynamicBatcher
    /// The shared runtime, kept so a config or labels change can rewrap it without reloading the file.
    let runtime: any ModelRuntime

    /// Wraps a loaded runtime; throws `ServingError.invalidConfig` when the config contradicts the model.
    init(name: String, version: Int, config: ModelConfig, labels: [String], runtime: any ModelRuntime, gate: ComputeGate,
         metrics: Metrics?, loadSeconds: Double, memoryBytes: Int = 0) throws {
        self.name = name
        self.version = version
        self.config = config
        self.labels = labels.isEmpty ? metadataLabels(runtime.metadata) : labels
        self.loadSeconds = loadSeconds
        self.memoryBytes = memoryBytes
        self.runtime = runtime
        inputs = runtime.inputs
        outputs = runtime.outputs
        func hasDynamicBatch(_ spec: TensorSpec) -> Bool {
            if case .symbolic = spec.shape.first { return true }
            return false
        }
        // Rows can be stacked and split only if every input and output leads with a dynamic batch dimension.
        let fixedInput = runtime.inputs.first { !hasDynamicBatch($0) }
        let fixedOutput = runtime.outputs.first { !hasDynamicBatch($0) }
        let dynamicBatch = !runtime.inputs.isEmpty && fixedInput == nil && fixedOutput == nil
        batchDimensionIsDynamic = !runtime.inputs.isEmpty && fixedInput == nil
        let limit = config.effectiveMaxBatchSize(batchDimensionIsDynamic: dynamicBatch)
        if limit > 1 && !dynamicBatch {
            let culprit = fixedInput.map { "input '\($0.name)'" } ?? fixedOutput.map { "output '\($0.name)'" } ?? "the model"
            throw ServingError.invalidConfig(key: "max_batch_size", expected: "0 or 1 (\(culprit) has no dynamic batch dimension)",
                                             got: String(limit))
        }
        maxBatchSize = dynamicBatch ? limit : 0
        batchingEnabled = dynamicBatch && limit > 1
        let batching = config.dynamicBatching
        defaultTimeoutNanos = batching.defaultTimeoutMicroseconds > 0 ? UInt64(batching.defaultTimeoutMicroseconds) * 1000 : nil
        instruments = VersionInstruments(model: name, version: version, metrics: metrics)
        let policy = DynamicBatcher.Policy(maxBatchRows: batchingEnabled ? limit : 1,
                                           maxDelayNanos: UInt64(batching.maxQueueDelayMicroseconds) * 1000,
                                           preferredRows: Set(batching.preferredBatchSizes), maxQueue: batching.maxQueueSize)
        batcher = DynamicBatcher(model: name, version: version, runtime: runtime, inputNames: runtime.inputs.map(\.name),
                                 policy: policy, gate: gate, instruments: instruments)
    }

    deinit {
        batcher.close()
    }

    /// The rows one execution of `runtime` may hold under `config`: `max_batch_size` when every input and output leads
    /// with a dynamic batch dimension, else 1 (what warm-up and memory accounting must plan for).
    static func executionRows(config: ModelConfig, runtime: any ModelRuntime) -> Int {
        func hasDynamicBatch(_ spec: TensorSpec) -> Bool {
            if case .symbolic = spec.shape.first { return true }
            return false
        }
        let dynamic = !runtime.inputs.isEmpty && runtime.inputs.allSatisfy(hasDynamicBatch) && runtime.outputs.allSatisfy(hasDynamicBatch)
        return dynamic ? max(1, config.effectiveMaxBatchSize(batchDimensionIsDynamic: true)) : 1
    }

    /// Runs one request through the batcher and returns the requested outputs (all when `outputs` is nil).
    ///
    /// `timeout` bounds the time spent queued (nil: the config's `default_timeout_microseconds`); an expired request
    /// fails with `.timeout` and is not executed. Throws `.invalidInput`, `.queueFull`, `.timeout`, `.executionFailed`.
    /// `protocol` labels the request metrics.
    public func infer(_ feeds: [String: Tensor], outputs requested: [String]? = nil, timeout: Duration? = nil,
                      protocol proto: InferenceProtocol = .http) async throws -> [String: Tensor] {
        let started = SystemClock.nanoseconds()
        instruments.requestStarted()
        var rows = 0
        do {
            rows = try validate(feeds)
            if let requested { try validateOutputNames(requested) }
            let timeoutNanos = timeout.map(\.clampedNanoseconds) ?? defaultTimeoutNanos
            let results = try await batcher.submit(feeds, rows: rows, timeoutNanos: timeoutNanos)
            let answer: [String: Tensor]
            if let requested {
                var selected: [String: Tensor] = [:]
                for output in requested {
                    guard let tensor = results[output] else {
                        throw ServingError.executionFailed(model: name, version: version, reason: "the model produced no output '\(output)'")
                    }
                    selected[output] = tensor
                }
                answer = selected
            } else {
                answer = results
            }
            instruments.requestFinished(success: true, rows: rows, nanoseconds: SystemClock.nanoseconds() &- started, protocol: proto)
            return answer
        } catch {
            instruments.requestFinished(success: false, rows: rows, nanoseconds: SystemClock.nanoseconds() &- started, protocol: proto)
            throw error
        }
    }

    /// Checks feeds against the declared inputs (names, dtypes, ranks, fixed dimensions, batch limit) and returns the batch rows.
    public func validate(_ feeds: [String: Tensor]) throws -> Int {
        let expectedNames = inputs.map(\.name).joined(separator: ", ")
        for name in feeds.keys where !inputs.contains(where: { $0.name == name }) {
            throw ServingError.invalidInput("unknown input '\(name)': model '\(self.name)' expects inputs [\(expectedNames)]")
        }
        var batchRows: Int?
        for spec in inputs {
            guard let tensor = feeds[spec.name] else {
                throw ServingError.invalidInput("missing input '\(spec.name)': model '\(name)' expects inputs [\(expectedNames)]")
            }
            // Built only for error messages: this runs on every request.
            var expectedShape: String { "[" + spec.shape.map(\.description).joined(separator: ", ") + "]" }
            var gotShape: String { "[" + tensor.shape.map(String.init).joined(separator: ", ") + "]" }
            guard tensor.dtype == spec.dtype else {
                throw ServingError.invalidInput("input '\(spec.name)': expected dtype \(spec.dtype), got \(tensor.dtype)")
            }
            guard tensor.rank == spec.shape.count else {
                throw ServingError.invalidInput("input '\(spec.name)': expected rank \(spec.shape.count) shape \(expectedShape), got rank \(tensor.rank) shape \(gotShape)")
            }
            for (axis, dimension) in spec.shape.enumerated() {
                if let size = dimension.value, size != tensor.shape[axis] {
                    throw ServingError.invalidInput("input '\(spec.name)': expected shape \(expectedShape), got \(gotShape) (dimension \(axis) must be \(size))")
                }
            }
            if batchDimensionIsDynamic {
                let rows = tensor.shape[0]
                if let batchRows, batchRows != rows {
                    throw ServingError.invalidInput("input '\(spec.name)': expected batch size \(batchRows) like the other inputs, got \(rows)")
                }
                batchRows = rows
            }
        }
        guard let rows = batchRows else { return 1 }
        if maxBatchSize >= 1 && (rows < 1 || rows > maxBatchSize) {
            throw ServingError.invalidInput("batch size must be between 1 and \(maxBatchSize) (max_batch_size), got \(rows)")
        }
        return max(rows, 1)
    }

    /// Triton-style statistics of this version.
    public var statistics: ModelStatistics { instruments.snapshot }

    /// Requests currently waiting in this version's queue.
    public var queueDepth: Int { batcher.queueDepth }

    private func validateOutputNames(_ requested: [String]) throws {
        for name in requested where !outputs.contains(where: { $0.name == name }) {
            throw ServingError.invalidInput("unknown output '\(name)': model '\(self.name)' has outputs [\(outputs.map(\.name).joined(separator: ", "))]")
        }
    }
}
