import Tensor

/// What `osprey inspect` (and model metadata endpoints) report about a model, computed from the IR.
public struct ModelSummary: Sendable {
    /// A model input or output as served: name, element type and declared shape.
    public struct Value: Sendable {
        /// Value name.
        public let name: String
        /// `float32`, ..., or the non-tensor kind (`sequence`, ...), or `unknown` when undeclared.
        public let type: String
        /// Declared dimensions: sizes, symbolic names, or -1 when unnamed; nil when the rank is unknown.
        public let shape: [ShapeEntry]?
    }

    /// One declared dimension.
    public enum ShapeEntry: Sendable, Equatable, CustomStringConvertible {
        /// A fixed size (-1 for an unnamed dynamic dimension).
        case size(Int)
        /// A named dynamic dimension.
        case name(String)

        /// `224`, `-1` or the name.
        public var description: String {
            switch self {
            case .size(let n): return String(n)
            case .name(let s): return s
            }
        }
    }

    /// `producer_name`.
    public let producerName: String
    /// `producer_version`.
    public let producerVersion: String
    /// `ir_version`.
    public let irVersion: Int64
    /// `domain` of the model (reverse-DNS, often empty).
    public let domain: String
    /// `model_version`.
    public let modelVersion: Int64
    /// The main graph's name.
    public let graphName: String
    /// Imported opsets sorted by domain (`ai.onnx` for the default domain).
    public let opsets: [(domain: String, version: Int64)]
    /// Graph inputs that are not initializers (what a client must feed).
    public let inputs: [Value]
    /// Graph outputs.
    public let outputs: [Value]
    /// Node count per operator (including nodes inside subgraphs), most frequent first then by name;
    /// operators outside the default domain are spelled `domain:OpType`.
    public let operatorCounts: [(op: String, count: Int)]
    /// Number of elements in all initializers of the main graph.
    public let parameterCount: Int
    /// Bytes of all initializers of the main graph (string elements count their lengths).
    public let parameterBytes: Int
    /// `metadata_props` in file order.
    public let metadata: [(key: String, value: String)]

    /// Summarises `model`.
    public init(_ model: borrowing Model) {
        producerName = model.producerName
        producerVersion = model.producerVersion
        irVersion = model.irVersion
        domain = model.domain
        modelVersion = model.modelVersion
        graphName = model.graph.name
        opsets = model.opsetImports.map { (domain: $0.key.isEmpty ? "ai.onnx" : $0.key, version: $0.value) }.sorted { $0.domain < $1.domain }
        let initializerNames = Set(model.graph.initializers.map(\.name))
        inputs = model.graph.inputs.filter { !initializerNames.contains($0.name) }.map(Self.value)
        outputs = model.graph.outputs.map(Self.value)
        var counts: [String: Int] = [:]
        Self.countOperators(model.graph, into: &counts)
        operatorCounts = counts.map { (op: $0.key, count: $0.value) }.sorted { $0.count != $1.count ? $0.count > $1.count : $0.op < $1.op }
        var parameters = 0, bytes = 0
        for (_, tensor) in model.graph.initializers {
            parameters += tensor.count
            bytes += tensor.dtype == .string ? tensor.strings.reduce(0) { $0 + $1.count } : tensor.byteCount
        }
        parameterCount = parameters
        parameterBytes = bytes
        metadata = model.metadataProps
    }

    private static func value(_ info: ValueInfo) -> Value {
        let type = info.kind != .tensor ? info.kind.rawValue : info.elementType.map { String(describing: $0) } ?? "unknown"
        let shape = info.shape?.map { dimension -> ShapeEntry in
            switch dimension {
            case .fixed(let n): return .size(n)
            case .symbolic(let name): return name.isEmpty ? .size(-1) : .name(name)
            }
        }
        return Value(name: info.name, type: type, shape: info.kind == .tensor ? shape : nil)
    }

    private static func countOperators(_ graph: Graph, into counts: inout [String: Int]) {
        for node in graph.nodes {
            counts[node.domain.isEmpty ? node.opType : "\(node.domain):\(node.opType)", default: 0] += 1
            for attribute in node.attributes.values {
                switch attribute {
                case .graph(let subgraph): countOperators(subgraph, into: &counts)
                case .graphs(let subgraphs): subgraphs.forEach { countOperators($0, into: &counts) }
                default: break
                }
            }
        }
    }
}
