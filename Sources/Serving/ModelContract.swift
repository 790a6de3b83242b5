import Engine
import Tensor

/// What one loaded version accepts and returns, fixed at load: the only place a request's tensors are checked.
///
/// Every front end (HTTP JSON, HTTP binary, gRPC) hands its decoded tensors to `bind`, so a wrong request gets the
/// same `ServingError.invalidInput` message, naming the input and saying what was expected and what arrived, whatever
/// protocol it came by.
public struct ModelContract: Sendable {
    /// Model name (for messages).
    public let model: String
    /// Declared inputs, in model order.
    public let inputs: [TensorSpec]
    /// Declared outputs, in model order.
    public let outputs: [TensorSpec]
    /// True when every input leads with a dynamic (symbolic) batch dimension, so requests carry a row count.
    public let batchDimensionIsDynamic: Bool
    /// Most rows one request may carry; 0 when the model is not batched.
    public let maxBatchSize: Int

    private let inputNames: String
    private let outputNames: String

    /// A contract over `inputs` and `outputs`; `maxBatchSize` 0 leaves the row count unbounded.
    public init(model: String, inputs: [TensorSpec], outputs: [TensorSpec], maxBatchSize: Int) {
        self.model = model
        self.inputs = inputs
        self.outputs = outputs
        self.maxBatchSize = maxBatchSize
        batchDimensionIsDynamic = !inputs.isEmpty && inputs.allSatisfy(\.leadsWithDynamicBatch)
        inputNames = inputs.map(\.name).joined(separator: ", ")
        outputNames = outputs.map(\.name).joined(separator: ", ")
    }

    /// Feeds checked against the contract: one tensor per model input, in the model's dtype, and the request's rows.
    public struct BoundInputs: Sendable {
        /// Input name to tensor, exactly the model's inputs.
        public let feeds: [String: Tensor]
        /// Batch rows (1 when the model has no dynamic batch dimension).
        public let rows: Int
    }

    /// Checks `tensors` (input name to tensor, as a front end decoded them) and returns them ready to run.
    ///
    /// Every model input must be present and no other; a dtype is converted only when lossless (INT32 data for an
    /// INT64 input); ranks and fixed dimensions must match; a named symbolic dimension takes one size across inputs;
    /// the batch rows must agree and stay within `max_batch_size`. Throws `ServingError.invalidInput`.
    public func bind(_ tensors: [String: Tensor]) throws -> BoundInputs {
        for name in tensors.keys.sorted() where !inputs.contains(where: { $0.name == name }) {
            throw ServingError.invalidInput("unknown input '\(name)': model '\(model)' expects inputs [\(inputNames)]")
        }
        var feeds: [String: Tensor] = [:]
        feeds.reserveCapacity(inputs.count)
        var symbolSizes: [String: (size: Int, input: String)] = [:]
        var batchRows: Int?
        for spec in inputs {
            guard let given = tensors[spec.name] else {
                throw ServingError.invalidInput("missing input '\(spec.name)': model '\(model)' expects inputs [\(inputNames)]")
            }
            let tensor = try Self.converted(given, to: spec)
            try checkShape(tensor, against: spec, symbolSizes: &symbolSizes)
            if batchDimensionIsDynamic {
                let rows = tensor.shape[0]
                if let batchRows, batchRows != rows {
                    throw ServingError.invalidInput("input '\(spec.name)': expected batch size \(batchRows) like the other inputs, got \(rows)")
                }
                batchRows = rows
            }
            feeds[spec.name] = tensor
        }
        guard let rows = batchRows else { return BoundInputs(feeds: feeds, rows: 1) }
        if maxBatchSize >= 1 && (rows < 1 || rows > maxBatchSize) {
            throw ServingError.invalidInput("batch size must be between 1 and \(maxBatchSize) (max_batch_size), got \(rows)")
        }
        return BoundInputs(feeds: feeds, rows: max(rows, 1))
    }

    /// Checks that every name in `requested` is a model output; throws `ServingError.invalidInput` naming the first that is not.
    public func checkOutputs(_ requested: [String]) throws {
        for name in requested where !outputs.contains(where: { $0.name == name }) {
            throw ServingError.invalidInput("unknown output '\(name)': model '\(model)' has outputs [\(outputNames)]")
        }
    }

    private func checkShape(_ tensor: Tensor, against spec: TensorSpec, symbolSizes: inout [String: (size: Int, input: String)]) throws {
        // Built only for error messages: this runs on every request.
        var expectedShape: String { "[" + spec.shape.map(\.description).joined(separator: ", ") + "]" }
        var gotShape: String { "[" + tensor.shape.map(String.init).joined(separator: ", ") + "]" }
        guard tensor.rank == spec.shape.count else {
            throw ServingError.invalidInput("input '\(spec.name)': expected rank \(spec.shape.count) shape \(expectedShape), got rank \(tensor.rank) shape \(gotShape)")
        }
        for (axis, dimension) in spec.shape.enumerated() {
            let size = tensor.shape[axis]
            switch dimension {
            case .fixed(let expected) where expected != size:
                throw ServingError.invalidInput("input '\(spec.name)': expected shape \(expectedShape), got \(gotShape) (dimension \(axis) must be \(expected))")
            case .symbolic(let symbol) where !symbol.isEmpty:
                if let seen = symbolSizes[symbol], seen.size != size {
                    throw ServingError.invalidInput("dimension '\(symbol)' is \(seen.size) in input '\(seen.input)' but \(size) in input '\(spec.name)'")
                }
                symbolSizes[symbol] = (size, spec.name)
            default:
                break
            }
        }
    }

    /// `tensor` in `spec`'s dtype: as is when it matches, widened when that cannot change a value, else refused.
    static func converted(_ tensor: Tensor, to spec: TensorSpec) throws -> Tensor {
        if tensor.dtype == spec.dtype { return tensor }
        guard let widened = tensor.losslesslyConverted(to: spec.dtype) else {
            throw ServingError.invalidInput("input '\(spec.name)': expected dtype \(spec.dtype), got \(tensor.dtype)")
        }
        return widened
    }
}

extension TensorSpec {
    /// True when the first dimension is symbolic (the batch dimension a batcher may stack requests along).
    var leadsWithDynamicBatch: Bool {
        if case .symbolic = shape.first { return true }
        return false
    }
}
