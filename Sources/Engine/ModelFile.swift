import ONNX

/// Loads a model file through the ONNX decoder (temporary until the decoder branch is merged).
func loadONNXModel(_ path: String) throws -> ONNX.Model {
    throw EngineError(.io, "cannot load '\(path)': the ONNX decoder is not in this build yet")
}
