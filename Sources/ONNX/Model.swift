import Tensor

/// A decoded `ModelProto`: metadata and the main graph. Pure data; nothing here executes.
public struct Model: Sendable {
    /// `ir_version`.
    public var irVersion: Int64
    /// Operator sets imported, by domain (`""` is `ai.onnx`).
    public var opsetImports: [String: Int64]
    /// `producer_name` (e.g. `pytorch`, `tf2onnx`, `skl2onnx`).
    public var producerName: String
    /// `producer_version`.
    public var producerVersion: String
    /// `domain`.
    public var domain: String
    /// `model_version`.
    public var modelVersion: Int64
    /// `doc_string`.
    public var docString: String
    /// `metadata_props`, in file order.
    public var metadataProps: [(key: String, value: String)]
    /// The main graph.
    public var graph: Graph

    /// A model value (used by the decoder and by tests that build graphs directly).
    public init(irVersion: Int64 = 8, opsetImports: [String: Int64] = ["": 13], producerName: String = "", producerVersion: String = "",
                domain: String = "", modelVersion: Int64 = 0, docString: String = "", metadataProps: [(key: String, value: String)] = [], graph: Graph) {
        self.irVersion = irVersion
        self.opsetImports = opsetImports
        self.producerName = producerName
        self.producerVersion = producerVersion
        self.domain = domain
        self.modelVersion = modelVersion
        self.docString = docString
        self.metadataProps = metadataProps
        self.graph = graph
    }

    /// The `ai.onnx` opset version the model imports (the default domain is spelled `""` or `ai.onnx`).
    public var defaultOpset: Int64 { opsetImports[""] ?? opsetImports["ai.onnx"] ?? 1 }
}

/// A decoded `GraphProto`.
public struct Graph: Sendable {
    /// `name`.
    public var name: String
    /// Nodes in file order (ONNX requires topological order, but the engine re-sorts).
    public var nodes: [Node]
    /// Constant tensors by name (`initializer` and `sparse_initializer`, densified), in file order.
    public var initializers: [(name: String, tensor: Tensor)]
    /// Graph inputs, including any that have an initializer (IR < 4 lists those too).
    public var inputs: [ValueInfo]
    /// Graph outputs.
    public var outputs: [ValueInfo]
    /// Extra `value_info` entries for intermediate values.
    public var valueInfo: [ValueInfo]

    /// A graph value.
    public init(name: String = "", nodes: [Node] = [], initializers: [(name: String, tensor: Tensor)] = [],
                inputs: [ValueInfo] = [], outputs: [ValueInfo] = [], valueInfo: [ValueInfo] = []) {
        self.name = name
        self.nodes = nodes
        self.initializers = initializers
        self.inputs = inputs
        self.outputs = outputs
        self.valueInfo = valueInfo
    }
}

/// A decoded `NodeProto`.
public struct Node: Sendable {
    /// `name` (may be empty).
    public var name: String
    /// `op_type`, e.g. `Conv`.
    public var opType: String
    /// `domain` (`""` for `ai.onnx`).
    public var domain: String
    /// Input value names; `""` marks an omitted optional input.
    public var inputs: [String]
    /// Output value names; `""` marks an omitted optional output.
    public var outputs: [String]
    /// Attributes by name.
    public var attributes: [String: Attribute]

    /// A node value.
    public init(name: String = "", opType: String, domain: String = "", inputs: [String], outputs: [String], attributes: [String: Attribute] = [:]) {
        self.name = name
        self.opType = opType
        self.domain = domain
        self.inputs = inputs
        self.outputs = outputs
        self.attributes = attributes
    }
}

/// A decoded `AttributeProto` value.
public indirect enum Attribute: Sendable {
    /// FLOAT.
    case float(Float)
    /// INT.
    case int(Int64)
    /// STRING (raw bytes; ONNX strings are usually UTF-8).
    case string([UInt8])
    /// TENSOR.
    case tensor(Tensor)
    /// GRAPH (subgraph, e.g. for If/Loop).
    case graph(Graph)
    /// FLOATS.
    case floats([Float])
    /// INTS.
    case ints([Int64])
    /// STRINGS.
    case strings([[UInt8]])
    /// TENSORS.
    case tensors([Tensor])
    /// GRAPHS.
    case graphs([Graph])
}

/// A decoded `ValueInfoProto`: a name and, when declared, the tensor's element type and shape.
public struct ValueInfo: Sendable {
    /// Value name.
    public var name: String
    /// Element type, nil when undeclared or not a tensor type.
    public var elementType: DType?
    /// Shape, nil when the rank itself is unknown.
    public var shape: [Dimension]?
    /// Which kind of value this is (tensor unless the model declares a sequence, map, optional or sparse tensor).
    public var kind: ValueKind

    /// A value-info value.
    public init(name: String, elementType: DType? = nil, shape: [Dimension]? = nil, kind: ValueKind = .tensor) {
        self.name = name
        self.elementType = elementType
        self.shape = shape
        self.kind = kind
    }
}

/// The `TypeProto` variant a value is declared with.
public enum ValueKind: String, Sendable {
    /// A dense tensor (`tensor_type`), or no type declared.
    case tensor
    /// `sequence_type`.
    case sequence
    /// `map_type`.
    case map
    /// `optional_type`.
    case optional
    /// `sparse_tensor_type`.
    case sparseTensor = "sparse_tensor"
}
