import Engine
import Tensor

/// The engine's compiled model is the production runtime: its `run` already matches the protocol.
extension CompiledModel: ModelRuntime {
    /// The model file's `metadata_props`.
    public var metadata: [(key: String, value: String)] { info.metadataProps }
}

/// Loads `path` with the ONNX engine (decode, compile, pre-pack); the registry calls it on its loader thread.
public let engineLoader: ModelLoader = { path in try CompiledModel(contentsOf: path) }
