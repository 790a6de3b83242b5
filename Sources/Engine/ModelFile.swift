import ONNX

/// Loads a model file through the ONNX decoder, mapping its errors to `EngineError`.
func loadONNXModel(_ path: String) throws -> ONNX.Model {
    do {
        return try ONNX.Model(contentsOf: path)
    } catch let error as ONNXError {
        switch error.code {
        case .io: throw EngineError(.io, "cannot load '\(path)': \(error)")
        case .unsupported: throw EngineError(.unsupportedOperator, "cannot load '\(path)': \(error)")
        default: throw EngineError(.invalidModel, "cannot load '\(path)': \(error)")
        }
    } catch {
        throw EngineError(.io, "cannot load '\(path)': \(error)")
    }
}
