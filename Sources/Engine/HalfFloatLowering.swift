import ONNX
import Tensor

/// Rewrites a float16 or bfloat16 model to compute in float32, as onnxruntime's CPU provider runs a float16 one: its
/// InsertCastTransformer wraps every node without a float16 kernel in Cast(float16 -> float32) / Cast(float32 ->
/// float16), and its RemoveDuplicateCastTransformer then drops each float32 -> float16 -> float32 pair between two such
/// nodes, so float16 roundings survive only where the graph's float16 inputs and outputs are. Here that is done once at
/// compile time: 16-bit float initializers and constant attributes widen, `Cast(to: float16)` becomes
/// `Cast(to: float32)`, a declared float16 graph input is widened by one Cast and a float16 graph output narrowed by
/// one, so every float32 kernel serves these models while callers still send and receive their declared type.
/// bfloat16 gets the same treatment (onnxruntime's CPU provider has no bfloat16 kernels for most operators and refuses
/// such models; computing in float32 is what bfloat16 hardware does inside its dot products). (onnxruntime also rounds
/// where a node it has a float16 kernel for, such as LayerNormalization or a Reshape chain, reads a float32-computed
/// value: that is left out, it moves MiniLM's embedding by about one float16 step.)
enum HalfFloatLowering {
    /// Suffix of the float32 twin of a 16-bit float graph input or output.
    static let widenedSuffix = "::float32"

    /// The 16-bit float types lowered.
    static let halfTypes: [DType] = [.float16, .bfloat16]

    /// Lowers `graph` (and the subgraphs inside it) in place; `constants` are its initializers by name. Models
    /// without 16-bit floats are left as they are.
    static func lower(_ graph: inout Graph, constants: inout [String: Tensor]) {
        for half in halfTypes { lower(&graph, constants: &constants, half: half) }
    }

    /// Lowers the values of type `half` (float16 or bfloat16).
    private static func lower(_ graph: inout Graph, constants: inout [String: Tensor], half: DType) {
        guard holdsHalf(graph, half) || constants.values.contains(where: { $0.dtype == half }) else { return }
        // Outputs the model leaves untyped are `half` when `half` values flow into them (only hand-built graphs do this).
        let untypedHalf = graph.outputs.contains { $0.elementType == nil } ? halfValues(graph, constants: constants, half: half) : []
        for (name, tensor) in constants where tensor.dtype == half { constants[name] = widened(tensor) }
        for i in graph.nodes.indices { rewriteAttributes(&graph.nodes[i], half) }
        graph.valueInfo = graph.valueInfo.map { retyped($0, half) }
        let inputNames = Set(graph.inputs.map(\.name))
        var widenings: [Node] = [], narrowings: [Node] = []
        for input in graph.inputs where input.elementType == half && !input.name.isEmpty && constants[input.name] == nil {
            let wide = input.name + widenedSuffix
            rename(input.name, to: wide, in: &graph.nodes, producers: false)
            widenings.append(cast(input.name, to: wide, .float32))
        }
        for output in graph.outputs where (output.elementType == half || (output.elementType == nil && untypedHalf.contains(output.name)))
            && !inputNames.contains(output.name) {
            let wide = output.name + widenedSuffix
            // An output nothing produces is left for the plan builder to report under its own name.
            let produced = constants[output.name] != nil || graph.nodes.contains { $0.outputs.contains(output.name) }
            guard produced, !narrowings.contains(where: { $0.outputs == [output.name] }) else { continue }
            rename(output.name, to: wide, in: &graph.nodes, producers: true)
            if let c = constants.removeValue(forKey: output.name) { constants[wide] = c }
            narrowings.append(cast(wide, to: output.name, half))
        }
        graph.nodes = widenings + graph.nodes + narrowings
    }

    /// True when a declared value, initializer or node attribute of `graph` or its subgraphs is of type `half`.
    private static func holdsHalf(_ graph: Graph, _ half: DType) -> Bool {
        if (graph.inputs + graph.outputs + graph.valueInfo).contains(where: { $0.elementType == half }) { return true }
        if graph.initializers.contains(where: { $0.tensor.dtype == half }) { return true }
        for node in graph.nodes {
            for (name, attribute) in node.attributes {
                switch attribute {
                case .int(let v) where dtypeAttributes.contains(name) && v == half.rawValue: return true
                case .tensor(let t) where t.dtype == half: return true
                case .graph(let g) where holdsHalf(g, half): return true
                case .graphs(let gs) where gs.contains(where: { holdsHalf($0, half) }): return true
                default: continue
                }
            }
        }
        return false
    }

    /// Attributes that name an element type (`Cast.to`, the generators' `dtype`, DequantizeLinear's `output_dtype`).
    private static let dtypeAttributes: Set<String> = ["to", "dtype", "output_dtype"]

    /// Retypes `node`'s `half` attributes to float32 and lowers its subgraphs, whose `half` values all become float32.
    private static func rewriteAttributes(_ node: inout Node, _ half: DType) {
        for (name, attribute) in node.attributes {
            switch attribute {
            case .int(let v) where dtypeAttributes.contains(name) && v == half.rawValue && isStandard(node):
                node.attributes[name] = .int(Int64(DType.float32.rawValue))
            case .tensor(let t) where t.dtype == half:
                node.attributes[name] = .tensor(widened(t))
            case .tensors(let ts) where ts.contains(where: { $0.dtype == half }):
                node.attributes[name] = .tensors(ts.map { $0.dtype == half ? widened($0) : $0 })
            case .graph(var g):
                lowerSubgraph(&g, half)
                node.attributes[name] = .graph(g)
            case .graphs(var gs):
                for i in gs.indices { lowerSubgraph(&gs[i], half) }
                node.attributes[name] = .graphs(gs)
            default: continue
            }
        }
    }

    /// A control-flow body: its values all become float32, declared inputs and outputs included, because the outer
    /// graph hands it float32 values (and reads float32 back) once lowered.
    private static func lowerSubgraph(_ graph: inout Graph, _ half: DType) {
        graph.initializers = graph.initializers.map { ($0.name, $0.tensor.dtype == half ? widened($0.tensor) : $0.tensor) }
        for i in graph.nodes.indices { rewriteAttributes(&graph.nodes[i], half) }
        graph.inputs = graph.inputs.map { retyped($0, half) }
        graph.outputs = graph.outputs.map { retyped($0, half) }
        graph.valueInfo = graph.valueInfo.map { retyped($0, half) }
    }

    /// `info` declared float32 where it was declared `half`.
    private static func retyped(_ info: ValueInfo, _ half: DType) -> ValueInfo {
        var info = info
        if info.elementType == half { info.elementType = .float32 }
        return info
    }

    /// Replaces `old` by `new` where nodes read it (and, when `producers`, where a node writes it), in subgraphs too.
    private static func rename(_ old: String, to new: String, in nodes: inout [Node], producers: Bool) {
        for i in nodes.indices {
            for k in nodes[i].inputs.indices where nodes[i].inputs[k] == old { nodes[i].inputs[k] = new }
            if producers { for k in nodes[i].outputs.indices where nodes[i].outputs[k] == old { nodes[i].outputs[k] = new } }
            for (name, attribute) in nodes[i].attributes {
                switch attribute {
                case .graph(var g):
                    renameOuter(old, to: new, in: &g)
                    nodes[i].attributes[name] = .graph(g)
                case .graphs(var gs):
                    for j in gs.indices { renameOuter(old, to: new, in: &gs[j]) }
                    nodes[i].attributes[name] = .graphs(gs)
                default: continue
                }
            }
        }
    }

    /// Replaces reads of the outer value `old` inside a subgraph (its own outputs may name it as a pass-through).
    private static func renameOuter(_ old: String, to new: String, in graph: inout Graph) {
        guard !graph.inputs.contains(where: { $0.name == old }), !graph.initializers.contains(where: { $0.name == old }) else { return }
        rename(old, to: new, in: &graph.nodes, producers: false)
        for k in graph.outputs.indices where graph.outputs[k].name == old && !graph.nodes.contains(where: { $0.outputs.contains(old) }) {
            // A body output that is an outer value passes it through: read the widened twin under the declared name.
            graph.nodes.append(Node(name: old + widenedSuffix, opType: "Identity", inputs: [new], outputs: [old]))
        }
    }

    /// A Cast node from `input` to `output` of `dtype`.
    private static func cast(_ input: String, to output: String, _ dtype: DType) -> Node {
        Node(name: output + "::cast", opType: "Cast", inputs: [input], outputs: [output], attributes: ["to": .int(Int64(dtype.rawValue))])
    }

    /// Whether `node` is in the default ONNX domain.
    private static func isStandard(_ node: Node) -> Bool { node.domain.isEmpty || node.domain == "ai.onnx" }

    /// `t` (float16 or bfloat16) as float32, exactly.
    static func widened(_ t: Tensor) -> Tensor {
        precondition(t.dtype == .float16 || t.dtype == .bfloat16, "widened reads 16-bit floats")
        var out = Tensor(uninitialized: .float32, shape: t.shape)
        let brain = t.dtype == .bfloat16
        t.withUnsafeBytes { raw in
            let src = raw.bindMemory(to: UInt16.self)
            out.withUnsafeMutableBufferPointer(of: Float.self) { dst in
                // bfloat16 is the top half of a float32.
                if brain { for i in 0..<src.count { dst[i] = Float(bitPattern: UInt32(src[i]) << 16) } }
                else { for i in 0..<src.count { dst[i] = float16ToFloat(src[i]) } }
            }
        }
        return out
    }

    /// Standard operators whose first output is not of their float inputs' type (indices, masks, shapes, quantized
    /// values) or whose type another input or attribute decides.
    private static let otherTypedOutputs: Set<String> = [
        "And", "ArgMax", "ArgMin", "BitShift", "Bernoulli", "Cast", "CastLike", "Constant", "ConstantOfShape", "DynamicQuantizeLinear",
        "Equal", "EyeLike", "Greater", "GreaterOrEqual", "IsInf", "IsNaN", "Less", "LessOrEqual", "Multinomial", "NonMaxSuppression",
        "NonZero", "Not", "Or", "QuantizeLinear", "RandomNormalLike", "RandomUniformLike", "Shape", "Size", "StringNormalizer",
        "TfIdfVectorizer", "Xor",
    ]

    /// Values of `graph` that are of type `type` (float16 or bfloat16) before lowering: declared so, such
    /// initializers, outputs of `Cast(to: type)` and such constants, and the first output of any operator reading such
    /// a value but those in `otherTypedOutputs` (every output of Split).
    static func halfValues(_ graph: Graph, constants: [String: Tensor], half type: DType) -> Set<String> {
        var half = Set((graph.inputs + graph.outputs + graph.valueInfo).filter { $0.elementType == type }.map(\.name))
        for (name, tensor) in constants where tensor.dtype == type { half.insert(name) }
        // Repeats until nothing changes, so file order (which the engine does not trust) does not matter.
        var changed = true
        while changed {
            changed = false
            for node in graph.nodes where isStandard(node) {
                guard let out = node.outputs.first, !out.isEmpty, !half.contains(out) else { continue }
                let isHalf: Bool
                switch node.opType {
                case "Cast": isHalf = node.attributes["to"].map { if case .int(let v) = $0 { v == type.rawValue } else { false } } ?? false
                case "Constant", "ConstantOfShape":
                    isHalf = node.attributes["value"].map { if case .tensor(let t) = $0 { t.dtype == type } else { false } } ?? false
                case "CastLike": isHalf = node.inputs.count > 1 && half.contains(node.inputs[1])
                default: isHalf = !otherTypedOutputs.contains(node.opType) && node.inputs.contains(where: half.contains)
                }
                guard isHalf else { continue }
                half.insert(out)
                if node.opType == "Split" { half.formUnion(node.outputs.filter { !$0.isEmpty }) }
                changed = true
            }
        }
        return half
    }
}
