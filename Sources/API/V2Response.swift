import HTTP
import Serving
import Tensor

/// An inference response ready to encode.
public struct V2InferenceResponse: Sendable {
    /// Model name.
    public var modelName: String
    /// Version that served the request (V2 sends it as a string).
    public var modelVersion: String
    /// The request's id, echoed.
    public var id: String?
    /// Response-level parameters.
    public var parameters: JSONObject
    /// Output tensors in response order.
    public var outputs: [V2Output]
    /// Whether the response cache answered (`X-Cache` on HTTP); nil when the model's cache is off.
    public var cache: CacheOutcome? = nil

    /// A response value.
    public init(modelName: String, modelVersion: String, id: String? = nil, parameters: JSONObject = JSONObject(), outputs: [V2Output]) {
        self.modelName = modelName
        self.modelVersion = modelVersion
        self.id = id
        self.parameters = parameters
        self.outputs = outputs
    }
}

/// One response output and how to send it.
public struct V2Output: Sendable {
    /// Output name.
    public var name: String
    /// Data (BYTES tensors for classification results).
    public var tensor: Tensor
    /// Send as binary extension data after the JSON.
    public var binary: Bool
    /// Extra output parameters (binary_data_size is added by the encoder).
    public var parameters: JSONObject

    /// An output value.
    public init(name: String, tensor: Tensor, binary: Bool = false, parameters: JSONObject = JSONObject()) {
        self.name = name
        self.tensor = tensor
        self.binary = binary
        self.parameters = parameters
    }
}

extension V2Codec {
    /// Shapes what the model produced as the request asked: `produced` holds the requested outputs in request order
    /// (every output when none were named), as `Inference.infer` returns them, so names are not checked again here.
    ///
    /// No requested outputs means all of them, binary per `binary_data_output`. Classification requests become BYTES
    /// tensors of `value:index[:label]` ranked with `labels`.
    public static func makeOutputs(_ produced: [(name: String, tensor: Tensor)], request: V2InferenceRequest, labels: [String] = []) throws -> [V2Output] {
        if request.requestedOutputs.isEmpty {
            return produced.map { V2Output(name: $0.name, tensor: $0.tensor, binary: request.binaryOutputsByDefault) }
        }
        precondition(produced.map(\.name) == request.requestedOutputs.map(\.name), "outputs differ from the ones requested")
        return try zip(request.requestedOutputs, produced).map { wanted, output in
            var tensor = output.tensor
            if let k = wanted.classification {
                tensor = try classificationTensor(tensor, top: k, labels: labels.isEmpty ? nil : labels, outputName: wanted.name)
            }
            return V2Output(name: wanted.name, tensor: tensor, binary: wanted.binary)
        }
    }

    /// Encodes a response: plain JSON, or JSON + binary tensors with `Inference-Header-Content-Length`.
    public static func encodeInferResponse(_ response: V2InferenceResponse) -> HTTPResponse {
        var writer = JSONWriter(capacity: 256 + response.outputs.reduce(0) { $0 + ($1.binary ? 64 : $1.tensor.count * 12) })
        var binaryParts: [V2Output] = []
        writer.beginObject()
        writer.key("model_name"); writer.string(response.modelName)
        writer.key("model_version"); writer.string(response.modelVersion)
        if let id = response.id { writer.key("id"); writer.string(id) }
        if !response.parameters.isEmpty { writer.key("parameters"); writer.value(.object(response.parameters)) }
        writer.key("outputs")
        writer.beginArray()
        for output in response.outputs {
            writer.beginObject()
            writer.key("name"); writer.string(output.name)
            writer.key("datatype"); writer.string(V2Datatype(output.tensor.dtype).rawValue)
            writer.key("shape")
            writer.beginArray()
            for d in output.tensor.shape { writer.int(d) }
            writer.endArray()
            var parameters = output.parameters
            if output.binary {
                parameters["binary_data_size"] = .integer(Int64(binarySize(of: output.tensor)))
                binaryParts.append(output)
            }
            if !parameters.isEmpty { writer.key("parameters"); writer.value(.object(parameters)) }
            if !output.binary {
                writer.key("data")
                writeTensorData(output.tensor, to: &writer)
            }
            writer.endObject()
        }
        writer.endArray()
        writer.endObject()
        if binaryParts.isEmpty { return .json(writer.bytes) }
        var body = writer.bytes
        let jsonCount = body.count
        body.reserveCapacity(jsonCount + binaryParts.reduce(0) { $0 + binarySize(of: $1.tensor) })
        for part in binaryParts { appendBinary(part.tensor, to: &body) }
        return HTTPResponse(status: 200, headers: [
            "Content-Type": "application/octet-stream",
            inferenceHeaderContentLength: String(jsonCount),
        ], body: body)
    }

    /// Bytes the binary extension uses for a tensor (BYTES: 4-byte length per element plus its bytes).
    public static func binarySize(of tensor: Tensor) -> Int {
        tensor.dtype == .string ? tensor.strings.reduce(0) { $0 + 4 + $1.count } : tensor.byteCount
    }

    /// Appends a tensor in binary extension layout.
    public static func appendBinary(_ tensor: Tensor, to body: inout [UInt8]) {
        if tensor.dtype == .string {
            for s in tensor.strings {
                let n = UInt32(s.count)
                body.append(contentsOf: [UInt8(n & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n >> 16 & 0xFF), UInt8(n >> 24)])
                body.append(contentsOf: s)
            }
        } else {
            tensor.withUnsafeBytes { body.append(contentsOf: $0) }
        }
    }

    /// Writes a tensor's elements as a flat JSON array.
    public static func writeTensorData(_ tensor: Tensor, to writer: inout JSONWriter) {
        writer.beginArray()
        switch tensor.dtype {
        case .float32: tensor.withUnsafeBufferPointer(of: Float.self) { for v in $0 { writer.float(v) } }
        case .float64: tensor.withUnsafeBufferPointer(of: Double.self) { for v in $0 { writer.double(v) } }
        case .int64: tensor.withUnsafeBufferPointer(of: Int64.self) { for v in $0 { writer.int(v) } }
        case .int32: tensor.withUnsafeBufferPointer(of: Int32.self) { for v in $0 { writer.int(v) } }
        case .int16: tensor.withUnsafeBufferPointer(of: Int16.self) { for v in $0 { writer.int(v) } }
        case .int8, .int4, .int2: tensor.withUnsafeBufferPointer(of: Int8.self) { for v in $0 { writer.int(v) } }
        case .uint64: tensor.withUnsafeBufferPointer(of: UInt64.self) { for v in $0 { writer.int(v) } }
        case .uint32: tensor.withUnsafeBufferPointer(of: UInt32.self) { for v in $0 { writer.int(v) } }
        case .uint16: tensor.withUnsafeBufferPointer(of: UInt16.self) { for v in $0 { writer.int(v) } }
        case .uint8, .uint4, .uint2, .float8e4m3fn, .float8e4m3fnuz, .float8e5m2, .float8e5m2fnuz, .float4e2m1, .float8e8m0:
            tensor.withUnsafeBufferPointer(of: UInt8.self) { for v in $0 { writer.int(v) } }
        case .bool: tensor.withUnsafeBytes { for v in $0 { writer.bool(v != 0) } }
        case .float16:
            tensor.withUnsafeBytes { raw in
                for i in 0..<tensor.count { writer.float(Float(raw.loadUnaligned(fromByteOffset: i * 2, as: Float16.self))) }
            }
        case .bfloat16:
            tensor.withUnsafeBytes { raw in
                for i in 0..<tensor.count {
                    writer.float(Float(bitPattern: UInt32(raw.loadUnaligned(fromByteOffset: i * 2, as: UInt16.self)) << 16))
                }
            }
        case .string:
            for s in tensor.strings { writer.string(bytes: s) }
        }
        writer.endArray()
    }

    /// Decodes an infer response (ours or another server's), JSON or binary extension.
    public static func decodeInferResponse(body: [UInt8], headers: HTTPHeaders) throws -> V2InferenceResponse {
        let jsonEnd = try jsonLength(headers: headers, bodyCount: body.count) ?? body.count
        return try body.withUnsafeBufferPointer { all in
            var reader = JSONReader(UnsafeBufferPointer(rebasing: all[..<jsonEnd]))
            var modelName: String?
            var modelVersion = ""
            var id: String?
            var parameters = JSONObject()
            var objects: [V2TensorObject] = []
            // Responses are read by clients of a server they chose: no per-request limits.
            var budget = V2DecodeBudget(.unlimited)
            do {
                try reader.beginObject("a response object")
                while let key = try reader.nextKey() {
                    switch key {
                    case "model_name": modelName = try reader.readValue().stringValue
                    case "model_version": modelVersion = try reader.readValue().stringValue ?? ""
                    case "id": id = try reader.readValue().stringValue
                    case "parameters": parameters = try reader.readValue().objectValue ?? JSONObject()
                    case "outputs":
                        try reader.beginArray("an outputs array")
                        while try reader.nextElement() {
                            objects.append(try reader.readV2TensorObject(role: "output", position: objects.count, jsonEnd: jsonEnd, budget: &budget))
                        }
                    default: try reader.skipValue()
                    }
                }
                try reader.expectEnd()
            } catch let error as JSONError {
                throw V2CodecError(.invalidJSON, "invalid JSON: \(error)")
            }
            guard let modelName else { throw V2CodecError(.missingField, "response has no 'model_name'") }
            var cursor = jsonEnd
            var outputs: [V2Output] = []
            for object in objects {
                let label = "output '\(object.name)'"
                if let t = object.tensor {
                    outputs.append(V2Output(name: object.name, tensor: t, parameters: object.parameters))
                } else if let size = object.binaryDataSize {
                    guard size <= body.count - cursor else {
                        throw V2CodecError(.binaryData, "\(label): binary_data_size \(size) exceeds the \(body.count - cursor) bytes left")
                    }
                    let t = try decodeBinaryTensor(UnsafeBufferPointer(rebasing: all[cursor..<(cursor + size)]), datatype: object.datatype,
                                                   shape: object.shape, count: object.count, label: label)
                    cursor += size
                    outputs.append(V2Output(name: object.name, tensor: t, binary: true, parameters: object.parameters))
                } else {
                    throw V2CodecError(.missingField, "\(label): has neither 'data' nor binary_data_size")
                }
            }
            guard cursor == body.count else {
                throw V2CodecError(.binaryData, "\(body.count - cursor) bytes after the JSON are not claimed by any output")
            }
            return V2InferenceResponse(modelName: modelName, modelVersion: modelVersion, id: id, parameters: parameters, outputs: outputs)
        }
    }
}
