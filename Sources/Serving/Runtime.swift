import Engine
import Tensor

/// A loaded, immutable model that can run synchronously from any thread (the engine's `CompiledModel` conforms).
public protocol ModelRuntime: Sendable {
    /// Declared inputs (the batch dimension, when dynamic, is `.symbolic`).
    var inputs: [TensorSpec] { get }
    /// Declared outputs.
    var outputs: [TensorSpec] { get }
    /// Runs the model once; blocking, called only on Serving's dedicated threads.
    func run(_ feeds: [String: Tensor]) throws -> [String: Tensor]
    /// Runs a batch whose rows are independent (what dynamic batching assumes), in whatever schedule is fastest; the
    /// results are those of `run`.
    func runBatch(_ feeds: [String: Tensor]) throws -> [String: Tensor]
    /// Runs several requests' independent rows as one batch without stacking them first, when the runtime's schedule
    /// for that batch reads each row in place; each request's outputs in order (those `runBatch` gives on the stacked
    /// batch), or nil when it would not run so (the caller then stacks the batch and calls `runBatch`).
    func runBatch(requests: [[String: Tensor]]) throws -> [[String: Tensor]]?
    /// True when these requests' independent rows, as one batch, would each run alone on one thread: the batcher may
    /// then stream rows from one batch into the next through `runRowStream`.
    func streamsRows(_ requests: [[String: Tensor]]) -> Bool
    /// Runs the jobs `next` hands out (each computing rows with `runRows`) on the runtime's compute threads, each alone,
    /// until `next` has returned nil on every thread; `next` is called concurrently and may block.
    func runRowStream(_ next: () -> (() -> Void)?)
    /// Runs one job of a stream: its rows' feeds (`parts`, each of one row or more, stackable) as one batch, the result
    /// `run` gives on them stacked along the first axis (a runtime may read them where they are instead).
    func runRows(_ parts: [[String: Tensor]]) throws -> [String: Tensor]
    /// Rows the next stream job takes when `queued` rows wait (taken into the stream or still queued) and `computing`
    /// jobs run; the stream takes at most the rows it holds.
    func streamJobRows(queued: Int, computing: Int) -> Int
    /// Key-value metadata stored in the model file (ONNX `metadata_props`), in file order.
    var metadata: [(key: String, value: String)] { get }
    /// Bytes the runtime keeps for as long as it is loaded: weights and packed constants.
    var constantBytes: Int { get }
    /// Runs the model once on `feeds` and returns the most bytes its values (inputs, intermediates, outputs) held at once.
    func peakActivationBytes(_ feeds: [String: Tensor]) throws -> Int
}

extension ModelRuntime {
    /// No metadata unless the runtime has some.
    public var metadata: [(key: String, value: String)] { [] }
    /// `run`, unless the runtime can use the rows' independence.
    public func runBatch(_ feeds: [String: Tensor]) throws -> [String: Tensor] { try run(feeds) }
    /// Nil (stack and call `runBatch`), unless the runtime can run the rows in place.
    public func runBatch(requests: [[String: Tensor]]) throws -> [[String: Tensor]]? { nil }
    /// Never, unless the runtime runs rows alone.
    public func streamsRows(_ requests: [[String: Tensor]]) -> Bool { false }
    /// The jobs one after another on the calling thread.
    public func runRowStream(_ next: () -> (() -> Void)?) { while let job = next() { job() } }
    /// `run` on the parts stacked.
    public func runRows(_ parts: [[String: Tensor]]) throws -> [String: Tensor] {
        guard parts.count > 1, let names = parts.first?.keys else { return try run(parts.first ?? [:]) }
        return try run(Dictionary(uniqueKeysWithValues: names.map { name in (name, Tensor.pooledBatch(concatenating: parts.compactMap { $0[name] })) }))
    }
    /// One row per job, unless the runtime says otherwise.
    public func streamJobRows(queued: Int, computing: Int) -> Int { 1 }
    /// Unknown (0) unless the runtime can tell.
    public var constantBytes: Int { 0 }
    /// Runs the model; 0 unless the runtime can measure its activations.
    public func peakActivationBytes(_ feeds: [String: Tensor]) throws -> Int {
        _ = try run(feeds)
        return 0
    }
}

/// Builds a runtime from a model file path; blocking, called only on the registry's loader thread.
public typealias ModelLoader = @Sendable (_ path: String) throws -> any ModelRuntime
