import HTTP
import Tensor

/// KServe V2 / Open Inference Protocol body codecs (JSON and the binary tensor data extension).
public enum V2Codec {
    /// Header giving the JSON part's length when binary tensors follow it.
    public static let inferenceHeaderContentLength = "Inference-Header-Content-Length"

    /// Decodes an infer request body, using `Inference-Header-Content-Length` from `headers` when present;
    /// `limits` bound the BYTES elements and decoded bytes the request may claim (413 beyond them).
    public static func decodeInferRequest(body: [UInt8], headers: HTTPHeaders, limits: V2DecodeLimits = V2DecodeLimits()) throws -> V2InferenceRequest {
        try decodeInferRequest(body: body, jsonLength: try jsonLength(headers: headers, bodyCount: body.count), limits: limits)
    }

    /// The JSON length announced by `Inference-Header-Content-Length`, checked against the body size.
    public static func jsonLength(headers: HTTPHeaders, bodyCount: Int) throws -> Int? {
        guard let text = headers[inferenceHeaderContentLength] else { return nil }
        let trimmed = text.trimmingASCIIWhitespace()
        guard !trimmed.isEmpty, trimmed.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let n = Int(trimmed) else {
            throw V2CodecError(.binaryData, "\(inferenceHeaderContentLength) must be a non-negative integer, got '\(text)'")
        }
        guard n <= bodyCount else {
            throw V2CodecError(.binaryData, "\(inferenceHeaderContentLength) is \(n) but the body has only \(bodyCount) bytes")
        }
        return n
    }

    /// Decodes an infer request whose first `jsonLength` bytes (all when nil) are JSON and the rest binary tensors.
    /// Each input's share of `limits` is claimed from its declared shape before its data is read or allocated.
    public static func decodeInferRequest(body: [UInt8], jsonLength: Int?, limits: V2DecodeLimits = V2DecodeLimits()) throws -> V2InferenceRequest {
        let jsonEnd = jsonLength ?? body.count
        var budget = V2DecodeBudget(limits)
        precondition(jsonEnd <= body.count, "JSON length beyond the body")
        // The binary tensors view the body (one buffer, shared with `body`) instead of copying out of it.
        let borrowed = jsonEnd < body.count ? borrowedStorage(of: body) : nil
        return try body.withUnsafeBufferPointer { all in
            var reader = JSONReader(UnsafeBufferPointer(rebasing: all[..<jsonEnd]))
            var id: String?
            var parameters = JSONObject()
            var objects: [V2TensorObject]?
            var outputs: [(name: String, parameters: JSONObject)] = []
            do {
                guard try reader.peek() == UInt8(ascii: "{") else {
                    throw V2CodecError(.invalidJSON, "request body must be a JSON object")
                }
                try reader.beginObject()
                var seenKeys = Set<String>()
                while let key = try reader.nextKey() {
                    guard seenKeys.insert(key).inserted else {
                        throw V2CodecError(.invalidJSON, "duplicate key \"\(key)\" in the request object")
                    }
                    switch key {
                    case "id":
                        guard try reader.peek() == UInt8(ascii: "\"") else { throw V2CodecError(.invalidField, "'id' must be a string") }
                        id = try reader.readString()
                    case "parameters":
                        guard case .object(let object) = try reader.readValue() else {
                            throw V2CodecError(.invalidField, "'parameters' must be an object")
                        }
                        parameters = object
                    case "inputs":
                        guard try reader.peek() == UInt8(ascii: "[") else { throw V2CodecError(.invalidField, "'inputs' must be an array") }
                        try reader.beginArray()
                        var list: [V2TensorObject] = []
                        while try reader.nextElement() {
                            list.append(try reader.readV2TensorObject(role: "input", position: list.count, jsonEnd: jsonEnd, budget: &budget))
                        }
                        objects = list
                    case "outputs":
                        guard try reader.peek() == UInt8(ascii: "[") else { throw V2CodecError(.invalidField, "'outputs' must be an array") }
                        try reader.beginArray()
                        while try reader.nextElement() {
                            let position = outputs.count
                            guard case .object(let object) = try reader.readValue() else {
                                throw V2CodecError(.invalidField, "output #\(position): expected an object")
                            }
                            guard let name = object["name"]?.stringValue else {
                                throw V2CodecError(.missingField, "output #\(position): missing 'name' string")
                            }
                            var outputParameters = JSONObject()
                            if let p = object["parameters"] {
                                guard let o = p.objectValue else { throw V2CodecError(.invalidField, "output '\(name)': 'parameters' must be an object") }
                                outputParameters = o
                            }
                            outputs.append((name, outputParameters))
                        }
                    default:
                        try reader.skipValue()
                    }
                }
                try reader.expectEnd()
            } catch let error as JSONError {
                // Bytes after the JSON usually mean binary tensors sent without the length header.
                let hint = error.kind == .trailingData && jsonLength == nil
                    ? " (binary tensor data needs the \(inferenceHeaderContentLength) header)" : ""
                throw V2CodecError(.invalidJSON, "invalid JSON: \(error)\(hint)")
            }
            guard let objects else { throw V2CodecError(.missingField, "request has no 'inputs'") }
            guard !objects.isEmpty else { throw V2CodecError(.missingField, "request 'inputs' is empty") }

            var binaryDefault = false
            if let flag = parameters["binary_data_output"] {
                guard let b = flag.boolValue else { throw V2CodecError(.invalidField, "parameter binary_data_output must be a boolean") }
                binaryDefault = b
            }

            // Binary tensors follow the JSON in input order.
            var cursor = jsonEnd
            var inputs: [V2Input] = []
            inputs.reserveCapacity(objects.count)
            var seen = Set<String>()
            for object in objects {
                let label = "input '\(object.name)'"
                guard seen.insert(object.name).inserted else {
                    throw V2CodecError(.duplicateName, "input '\(object.name)' appears more than once")
                }
                let tensor: Tensor
                if let t = object.tensor {
                    tensor = t
                } else if let size = object.binaryDataSize {
                    guard jsonLength != nil || size == 0 else {
                        throw V2CodecError(.binaryData, "\(label): has binary_data_size but the request has no \(inferenceHeaderContentLength) header")
                    }
                    try budget.claim(object.datatype, count: object.count, shape: object.shape, label: label)
                    guard size <= body.count - cursor else {
                        throw V2CodecError(.binaryData, "\(label): binary_data_size \(size) exceeds the \(body.count - cursor) bytes left after the JSON")
                    }
                    tensor = try decodeBinaryTensor(UnsafeBufferPointer(rebasing: all[cursor..<(cursor + size)]),
                                                    datatype: object.datatype, shape: object.shape, count: object.count, label: label,
                                                    within: borrowed)
                    if tensor.dtype == .string { try budget.claimStrings(tensor, label: label) }
                    cursor += size
                } else {
                    throw V2CodecError(.missingField, "\(label): has neither 'data' nor binary_data_size")
                }
                inputs.append(V2Input(name: object.name, datatype: object.datatype, tensor: tensor, parameters: object.parameters))
            }
            guard cursor == body.count else {
                throw V2CodecError(.binaryData, "\(body.count - cursor) bytes after the JSON are not claimed by any input's binary_data_size")
            }

            var requested: [V2RequestedOutput] = []
            var seenOutputs = Set<String>()
            for (name, p) in outputs {
                guard seenOutputs.insert(name).inserted else {
                    throw V2CodecError(.duplicateName, "output '\(name)' is requested more than once")
                }
                var binary = binaryDefault
                if let flag = p["binary_data"] {
                    guard let b = flag.boolValue else { throw V2CodecError(.invalidField, "output '\(name)': binary_data must be a boolean") }
                    binary = b
                }
                let classification = try p.integer("classification", in: 1...Int64(Int32.max), expected: "a positive integer",
                                                   label: "output '\(name)'")
                if p["shared_memory_region"] != nil {
                    throw V2CodecError(.unsupported, "output '\(name)': shared memory is not supported")
                }
                requested.append(V2RequestedOutput(name: name, binary: binary, classification: classification))
            }
            return V2InferenceRequest(id: id, parameters: parameters, inputs: inputs, requestedOutputs: requested,
                                      binaryOutputsByDefault: binaryDefault)
        }
    }
}

extension String {
    /// The string without leading/trailing spaces and tabs.
    func trimmingASCIIWhitespace() -> String {
        let u = utf8
        guard let first = u.firstIndex(where: { $0 != 0x20 && $0 != 0x09 }) else { return "" }
        let last = u.lastIndex(where: { $0 != 0x20 && $0 != 0x09 })!
        return String(self[first...last])
    }
}
