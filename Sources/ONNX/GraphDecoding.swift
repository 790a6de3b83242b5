import Protobuf
import Tensor

/// Decodes `ModelProto`, `GraphProto`, `NodeProto`, `AttributeProto` and `ValueInfoProto` into the IR.
struct ProtoDecoder {
    /// Decodes the tensors met along the way (initializers, tensor attributes).
    let tensors: TensorDecoder
    /// Deepest subgraph nesting accepted (If/Loop/Scan bodies inside bodies).
    static let maxGraphDepth = 32
    /// Deepest `TypeProto` nesting accepted (sequence of sequence of ...).
    static let maxTypeDepth = 16

    /// A whole `ModelProto`.
    func decodeModel(_ bytes: UnsafeRawBufferPointer) throws -> Model {
        var reader = WireReader(bytes)
        var irVersion: Int64 = 0
        var opsets: [String: Int64] = [:]
        var producerName = "", producerVersion = "", domain = "", docString = ""
        var modelVersion: Int64 = 0
        var metadata: [(key: String, value: String)] = []
        var graphBytes: UnsafeRawBufferPointer?
        var functionFields: [WireField] = []
        while let field = try reader.next() {
            switch field.number {
            case 1: irVersion = try field.int64("ir_version")
            case 2: producerName = try field.string("producer_name")
            case 3: producerVersion = try field.string("producer_version")
            case 4: domain = try field.string("domain")
            case 5: modelVersion = try field.int64("model_version")
            case 6: docString = try field.string("doc_string")
            case 7: try field.expect(.lengthDelimited, "graph"); graphBytes = field.bytes
            case 8:
                let (opsetDomain, version) = try decodeOpset(field)
                opsets[opsetDomain] = version
            case 14: metadata.append(try decodeStringPair(field, "metadata_props"))
            case 25: functionFields.append(field)
            default: break
            }
        }
        guard irVersion > 0 else { throw ONNXError(.malformed, "model has no ir_version (is this an ONNX file?)") }
        guard let graphBytes else { throw ONNXError(.malformed, "model has no graph") }
        guard irVersion < 3 || !opsets.isEmpty else { throw ONNXError(.malformed, "model (IR version \(irVersion)) has no opset_import") }
        if opsets.isEmpty { opsets[""] = 1 }
        var graph = try decodeGraph(graphBytes, depth: 0)
        if !functionFields.isEmpty {
            // Model-local functions are expanded here so the engine only ever sees primitive operators.
            let functions = try functionFields.map(decodeFunction)
            graph = try FunctionInliner(functions: functions).inline(graph)
        }
        return Model(irVersion: irVersion, opsetImports: opsets, producerName: producerName, producerVersion: producerVersion,
                     domain: domain, modelVersion: modelVersion, docString: docString, metadataProps: metadata, graph: graph)
    }

    private func decodeOpset(_ field: WireField) throws -> (String, Int64) {
        var reader = try field.message("opset_import")
        var domain = ""
        var version: Int64 = 0
        while let entry = try reader.next() {
            switch entry.number {
            case 1: domain = try entry.string("opset_import.domain")
            case 2: version = try entry.int64("opset_import.version")
            default: break
            }
        }
        // `ai.onnx` and `""` are the same domain; store it once under `""`.
        return (domain == "ai.onnx" ? "" : domain, version)
    }

    /// A `GraphProto`; `depth` counts enclosing graphs.
    func decodeGraph(_ bytes: UnsafeRawBufferPointer, depth: Int) throws -> Graph {
        guard depth <= Self.maxGraphDepth else {
            throw ONNXError(.tooDeep, "subgraphs nest deeper than \(Self.maxGraphDepth) levels")
        }
        var nodeFields: [WireField] = [], initializerFields: [WireField] = [], sparseFields: [WireField] = []
        var inputFields: [WireField] = [], outputFields: [WireField] = [], valueInfoFields: [WireField] = []
        var name = ""
        var reader = WireReader(bytes)
        while let field = try reader.next() {
            switch field.number {
            case 1: nodeFields.append(field)
            case 2: name = try field.string("graph.name")
            case 5: initializerFields.append(field)
            case 11: inputFields.append(field)
            case 12: outputFields.append(field)
            case 13: valueInfoFields.append(field)
            case 15: sparseFields.append(field)
            default: break
            }
        }
        return try withContext("graph '\(name)'") {
            var graph = Graph(name: name)
            graph.initializers.reserveCapacity(initializerFields.count + sparseFields.count)
            for (index, field) in initializerFields.enumerated() {
                try field.expect(.lengthDelimited, "initializer #\(index)")
                let (tensorName, tensor) = try withContext("initializer #\(index)") { try tensors.decodeTensor(field.bytes) }
                graph.initializers.append((tensorName, tensor))
            }
            for (index, field) in sparseFields.enumerated() {
                try field.expect(.lengthDelimited, "sparse_initializer #\(index)")
                let (tensorName, tensor) = try withContext("sparse_initializer #\(index)") { try tensors.decodeSparseTensor(field.bytes) }
                graph.initializers.append((tensorName, tensor))
            }
            graph.inputs = try inputFields.map { try decodeValueInfo($0, "input") }
            graph.outputs = try outputFields.map { try decodeValueInfo($0, "output") }
            graph.valueInfo = try valueInfoFields.map { try decodeValueInfo($0, "value_info") }
            graph.nodes.reserveCapacity(nodeFields.count)
            for (index, field) in nodeFields.enumerated() {
                graph.nodes.append(try decodeNode(field, index: index, depth: depth, inFunction: false).node)
            }
            return graph
        }
    }

    /// A `NodeProto`; inside a function body, attributes may be references to the caller's attributes.
    func decodeNode(_ field: WireField, index: Int, depth: Int, inFunction: Bool) throws -> (node: Node, references: [String: String]) {
        var reader = try field.message("node #\(index)")
        var node = Node(opType: "", inputs: [], outputs: [])
        var attributeFields: [WireField] = []
        try withContext("node #\(index)") {
            while let entry = try reader.next() {
                switch entry.number {
                case 1: node.inputs.append(try entry.string("input"))
                case 2: node.outputs.append(try entry.string("output"))
                case 3: node.name = try entry.string("name")
                case 4: node.opType = try entry.string("op_type")
                case 5: attributeFields.append(entry)
                case 7: node.domain = try entry.string("domain")
                default: break
                }
            }
        }
        if node.domain == "ai.onnx" { node.domain = "" }
        let label = node.name.isEmpty ? "node #\(index) (\(node.opType))" : "node '\(node.name)' (\(node.opType))"
        var references: [String: String] = [:]
        try withContext(label) {
            guard !node.opType.isEmpty else { throw ONNXError(.malformed, "has no op_type") }
            for entry in attributeFields {
                let (name, value) = try decodeAttribute(entry, depth: depth, inFunction: inFunction)
                let duplicate: Bool
                switch value {
                case .value(let attribute): duplicate = node.attributes.updateValue(attribute, forKey: name) != nil || references[name] != nil
                case .reference(let target): duplicate = references.updateValue(target, forKey: name) != nil || node.attributes[name] != nil
                }
                guard !duplicate else { throw ONNXError(.malformed, "attribute '\(name)' appears twice") }
            }
        }
        return (node, references)
    }
}
