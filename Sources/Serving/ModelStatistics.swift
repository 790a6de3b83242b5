import Infrastructure
import Foundation

/// A count and the total time it took, in nanoseconds (Triton's `{count, ns}` pair).
public struct DurationStatistic: Sendable, Equatable {
    /// Number of events.
    public var count: UInt64 = 0
    /// Total nanoseconds over those events.
    public var nanoseconds: UInt64 = 0

    /// A pair of totals.
    public init(count: UInt64 = 0, nanoseconds: UInt64 = 0) {
        self.count = count
        self.nanoseconds = nanoseconds
    }

    /// Adds one event of `ns` nanoseconds.
    mutating func add(_ ns: UInt64, count: UInt64 = 1) {
        self.count &+= count
        nanoseconds &+= ns
    }
}

/// Executions of one batch size (Triton `batch_stats`).
public struct BatchStatistics: Sendable, Equatable {
    /// Rows in the executed batch.
    public var batchSize: Int
    /// Time concatenating inputs.
    public var computeInput = DurationStatistic()
    /// Time running the model.
    public var computeInfer = DurationStatistic()
    /// Time splitting outputs.
    public var computeOutput = DurationStatistic()

    /// Empty totals for one batch size.
    public init(batchSize: Int) { self.batchSize = batchSize }
}

/// Triton-style statistics of one model version, for `/v2/models/{m}/versions/{v}/stats`.
public struct ModelStatistics: Sendable, Equatable {
    /// Model name.
    public var name: String
    /// Version number.
    public var version: Int
    /// Unix time of the last finished request in milliseconds (0 when none).
    public var lastInferenceMilliseconds: UInt64 = 0
    /// Successful inferences counted in rows (a batch-4 request counts 4).
    public var inferenceCount: UInt64 = 0
    /// Model executions (one per batch).
    public var executionCount: UInt64 = 0
    /// Successful requests and their end-to-end time.
    public var success = DurationStatistic()
    /// Failed requests (including timeouts and refusals) and their time.
    public var fail = DurationStatistic()
    /// Time requests spent queued.
    public var queue = DurationStatistic()
    /// Per-request share of input concatenation time.
    public var computeInput = DurationStatistic()
    /// Per-request model execution time (each request in a batch is charged the batch's time).
    public var computeInfer = DurationStatistic()
    /// Per-request share of output splitting time.
    public var computeOutput = DurationStatistic()
    /// Executions per batch size, ascending.
    public var batchStatistics: [BatchStatistics] = []
    /// Requests answered from the response cache and the time hashing and looking them up took (Triton `cache_hit`).
    public var cacheHit = DurationStatistic()
    /// Cache-enabled requests not found, and the time looking them up and storing their answer took (Triton `cache_miss`).
    public var cacheMiss = DurationStatistic()

    /// Zeroed statistics of one version.
    public init(name: String, version: Int) {
        self.name = name
        self.version = version
    }
}

/// Statistics and Prometheus series of one served version, recorded synchronously from any thread.
final class VersionInstruments: Sendable {
    private let statistics: Locked<ModelStatistics>
    /// Per protocol: the success and failure counters and the duration histogram.
    private let requestInstruments: [InferenceProtocol: (success: Counter?, failure: Counter?, duration: Histogram?)]
    private let queueDuration: Histogram?
    private let computeDuration: Histogram?
    private let batchSize: Histogram?
    private let queueDepth: Gauge?
    private let inFlight: Gauge?

    init(model: String, version: Int, metrics: Metrics?) {
        statistics = Locked(ModelStatistics(name: model, version: version))
        let labels = ["model": model, "version": String(version)]
        func with(_ extra: [String: String]) -> [String: String] { labels.merging(extra) { $1 } }
        var perProtocol: [InferenceProtocol: (success: Counter?, failure: Counter?, duration: Histogram?)] = [:]
        for proto in InferenceProtocol.allCases {
            let p = ["protocol": proto.rawValue]
            perProtocol[proto] = (
                metrics?.counter("osprey_inference_requests_total", help: "Inference requests by outcome and protocol.", labels: with(p.merging(["outcome": "success"]) { $1 })),
                metrics?.counter("osprey_inference_requests_total", help: "Inference requests by outcome and protocol.", labels: with(p.merging(["outcome": "failure"]) { $1 })),
                metrics?.histogram("osprey_inference_request_duration_seconds", help: "Time from admission to result, in seconds.", labels: with(p)))
        }
        requestInstruments = perProtocol
        queueDuration = metrics?.histogram("osprey_inference_queue_duration_seconds", help: "Time requests waited in the batch queue, in seconds.", labels: labels)
        computeDuration = metrics?.histogram("osprey_inference_compute_duration_seconds", help: "Model execution time per batch, in seconds.", labels: labels)
        batchSize = metrics?.histogram("osprey_inference_batch_size", help: "Rows per model execution.", labels: labels,
                                       buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256])
        queueDepth = metrics?.gauge("osprey_inference_queue_depth", help: "Requests waiting in the batch queue.", labels: labels)
        inFlight = metrics?.gauge("osprey_inference_in_flight_requests", help: "Requests admitted and not yet answered.", labels: labels)
    }

    /// A copy of the statistics.
    var snapshot: ModelStatistics { statistics.withLock { $0 } }

    func requestStarted() { inFlight?.increment() }

    /// Records a finished request (success or not) with its end-to-end time.
    func requestFinished(success: Bool, rows: Int, nanoseconds ns: UInt64, protocol proto: InferenceProtocol = .http) {
        inFlight?.decrement()
        let now = UInt64(max(0, Date().timeIntervalSince1970 * 1000))
        statistics.withLock {
            if success {
                $0.success.add(ns)
                $0.inferenceCount &+= UInt64(rows)
            } else {
                $0.fail.add(ns)
            }
            $0.lastInferenceMilliseconds = now
        }
        let instruments = requestInstruments[proto]
        (success ? instruments?.success : instruments?.failure)?.increment()
        instruments?.duration?.observe(Double(ns) / 1e9)
    }

    /// Records a request answered from the response cache in `nanoseconds`: a success of `rows` rows (as Triton counts
    /// hits in `success` and `queue`) that computed nothing.
    func cacheHit(rows: Int, nanoseconds ns: UInt64, protocol proto: InferenceProtocol) {
        requestStarted()
        requestFinished(success: true, rows: rows, nanoseconds: ns, protocol: proto)
        statistics.withLock {
            $0.cacheHit.add(ns)
            $0.queue.add(0)
        }
    }

    /// Adds `nanoseconds` of cache lookup or store time to `cache_miss` (`count` 1 for the lookup, 0 for the store).
    func cacheMiss(nanoseconds ns: UInt64, count: UInt64) {
        statistics.withLock { $0.cacheMiss.add(ns, count: count) }
    }

    func queueDepthChanged(_ depth: Int) { queueDepth?.set(Double(depth)) }

    /// Records one execution of `rows` rows for `requests` requests whose queue waits are `queueNanos`.
    func executed(rows: Int, queueNanos: [UInt64], inputNanos: UInt64, inferNanos: UInt64, outputNanos: UInt64) {
        let requests = UInt64(queueNanos.count)
        statistics.withLock { stats in
            stats.executionCount &+= 1
            for wait in queueNanos { stats.queue.add(wait) }
            stats.computeInput.add(inputNanos &* requests, count: requests)
            stats.computeInfer.add(inferNanos &* requests, count: requests)
            stats.computeOutput.add(outputNanos &* requests, count: requests)
            if let i = stats.batchStatistics.firstIndex(where: { $0.batchSize == rows }) {
                stats.batchStatistics[i].computeInput.add(inputNanos)
                stats.batchStatistics[i].computeInfer.add(inferNanos)
                stats.batchStatistics[i].computeOutput.add(outputNanos)
            } else {
                var entry = BatchStatistics(batchSize: rows)
                entry.computeInput.add(inputNanos)
                entry.computeInfer.add(inferNanos)
                entry.computeOutput.add(outputNanos)
                stats.batchStatistics.append(entry)
                stats.batchStatistics.sort { $0.batchSize < $1.batchSize }
            }
        }
        for wait in queueNanos { queueDuration?.observe(Double(wait) / 1e9) }
        computeDuration?.observe(Double(inferNanos) / 1e9)
        batchSize?.observe(Double(rows))
    }
}

/// The front end a request arrived through (the `protocol` label of the request metrics).
public enum InferenceProtocol: String, Sendable, CaseIterable {
    /// KServe V2 over HTTP/1.1 (JSON or the binary extension).
    case http
    /// KServe V2 over gRPC.
    case grpc
}
