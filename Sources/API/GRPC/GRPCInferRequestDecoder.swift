import Protobuf
import Tensor

/// A decoded `inference.ModelInferRequest`: the target and the request as the HTTP path decodes it.
public struct GRPCInferRequest: Sendable {
    /// `model_name` (#1).
    public var modelName: String
    /// `model_version` (#2); empty means the default version.
    public var modelVersion: String
    /// Inputs, requested outputs, id and parameters, tensors in their final storage.
    public var request: V2InferenceRequest
}

/// One `InferInputTensor` before its data is attached (the data may come from `raw_input_contents`).
private struct InputHeader {
    var name = ""
    var datatype = ""
    var shape: [Int64] = []
    var parameters = JSONObject()
    var contents: [WireField]?
}

/// Decodes `inference.ModelInferRequest` (grpc_service.proto field numbers), bounds-checked, unknown fields skipped.
public enum GRPCInferRequestDecoder {
    /// The request in `bytes`; tensor data from `raw_input_contents` (#7, binary-extension layout) or typed
    /// `contents`, never both, each claimed against `limits` before it is copied.
    public static func decode(_ bytes: [UInt8], limits: V2DecodeLimits = V2DecodeLimits()) throws -> GRPCInferRequest {
        try bytes.withUnsafeBytes { buffer in
            do {
                return try decode(buffer, limits: limits)
            } catch let error as ProtobufError {
                throw V2CodecError(.invalidField, "ModelInferRequest is not valid protobuf: \(error.message)")
            }
        }
    }

    private static func decode(_ buffer: UnsafeRawBufferPointer, limits: V2DecodeLimits) throws -> GRPCInferRequest {
        var reader = WireReader(buffer)
        var modelName = "", modelVersion = "", id: String?
        var parameters = JSONObject()
        var headers: [InputHeader] = []
        var outputs: [V2RequestedOutput] = []
        var raw: [UnsafeRawBufferPointer] = []
        while let field = try reader.next() {
            switch field.number {
            case 1: modelName = try field.string("model_name")
            case 2: modelVersion = try field.string("model_version")
            case 3: id = try field.string("id")
            case 4: try decodeParameter(field, "parameters", into: &parameters)
            case 5: headers.append(try decodeInput(field))
            case 6: outputs.append(try decodeRequestedOutput(field))
            case 7: try field.expect(.lengthDelimited, "raw_input_contents"); raw.append(field.bytes)
            default: continue
            }
        }
        if !raw.isEmpty, raw.count != headers.count {
            throw V2CodecError(.binaryData, "raw_input_contents has \(raw.count) entries for \(headers.count) inputs: give one per input, in input order")
        }
        var budget = V2DecodeBudget(limits)
        var inputs: [V2Input] = []
        inputs.reserveCapacity(headers.count)
        for (index, header) in headers.enumerated() {
            let label = "input '\(header.name)'"
            guard let datatype = V2Datatype(rawValue: header.datatype) else {
                throw V2CodecError(.datatypeMismatch, "\(label): unknown datatype '\(header.datatype)', expected one of \(V2Datatype.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            guard header.shape.allSatisfy({ $0 >= 0 && $0 <= Int64(Int32.max) }) else {
                throw V2CodecError(.invalidField, "\(label): shape \(header.shape) must hold non-negative sizes")
            }
            let shape = header.shape.map { Int($0) }
            let (count, overflow) = shape.reduce((1, false)) { acc, d in
                let r = acc.0.multipliedReportingOverflow(by: d)
                return (r.partialValue, acc.1 || r.overflow)
            }
            guard !overflow else { throw V2CodecError(.limitExceeded, "\(label): shape \(shape) has more elements than can be addressed") }
            try budget.claim(datatype, count: count, shape: shape, label: label)
            if inputs.contains(where: { $0.name == header.name }) {
                throw V2CodecError(.duplicateName, "\(label) appears twice")
            }
            let tensor: Tensor
            if !raw.isEmpty {
                if header.contents != nil {
                    throw V2CodecError(.invalidField, "\(label): has both contents and raw_input_contents; send one")
                }
                tensor = try decodeBinaryTensor(raw[index].bindMemory(to: UInt8.self), datatype: datatype, shape: shape, count: count, label: label)
            } else if let contents = header.contents {
                tensor = try GRPCTensorContents.decode(contents, datatype: datatype, shape: shape, count: count, label: label)
            } else {
                throw V2CodecError(.missingField, "\(label): no data: expected contents or raw_input_contents")
            }
            if datatype == .bytes { try budget.claimStrings(tensor, label: label) }
            inputs.append(V2Input(name: header.name, datatype: datatype, tensor: tensor, parameters: header.parameters))
        }
        var request = V2InferenceRequest(id: id, parameters: parameters, inputs: inputs, requestedOutputs: outputs, binaryOutputsByDefault: true)
        request.binaryOutputsByDefault = true
        return GRPCInferRequest(modelName: modelName, modelVersion: modelVersion, request: request)
    }

    private static func decodeInput(_ field: WireField) throws -> InputHeader {
        var reader = try field.message("inputs")
        var header = InputHeader()
        var shape: [WireField] = []
        var contents: [WireField] = []
        var sawContents = false
        while let f = try reader.next() {
            switch f.number {
            case 1: header.name = try f.string("inputs.name")
            case 2: header.datatype = try f.string("inputs.datatype")
            case 3: shape.append(f)
            case 4: try decodeParameter(f, "inputs.parameters", into: &header.parameters)
            case 5:
                // A repeated occurrence of an embedded message merges into the first, as protobuf specifies.
                var inner = try f.message("inputs.contents")
                while let c = try inner.next() { contents.append(c) }
                sawContents = true
            default: continue
            }
        }
        header.shape = try RepeatedFields.int64s(shape, "inputs.shape")
        header.contents = sawContents ? contents : nil
        return header
    }

    private static func decodeRequestedOutput(_ field: WireField) throws -> V2RequestedOutput {
        var reader = try field.message("outputs")
        var name = ""
        var parameters = JSONObject()
        while let f = try reader.next() {
            switch f.number {
            case 1: name = try f.string("outputs.name")
            case 2: try decodeParameter(f, "outputs.parameters", into: &parameters)
            default: continue
            }
        }
        let classification = parameters["classification"]?.intValue.map { Int($0) }
        if let k = classification, k <= 0 {
            throw V2CodecError(.invalidField, "output '\(name)': parameter 'classification' must be a positive integer, got \(k)")
        }
        return V2RequestedOutput(name: name, binary: true, classification: classification)
    }

    /// One `map<string, InferParameter>` entry (key #1, value #2 with the oneof bool #1, int64 #2, string #3,
    /// double #4, uint64 #5) into a JSON object, the form the HTTP path's parameters take.
    static func decodeParameter(_ field: WireField, _ name: String, into object: inout JSONObject) throws {
        var entry = try field.message(name)
        var key = ""
        var value = JSONValue.null
        while let f = try entry.next() {
            switch f.number {
            case 1: key = try f.string("\(name) key")
            case 2:
                var choice = try f.message("\(name) value")
                while let c = try choice.next() {
                    switch c.number {
                    case 1: value = .bool(try c.bool("bool_param"))
                    case 2: value = .integer(try c.int64("int64_param"))
                    case 3: value = .string(try c.string("string_param"))
                    case 4: value = .double(try c.double("double_param"))
                    case 5:
                        let u = try c.uint64("uint64_param")
                        value = u <= UInt64(Int64.max) ? .integer(Int64(u)) : .double(Double(u))
                    default: continue
                    }
                }
            default: continue
            }
        }
        object[key] = value
    }
}
