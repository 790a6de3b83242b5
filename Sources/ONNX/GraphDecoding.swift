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
    private func decodeNode(_ field: WireField, index: Int, depth: Int, inFunction: Bool) throws -> (node: Node, references: [String: String]) {
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

    /// A decoded attribute, or (inside a function body) a reference to one of the function's attributes.
    private enum DecodedAttribute {
        case value(Attribute)
        case reference(String)
    }

    /// A model-local `FunctionProto`.
    private func decodeFunction(_ field: WireField) throws -> LocalFunction {
        var reader = try field.message("functions")
        var function = LocalFunction()
        var nodeFields: [WireField] = []
        var defaultFields: [WireField] = []
        while let entry = try reader.next() {
            switch entry.number {
            case 1: function.name = try entry.string("function.name")
            case 4: function.inputs.append(try entry.string("function.input"))
            case 5: function.outputs.append(try entry.string("function.output"))
            case 7: nodeFields.append(entry)
            case 10: function.domain = try entry.string("function.domain")
            case 11: defaultFields.append(entry)
            case 13: function.overload = try entry.string("function.overload")
            default: break
            }
        }
        try withContext("function '\(function.domain):\(function.name)'") {
            for entry in defaultFields {
                if case let (name, .value(attribute)) = try decodeAttribute(entry, depth: 0, inFunction: false) {
                    function.defaults[name] = attribute
                }
            }
            for (index, entry) in nodeFields.enumerated() {
                let (node, references) = try decodeNode(entry, index: index, depth: 0, inFunction: true)
                function.body.append((node, references))
            }
        }
        return function
    }

    /// The raw fields of one `AttributeProto`, decoded only once the type is known.
    private struct AttributeFields {
        var name = ""
        var refAttrName = ""
        var type: Int64 = 0
        var f: Float?
        var i: Int64?
        var s: [UInt8]?
        var t: UnsafeRawBufferPointer?
        var g: UnsafeRawBufferPointer?
        var sparseTensor: UnsafeRawBufferPointer?
        var floats: [WireField] = []
        var ints: [WireField] = []
        var strings: [[UInt8]] = []
        var tensors: [UnsafeRawBufferPointer] = []
        var graphs: [UnsafeRawBufferPointer] = []
        var sparseTensors: [UnsafeRawBufferPointer] = []
        var hasTypeProto = false
    }

    private func decodeAttribute(_ field: WireField, depth: Int, inFunction: Bool) throws -> (String, DecodedAttribute) {
        var reader = try field.message("attribute")
        var a = AttributeFields()
        while let entry = try reader.next() {
            switch entry.number {
            case 1: a.name = try entry.string("attribute.name")
            case 2: a.f = try entry.float("f")
            case 3: a.i = try entry.int64("i")
            case 4: a.s = try entry.byteArray("s")
            case 5: try entry.expect(.lengthDelimited, "t"); a.t = entry.bytes
            case 6: try entry.expect(.lengthDelimited, "g"); a.g = entry.bytes
            case 7: a.floats.append(entry)
            case 8: a.ints.append(entry)
            case 9: a.strings.append(try entry.byteArray("strings"))
            case 10: try entry.expect(.lengthDelimited, "tensors"); a.tensors.append(entry.bytes)
            case 11: try entry.expect(.lengthDelimited, "graphs"); a.graphs.append(entry.bytes)
            case 14, 15: a.hasTypeProto = true
            case 20: a.type = try entry.int64("type")
            case 21: a.refAttrName = try entry.string("ref_attr_name")
            case 22: try entry.expect(.lengthDelimited, "sparse_tensor"); a.sparseTensor = entry.bytes
            case 23: try entry.expect(.lengthDelimited, "sparse_tensors"); a.sparseTensors.append(entry.bytes)
            default: break
            }
        }
        let value = try withContext("attribute '\(a.name)'") { () throws -> DecodedAttribute in
            if !a.refAttrName.isEmpty {
                guard inFunction else {
                    throw ONNXError(.malformed, "refers to function attribute '\(a.refAttrName)' outside a function")
                }
                return .reference(a.refAttrName)
            }
            return .value(try attributeValue(a, type: a.type == 0 ? inferredType(a) : a.type, depth: depth))
        }
        return (a.name, value)
    }

    /// The `AttributeType` of an old attribute without `type`, from whichever value field is present.
    private func inferredType(_ a: AttributeFields) throws -> Int64 {
        if a.f != nil { return 1 }
        if a.i != nil { return 2 }
        if a.s != nil { return 3 }
        if a.t != nil { return 4 }
        if a.g != nil { return 5 }
        if a.sparseTensor != nil { return 11 }
        if !a.floats.isEmpty { return 6 }
        if !a.ints.isEmpty { return 7 }
        if !a.strings.isEmpty { return 8 }
        if !a.tensors.isEmpty { return 9 }
        if !a.graphs.isEmpty { return 10 }
        if !a.sparseTensors.isEmpty { return 12 }
        if a.hasTypeProto { return 13 }
        throw ONNXError(.malformed, "has no type and no value")
    }

    private func attributeValue(_ a: AttributeFields, type: Int64, depth: Int) throws -> Attribute {
        func missing(_ field: String) -> ONNXError { ONNXError(.malformed, "is declared \(field.uppercased()) but has no '\(field)' value") }
        switch type {
        case 1: guard let f = a.f else { throw missing("f") }; return .float(f)
        case 2: guard let i = a.i else { throw missing("i") }; return .int(i)
        case 3: guard let s = a.s else { throw missing("s") }; return .string(s)
        case 4: guard let t = a.t else { throw missing("t") }; return .tensor(try tensors.decodeTensor(t).tensor)
        case 5: guard let g = a.g else { throw missing("g") }; return .graph(try decodeGraph(g, depth: depth + 1))
        case 11: guard let t = a.sparseTensor else { throw missing("sparse_tensor") }; return .tensor(try tensors.decodeSparseTensor(t).tensor)
        case 6: return .floats(try RepeatedFields.floats(a.floats, "floats"))
        case 7: return .ints(try RepeatedFields.int64s(a.ints, "ints"))
        case 8: return .strings(a.strings)
        case 9: return .tensors(try a.tensors.map { try tensors.decodeTensor($0).tensor })
        case 10: return .graphs(try a.graphs.map { try decodeGraph($0, depth: depth + 1) })
        case 12: return .tensors(try a.sparseTensors.map { try tensors.decodeSparseTensor($0).tensor })
        case 13, 14: throw ONNXError(.unsupported, "TYPE_PROTO attributes are not supported")
        default: throw ONNXError(.malformed, "unknown attribute type \(type)")
        }
    }

    /// A `ValueInfoProto` (name = 1, type = 2).
    private func decodeValueInfo(_ field: WireField, _ what: String) throws -> ValueInfo {
        var reader = try field.message(what)
        var info = ValueInfo(name: "")
        var typeBytes: UnsafeRawBufferPointer?
        while let entry = try reader.next() {
            switch entry.number {
            case 1: info.name = try entry.string("\(what).name")
            case 2: try entry.expect(.lengthDelimited, "\(what).type"); typeBytes = entry.bytes
            default: break
            }
        }
        guard let typeBytes else { return info }
        try withContext("\(what) '\(info.name)'") { try decodeType(typeBytes, into: &info, depth: 0) }
        return info
    }

    /// A `TypeProto`: tensor types fill dtype and shape; other kinds only set `kind` (their inner types are validated).
    private func decodeType(_ bytes: UnsafeRawBufferPointer, into info: inout ValueInfo, depth: Int) throws {
        guard depth <= Self.maxTypeDepth else { throw ONNXError(.tooDeep, "type nests deeper than \(Self.maxTypeDepth) levels") }
        var reader = WireReader(bytes)
        while let field = try reader.next() {
            switch field.number {
            case 1, 8:
                info.kind = field.number == 1 ? .tensor : .sparseTensor
                try decodeTensorType(try field.message("tensor_type"), into: &info)
                if info.kind != .tensor { info.elementType = nil; info.shape = nil }
            case 4, 5, 9:
                info.kind = field.number == 4 ? .sequence : field.number == 5 ? .map : .optional
                var inner = ValueInfo(name: info.name)
                try validateNestedType(try field.message("type"), into: &inner, depth: depth + 1)
            default: break
            }
        }
    }

    /// Walks a sequence/map/optional payload so corrupt nested types are still reported.
    private func validateNestedType(_ reader: WireReader, into inner: inout ValueInfo, depth: Int) throws {
        var reader = reader
        while let field = try reader.next() {
            // sequence.elem_type = 1, optional.elem_type = 1, map.value_type = 2 (map.key_type = 1 is a varint).
            if field.wireType == .lengthDelimited, field.number <= 2 { try decodeType(field.bytes, into: &inner, depth: depth) }
        }
    }

    /// `TypeProto.Tensor`: elem_type = 1, shape = 2 (`TensorShapeProto.dim` = 1: dim_value = 1, dim_param = 2).
    private func decodeTensorType(_ reader: WireReader, into info: inout ValueInfo) throws {
        var reader = reader
        while let field = try reader.next() {
            switch field.number {
            case 1:
                let code = try field.int64("elem_type")
                info.elementType = code >= 0 && code <= 64 ? DType(rawValue: Int(code)) : nil
            case 2:
                var shapeReader = try field.message("shape")
                var dims: [Dimension] = []
                while let dimField = try shapeReader.next() {
                    guard dimField.number == 1 else { continue }
                    dims.append(try decodeDimension(try dimField.message("dim")))
                }
                info.shape = dims
            default: break
            }
        }
    }

    private func decodeDimension(_ reader: WireReader) throws -> Dimension {
        var reader = reader
        var dimension = Dimension.symbolic("")
        while let field = try reader.next() {
            switch field.number {
            case 1:
                let value = try field.int64("dim_value")
                // Some exporters write -1 for "dynamic"; treat any negative size as unnamed.
                dimension = value >= 0 && value <= Int64(Int32.max) * 1024 ? .fixed(Int(value)) : .symbolic("")
            case 2: dimension = .symbolic(try field.string("dim_param"))
            default: break
            }
        }
        return dimension
    }
}
