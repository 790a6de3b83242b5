import Engine
import Tensor

extension V2Codec {
    /// Matches request inputs to the model's inputs, in model order, ready to run.
    ///
    /// Every model input must be present and no others; dtypes are converted only when lossless; ranks
    /// and fixed dimensions must match, and a symbolic dimension name must take one size across inputs.
    public static func bindInputs(_ request: V2InferenceRequest, to specs: [TensorSpec]) throws -> [Tensor] {
        let expected = specs.map { "'\($0.name)'" }.joined(separator: ", ")
        for input in request.inputs where !specs.contains(where: { $0.name == input.name }) {
            throw V2CodecError(.invalidField, "unexpected input '\(input.name)', the model's inputs are \(expected)")
        }
        var symbolSizes: [String: (size: Int, input: String)] = [:]
        return try specs.map { spec in
            guard let input = request.input(named: spec.name) else {
                throw V2CodecError(.missingField, "missing input '\(spec.name)', the model's inputs are \(expected)")
            }
            let tensor = try convert(input, to: spec.dtype)
            let declared = "[" + spec.shape.map { String($0.sizeOrMinusOne) }.joined(separator: ", ") + "]"
            guard tensor.shape.count == spec.shape.count else {
                throw V2CodecError(.shapeMismatch, "input '\(spec.name)': expected shape \(declared), got \(tensor.shape)")
            }
            for (axis, (dimension, size)) in zip(spec.shape, tensor.shape).enumerated() {
                switch dimension {
                case .fixed(let n) where n != size:
                    throw V2CodecError(.shapeMismatch, "input '\(spec.name)': expected shape \(declared), got \(tensor.shape) (axis \(axis))")
                case .symbolic(let name) where !name.isEmpty:
                    if let seen = symbolSizes[name], seen.size != size {
                        throw V2CodecError(.shapeMismatch, "dimension '\(name)' is \(seen.size) in input '\(seen.input)' but \(size) in input '\(spec.name)'")
                    }
                    symbolSizes[name] = (size, spec.name)
                default:
                    break
                }
            }
            return tensor
        }
    }
}
