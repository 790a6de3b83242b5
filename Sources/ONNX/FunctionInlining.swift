/// A model-local function (`FunctionProto`): formal inputs/outputs, attribute defaults and a body.
struct LocalFunction {
    var domain = ""
    var name = ""
    var overload = ""
    var inputs: [String] = []
    var outputs: [String] = []
    /// `attribute_proto` defaults for attributes the caller may omit.
    var defaults: [String: Attribute] = [:]
    /// Body nodes, each with its attribute references (`attribute name -> function attribute name`).
    var body: [(node: Node, references: [String: String])] = []

    /// The (domain, op_type, overload) a calling node uses.
    var key: String { "\(domain)\u{0}\(name)\u{0}\(overload)" }
}

/// Replaces calls to model-local functions with their bodies, renaming internal values per call.
///
/// Function opset imports are not reconciled with the model's: the engine runs body nodes at the model's opset.
struct FunctionInliner {
    /// Deepest chain of functions calling functions (also stops recursive functions).
    static let maxDepth = 16
    private let functions: [String: LocalFunction]

    /// An inliner for `functions` (later definitions of the same name win, as in a protobuf map).
    init(functions: [LocalFunction]) {
        var table: [String: LocalFunction] = [:]
        for function in functions { table[function.key] = function }
        self.functions = table
    }

    /// `graph` with every function call (also inside subgraphs) expanded.
    func inline(_ graph: Graph) throws -> Graph {
        var counter = 0
        return try inline(graph, depth: 0, counter: &counter)
    }

    private func inline(_ graph: Graph, depth: Int, counter: inout Int) throws -> Graph {
        var result = graph
        result.nodes = try expand(graph.nodes, depth: depth, counter: &counter)
        return result
    }

    private func expand(_ nodes: [Node], depth: Int, counter: inout Int) throws -> [Node] {
        var out: [Node] = []
        out.reserveCapacity(nodes.count)
        for var node in nodes {
            node.attributes = try node.attributes.mapValues { attribute in
                switch attribute {
                case .graph(let g): return .graph(try inline(g, depth: depth, counter: &counter))
                case .graphs(let gs): return .graphs(try gs.map { try inline($0, depth: depth, counter: &counter) })
                default: return attribute
                }
            }
            guard let function = functions["\(node.domain)\u{0}\(node.opType)\u{0}"] else {
                out.append(node)
                continue
            }
            guard depth < Self.maxDepth else {
                throw ONNXError(.tooDeep, "function '\(function.name)' calls functions deeper than \(Self.maxDepth) levels (recursive?)")
            }
            counter += 1
            let body = instantiate(function, call: node, instance: counter)
            out += try expand(body, depth: depth + 1, counter: &counter)
        }
        return out
    }

    /// The body of `function` wired to `call`'s inputs and outputs, with attributes resolved.
    private func instantiate(_ function: LocalFunction, call: Node, instance: Int) -> [Node] {
        let prefix = "\(call.name.isEmpty ? function.name : call.name)#\(instance)/"
        var names: [String: String] = ["": ""]
        for (index, formal) in function.inputs.enumerated() {
            names[formal] = index < call.inputs.count ? call.inputs[index] : ""
        }
        for (index, formal) in function.outputs.enumerated() {
            // An omitted output still exists inside the body: give it a private name.
            let actual = index < call.outputs.count ? call.outputs[index] : ""
            names[formal] = actual.isEmpty ? prefix + formal : actual
        }
        func rename(_ name: String) -> String {
            if let mapped = names[name] { return mapped }
            let fresh = prefix + name
            names[name] = fresh
            return fresh
        }
        return function.body.map { template in
            var node = template.node
            node.name = prefix + node.name
            node.inputs = node.inputs.map(rename)
            node.outputs = node.outputs.map(rename)
            for (name, target) in template.references {
                if let value = call.attributes[target] ?? function.defaults[target] { node.attributes[name] = value }
            }
            node.attributes = renamedSubgraphs(node.attributes, names)
            return node
        }
    }

    /// `attributes` with every subgraph attribute's references renamed by `names`.
    private func renamedSubgraphs(_ attributes: [String: Attribute], _ names: [String: String]) -> [String: Attribute] {
        attributes.mapValues { attribute in
            switch attribute {
            case .graph(let g): return .graph(renamed(g, names))
            case .graphs(let gs): return .graphs(gs.map { renamed($0, names) })
            default: return attribute
            }
        }
    }

    /// A body subgraph with references to the function's values renamed (ONNX names are unique across scopes).
    private func renamed(_ graph: Graph, _ names: [String: String]) -> Graph {
        func map(_ name: String) -> String { names[name] ?? name }
        var result = graph
        result.outputs = graph.outputs.map { var info = $0; info.name = map(info.name); return info }
        result.nodes = graph.nodes.map { node in
            var node = node
            node.inputs = node.inputs.map(map)
            node.outputs = node.outputs.map(map)
            node.attributes = renamedSubgraphs(node.attributes, names)
            return node
        }
        return result
    }
}
