import Engine
import Tensor

/// The engine's compiled model is the production runtime: its `run` already matches the protocol.
extension CompiledModel: ModelRuntime {
    /// The model file's `metadata_props`.
    public var metadata: [(key: String, value: String)] { info.metadata }

    /// Initializers kept by the plan plus the constants its kernels packed.
    public var constantBytes: Int { retainedConstantBytes }

    /// One row range per compute thread, each running the whole plan on its rows: one barrier per run, not per operator.
    public func runBatch(_ feeds: [String: Tensor]) throws -> [String: Tensor] { try runSplittingRows(feeds) }

    /// One row per part read where each request holds it, when that is the batch's schedule: no stacking.
    public func runBatch(requests: [[String: Tensor]]) throws -> [[String: Tensor]]? { try runRequestRows(requests) }

    /// Rows stream on the engine's compute threads, each thread computing its row alone.
    public func runRowStream(_ next: () -> (() -> Void)?) { parallelStream(next) }

    /// The engine's own measurement of one run.
    public func peakActivationBytes(_ feeds: [String: Tensor]) throws -> Int { try measurePeakActivationBytes(feeds) }
}

/// Loads `path` with the ONNX engine (decode, compile, pre-pack); the registry calls it on its loader thread.
/// The file bytes and decoded protobuf are freed by then: their pages go back to the system at once.
public let engineLoader: ModelLoader = { path in
    defer { CompiledModel.returnFreeHeapPages() }
    return try CompiledModel(contentsOf: path)
}
