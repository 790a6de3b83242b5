import Tensor

/// A model input or output as callers see it: name, element type and declared shape.
public struct TensorSpec: Sendable, Hashable {
    /// Value name in the graph.
    public var name: String
    /// Element type.
    public var dtype: DType
    /// Declared shape; `.symbolic` dimensions (usually the batch) vary per call.
    public var shape: [Dimension]

    /// A spec value.
    public init(name: String, dtype: DType, shape: [Dimension]) {
        self.name = name
        self.dtype = dtype
        self.shape = shape
    }
}
