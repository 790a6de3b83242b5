import Protobuf
import Tensor

/// `AttributeProto` decoding: typed values, old files without `type`, and function attribute references.
extension ProtoDecoder {
    /// A decoded attribute, or (inside a function body) a reference to one of the function's attributes.
    enum DecodedAttribute {
        case value(Attribute)
        case reference(String)
    }

    /// The raw fields of one `AttributeProto`, decoded only once the type is known.
    struct AttributeFields {
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

    func decodeAttribute(_ field: WireField, depth: Int, inFunction: Bool) throws -> (String, DecodedAttribute) {
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
    func inferredType(_ a: AttributeFields) throws -> Int64 {
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

    func attributeValue(_ a: AttributeFields, type: Int64, depth: Int) throws -> Attribute {
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
}
