import Protobuf

/// `FunctionProto` decoding (model-local functions, inlined by `FunctionInliner`).
extension ProtoDecoder {
    /// A model-local `FunctionProto`.
    func decodeFunction(_ field: WireField) throws -> LocalFunction {
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
}
