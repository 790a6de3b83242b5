import Protobuf
import Tensor

/// Decodes a serialized `SequenceProto` (`optional` false) or `OptionalProto` (`optional` true), as ONNX's test data
/// stores sequence and optional values, into the engine's representation: a sequence value, an empty optional, or
/// the optional's element itself. Sequences of tensors only; `elementType` types an empty sequence.
public func decodeContainerProto(_ bytes: [UInt8], optional: Bool, elementType: DType = .float32) throws -> Tensor {
    try asONNXError { try bytes.withUnsafeBytes { try decodeContainer($0, optional: optional, elementType: elementType, depth: 0) } }
}

private func decodeContainer(_ bytes: UnsafeRawBufferPointer, optional: Bool, elementType: DType, depth: Int) throws -> Tensor {
    guard depth < 8 else { throw ONNXError(.tooDeep, "optional/sequence values nest deeper than 8") }
    let tensors = TensorDecoder(externalDataDirectory: nil)
    var reader = WireReader(bytes)
    var elements: [Tensor] = []
    var held: Tensor? = nil
    // SequenceProto / OptionalProto: 3 tensor(s), 4 sparse, 5 sequence, 6 map, 7 optional.
    while let field = try reader.next() {
        switch field.number {
        case 3:
            try field.expect(.lengthDelimited, "tensor value")
            let tensor = try tensors.decodeTensor(field.bytes).tensor
            if optional { held = tensor } else { elements.append(tensor) }
        case 5 where optional:
            try field.expect(.lengthDelimited, "sequence value")
            held = try decodeContainer(field.bytes, optional: false, elementType: elementType, depth: depth + 1)
        case 4, 5, 6, 7:
            throw ONNXError(.unsupported, "\(optional ? "optional" : "sequence") values holding \(["sparse tensors", "sequences", "maps", "optionals"][field.number - 4]) are not supported")
        default:
            continue
        }
    }
    if optional { return held ?? Tensor(emptyOptionalOf: elementType) }
    return Tensor(sequence: elements, elementType: elements.first?.dtype ?? elementType)
}
