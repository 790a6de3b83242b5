import Protobuf
import Tensor

/// `ValueInfoProto` and `TypeProto` decoding: element types, shapes and symbolic dimensions.
extension ProtoDecoder {
    /// A `ValueInfoProto` (name = 1, type = 2).
    func decodeValueInfo(_ field: WireField, _ what: String) throws -> ValueInfo {
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
    func decodeType(_ bytes: UnsafeRawBufferPointer, into info: inout ValueInfo, depth: Int) throws {
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
    func validateNestedType(_ reader: WireReader, into inner: inout ValueInfo, depth: Int) throws {
        var reader = reader
        while let field = try reader.next() {
            // sequence.elem_type = 1, optional.elem_type = 1, map.value_type = 2 (map.key_type = 1 is a varint).
            if field.wireType == .lengthDelimited, field.number <= 2 { try decodeType(field.bytes, into: &inner, depth: depth) }
        }
    }

    /// `TypeProto.Tensor`: elem_type = 1, shape = 2 (`TensorShapeProto.dim` = 1: dim_value = 1, dim_param = 2).
    func decodeTensorType(_ reader: WireReader, into info: inout ValueInfo) throws {
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

    func decodeDimension(_ reader: WireReader) throws -> Dimension {
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
