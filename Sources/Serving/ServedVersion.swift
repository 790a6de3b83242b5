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
    /// What requests must send and may ask for, fixed at load: the one place their tensors are checked.
    public let contract: ModelContract
    /// Declared inputs.
    public var inputs: [TensorSpec] { contract.inputs }
    /// Declared outputs.
    public var outputs: [TensorSpec] { contract.outputs }
    /// Maximum rows per request and per execution; 0 when the model is not batched (the batch dimension is free or fixed).
    public let maxBatchSize: Int
    /// True when concurrent requests are coalesced into one execution.
    public let batchingEnabled: Bool
    /// Seconds the load and warm-up took.
    public let loadSeconds: Double
    /// Bytes the version holds while loaded: weights and packed constants plus its activations at `maxBatchSize` rows.
    public let memoryBytes: Int
    /// Unique per load in this process (a replaced or reloaded version gets a new one): the response cache keys on it.
    public let loadID: UInt64 = ServedVersion.nextLoadID()

    /// The image input and its preprocessing, built at load (the config's `image` section error, if it has one).
    let imagePlan: Result<ImageInputPlan?, ServingError>
    private let defaultTimeoutNanos: UInt64?
    let instruments: VersionInstruments
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
        // Rows can be stacked and split only if every input and output leads with a dynamic batch dimension.
        let fixedInput = runtime.inputs.first { !$0.leadsWithDynamicBatch }
        let fixedOutput = runtime.outputs.first { !$0.leadsWithDynamicBatch }
        let dynamicBatch = !runtime.inputs.isEmpty && fixedInput == nil && fixedOutput == nil
        let limit = config.effectiveMaxBatchSize(batchDimensionIsDynamic: dynamicBatch)
        if limit > 1 && !dynamicBatch {
            let culprit = fixedInput.map { "input '\($0.name)'" } ?? fixedOutput.map { "output '\($0.name)'" } ?? "the model"
            throw ServingError.invalidConfig(key: "max_batch_size", expected: "0 or 1 (\(culprit) has no dynamic batch dimension)",
                                             got: String(limit))
        }
        maxBatchSize = dynamicBatch ? limit : 0
        contract = ModelContract(model: name, inputs: runtime.inputs, outputs: runtime.outputs, maxBatchSize: maxBatchSize)
        do {
            imagePlan = .success(try ImageInputPlan.make(inputs: runtime.inputs, config: config))
        } catch let error as ServingError {
            // Kept, not thrown: a bad `image` section fails image requests, while tensor requests keep working.
            imagePlan = .failure(error)
        }
        batchingEnabled = dynamicBatch && limit > 1
        let batching = config.dynamicBatching
        defaultTimeoutNanos = batching.defaultTimeoutMicroseconds > 0 ? UInt64(batching.defaultTimeoutMicroseconds) * 1000 : nil
        instruments = VersionInstruments(model: name, version: version, metrics: metrics)
        let policy = DynamicBatcher.Policy(maxBatchRows: batchingEnabled ? limit : 1,
                                           maxDelayNanos: UInt64(batching.maxQueueDelayMicroseconds) * 1000,
                                           preferredRows: Set(batching.preferredBatchSizes), maxQueue: batching.maxQueueSize,
                                           instances: config.instanceCount)
        batcher = DynamicBatcher(model: name, version: version, runtime: runtime, inputNames: runtime.inputs.map(\.name),
                                 policy: policy, gate: gate, instruments: instruments)
    }

    deinit {
        batcher.close()
    }

    private static let loads = Locked<UInt64>(0)

    private static func nextLoadID() -> UInt64 {
        loads.withLock { count in
            count += 1
            return count
        }
    }

    /// The rows one execution of `runtime` may hold under `config`: `max_batch_size` when every input and output leads
    /// with a dynamic batch dimension, else 1 (what warm-up and memory accounting must plan for).
    static func executionRows(config: ModelConfig, runtime: any ModelRuntime) -> Int {
        let dynamic = !runtime.inputs.isEmpty && runtime.inputs.allSatisfy(\.leadsWithDynamicBatch)
            && runtime.outputs.allSatisfy(\.leadsWithDynamicBatch)
        return dynamic ? max(1, config.effectiveMaxBatchSize(batchDimensionIsDynamic: true)) : 1
    }

    /// Runs one request through the batcher and returns the requested outputs (all when `outputs` is nil).
    ///
    /// `feeds` are checked once, against `contract` (lossless dtype widening included).
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
            let bound = try contract.bind(feeds)
            rows = bound.rows
            if let requested { try contract.checkOutputs(requested) }
            let timeoutNanos = timeout.map(\.clampedNanoseconds) ?? defaultTimeoutNanos
            let results = try await batcher.submit(bound.feeds, rows: rows, timeoutNanos: timeoutNanos)
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

    /// Triton-style statistics of this version.
    public var statistics: ModelStatistics { instruments.snapshot }

    /// Requests currently waiting in this version's queue.
    public var queueDepth: Int { batcher.queueDepth }
}
