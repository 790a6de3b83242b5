import ONNX
import Tensor

/// Runtime inputs of one node; kernels may `take` an input to reuse its buffer when the executor passed the last reference.
struct KernelInputs {
    var values: [Tensor?]
    /// Where the planner would like the (single, float32) output written: a window of a Concat group's buffer.
    /// Kernels that allocate through `Tensor.makeFloat(shape:placement:)` honour it; others may ignore it.
    var placement: OutputPlacement? = nil

    /// Number of input slots (including omitted optional ones).
    var count: Int { values.count }

    /// The input at `index`, or nil when omitted or absent.
    subscript(_ index: Int) -> Tensor? { index < values.count ? values[index] : nil }

    /// A required input.
    func required(_ index: Int, _ ctx: OpContext) throws -> Tensor {
        guard let t = self[index] else { throw ctx.error(.invalidModel, "input \(index) is required but missing") }
        return t
    }

    /// Moves the input out so a uniquely referenced buffer can be written in place.
    mutating func take(_ index: Int) -> Tensor? {
        guard index < values.count else { return nil }
        let t = values[index]
        values[index] = nil
        return t
    }
}

/// A prepared operator: turns its inputs into its outputs.
typealias Kernel = @Sendable (inout KernelInputs) throws -> [Tensor]

/// What a factory knows at compile time about the node it prepares.
struct OpContext: Sendable {
    /// The node.
    let node: Node
    /// The `ai.onnx` opset in force.
    let opset: Int
    /// Activation fused into this node's epilogue by the compiler (Conv, Gemm).
    let activation: Activation
    private let constantBox: ConstantBox

    /// A context; `constants` are the node's compile-time inputs by index.
    init(node: Node, opset: Int, constants: [Int: Tensor], activation: Activation) {
        self.node = node
        self.opset = opset
        self.activation = activation
        constantBox = ConstantBox(constants)
    }

    /// Values known at compile time, by input index (initializers and folded constants); empty once released.
    var constants: [Int: Tensor] { constantBox.values }

    /// Drops the compile-time constants: kernels keep this context for error messages, and must not keep
    /// a second copy of weights they already packed.
    func releaseConstants() { constantBox.values = [:] }

    /// `Conv 'conv1'` for messages.
    var label: String { node.name.isEmpty ? "\(node.opType) node (output '\(node.outputs.first ?? "")')" : "\(node.opType) node '\(node.name)'" }

    /// An error that names this node, its op and opset.
    func error(_ code: EngineError.Code, _ message: String) -> EngineError {
        EngineError(code, "\(label) (opset \(opset)): \(message)")
    }

    /// True when input `index` is present (not omitted).
    func hasInput(_ index: Int) -> Bool { index < node.inputs.count && !node.inputs[index].isEmpty }

    // MARK: attributes

    func has(_ name: String) -> Bool { node.attributes[name] != nil }

    func int(_ name: String, _ fallback: Int) throws -> Int {
        guard let a = node.attributes[name] else { return fallback }
        guard case .int(let v) = a else { throw error(.invalidModel, "attribute '\(name)' should be an int, got \(a.kindName)") }
        return Int(v)
    }

    func float(_ name: String, _ fallback: Float) throws -> Float {
        guard let a = node.attributes[name] else { return fallback }
        switch a {
        case .float(let v): return v
        case .int(let v): return Float(v)
        default: throw error(.invalidModel, "attribute '\(name)' should be a float, got \(a.kindName)")
        }
    }

    func ints(_ name: String) throws -> [Int]? {
        guard let a = node.attributes[name] else { return nil }
        switch a {
        case .ints(let v): return v.map { Int($0) }
        case .int(let v): return [Int(v)]
        default: throw error(.invalidModel, "attribute '\(name)' should be ints, got \(a.kindName)")
        }
    }

    func floats(_ name: String) throws -> [Float]? {
        guard let a = node.attributes[name] else { return nil }
        switch a {
        case .floats(let v): return v
        case .float(let v): return [v]
        default: throw error(.invalidModel, "attribute '\(name)' should be floats, got \(a.kindName)")
        }
    }

    func string(_ name: String, _ fallback: String) throws -> String {
        guard let a = node.attributes[name] else { return fallback }
        guard case .string(let v) = a else { throw error(.invalidModel, "attribute '\(name)' should be a string, got \(a.kindName)") }
        return String(decoding: v, as: UTF8.self)
    }

    func tensor(_ name: String) throws -> Tensor? {
        guard let a = node.attributes[name] else { return nil }
        guard case .tensor(let v) = a else { throw error(.invalidModel, "attribute '\(name)' should be a tensor, got \(a.kindName)") }
        return v
    }

    /// Rejects an attribute value the engine does not implement.
    func unsupported(_ name: String, _ detail: String) -> EngineError {
        error(.unsupportedAttribute, "attribute \(name) \(detail) is not supported")
    }

    /// Normalises a possibly negative axis against `rank`.
    func axis(_ value: Int, rank: Int) throws -> Int {
        let a = value < 0 ? value + rank : value
        guard a >= 0 && a < rank else { throw error(.executionFailed, "axis \(value) is out of range for rank \(rank)") }
        return a
    }
}

extension Attribute {
    /// `int`, `floats`, ... for messages.
    var kindName: String {
        switch self {
        case .float: return "float"
        case .int: return "int"
        case .string: return "string"
        case .tensor: return "tensor"
        case .graph: return "graph"
        case .floats: return "floats"
        case .ints: return "ints"
        case .strings: return "strings"
        case .tensors: return "tensors"
        case .graphs: return "graphs"
        }
    }
}

/// Builds the kernel of one node; `consumed` lists constant inputs baked into the kernel (dropped from the value table).
struct PreparedKernel {
    var kernel: Kernel
    var consumedInputs: Set<Int> = []
}

/// Holds a node's compile-time constants until the compiler releases them.
/// Written only during single-threaded compilation (before any kernel runs), hence unchecked.
final class ConstantBox: @unchecked Sendable {
    var values: [Int: Tensor]
    init(_ values: [Int: Tensor]) { self.values = values }
}
