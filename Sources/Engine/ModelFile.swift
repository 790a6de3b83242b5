import ONNX

/// Loads a model file through the ONNX decoder, mapping its errors to `EngineError`.
func loadONNXModel(_ path: String) throws -> ONNX.Model {
    do {
        return try ONNX.Model(contentsOf: path)
    } catch let error as ONNXError {
        throw EngineError(.invalidModel, "cannot load '\(path)': \(error)")
    } catch {
        throw EngineError(.io, "cannot load '\(path)': \(error)")
    }
}
