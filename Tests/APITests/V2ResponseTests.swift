import HTTP
import Testing
import Tensor
@testable import API

@Suite struct V2ResponseTests {
    private func response(binary: Bool) -> V2InferenceResponse {
        V2InferenceResponse(modelName: "m", modelVersion: "3", id: "r1", outputs: [
            V2Output(name: "probs", tensor: Tensor(shape: [1, 4], scalars: [Float(0.1), 0.7, -0.0, Float.leastNonzeroMagnitude]), binary: binary),
            V2Output(name: "ids", tensor: Tensor(shape: [2], scalars: [Int64.max, -1]), binary: false),
            V2Output(name: "names", tensor: Tensor(shape: [2], strings: [Array("a\"b".utf8), []]), binary: binary),
            V2Output(name: "flags", tensor: Tensor(shape: [2], scalars: [true, false]), binary: binary),
        ])
    }

    @Test func jsonResponseRoundTrips() throws {
        let encoded = V2Codec.encodeInferResponse(response(binary: false))
        #expect(encoded.headers["Content-Type"] == "application/json")
        #expect(encoded.headers[V2Codec.inferenceHeaderContentLength] == nil)
        let decoded = try V2Codec.decodeInferResponse(body: encoded.body, headers: encoded.headers)
        #expect(decoded.modelName == "m" && decoded.modelVersion == "3" && decoded.id == "r1")
        #expect(decoded.outputs[0].tensor.scalars(as: Float.self).map(\.bitPattern) == [Float(0.1), 0.7, -0.0, Float.leastNonzeroMagnitude].map(\.bitPattern))
        #expect(decoded.outputs[1].tensor.scalars(as: Int64.self) == [Int64.max, -1])
        #expect(decoded.outputs[2].tensor.strings == [Array("a\"b".utf8), []])
        #expect(decoded.outputs[3].tensor.scalars(as: Bool.self) == [true, false])
    }

    @Test func binaryResponseRoundTrips() throws {
        let encoded = V2Codec.encodeInferResponse(response(binary: true))
        #expect(encoded.headers["Content-Type"] == "application/octet-stream")
        let jsonLength = Int(encoded.headers[V2Codec.inferenceHeaderContentLength] ?? "")!
        let header = try JSONValue.parse(Array(encoded.body[..<jsonLength]))
        #expect(header["outputs"]?.arrayValue?[0]["parameters"]?["binary_data_size"] == .integer(16))
        #expect(header["outputs"]?.arrayValue?[0]["data"] == nil)
        #expect(header["outputs"]?.arrayValue?[2]["parameters"]?["binary_data_size"] == .integer(11))
        #expect(encoded.body.count == jsonLength + 16 + 11 + 2)
        let decoded = try V2Codec.decodeInferResponse(body: encoded.body, headers: encoded.headers)
        #expect(decoded.outputs.map(\.name) == ["probs", "ids", "names", "flags"])
        #expect(decoded.outputs[0].tensor.scalars(as: Float.self).map(\.bitPattern) == [Float(0.1), 0.7, -0.0, Float.leastNonzeroMagnitude].map(\.bitPattern))
        #expect(decoded.outputs[0].binary && !decoded.outputs[1].binary)
        #expect(decoded.outputs[2].tensor.strings == [Array("a\"b".utf8), []])
        #expect(decoded.outputs[3].tensor.scalars(as: Bool.self) == [true, false])
    }

    @Test func nonFiniteFloatsBecomeNullInJSON() throws {
        let encoded = V2Codec.encodeInferResponse(V2InferenceResponse(modelName: "m", modelVersion: "1", outputs: [
            V2Output(name: "y", tensor: Tensor(shape: [3], scalars: [Float.nan, .infinity, 1])),
        ]))
        let body = String(decoding: encoded.body, as: UTF8.self)
        #expect(body.contains(#""data":[null,null,1]"#))
    }

    @Test func requestedOutputsSelectAndClassify() throws {
        let logits = Tensor(shape: [2, 4], scalars: [Float(1), 5, 10, 4, 0.5, 0.25, 0.75, 0.125])
        let request = V2InferenceRequest(inputs: [], requestedOutputs: [V2RequestedOutput(name: "y", binary: false, classification: 2)])
        let outputs = try V2Codec.makeOutputs([(name: "y", tensor: logits)], request: request, labels: ["a", "b", "c", "d"])
        #expect(outputs.count == 1)
        #expect(outputs[0].tensor.shape == [2, 2])
        #expect(outputs[0].tensor.strings.map { String(decoding: $0, as: UTF8.self) }
                == ["10.000000:2:c", "5.000000:1:b", "0.750000:2:c", "0.500000:0:a"])
        // Unknown output names are refused before the model runs (ModelContractTests.unknownOutputsAreNamed).
        let all = V2InferenceRequest(inputs: [], binaryOutputsByDefault: true)
        let everything = try V2Codec.makeOutputs([(name: "y", tensor: logits), (name: "z", tensor: logits)], request: all)
        #expect(everything.map(\.name) == ["y", "z"] && everything.allSatisfy(\.binary))
    }

    @Test func topKOrdersTiesByIndexAndNaNLast() throws {
        let t = Tensor(shape: [5], scalars: [Float.nan, 2, 3, 3, 1])
        let ranked = try V2Codec.topK(t, k: 10)
        #expect(ranked[0].map(\.index) == [2, 3, 1, 4, 0])
    }

    @Test func classifyResponseShape() throws {
        let r = V2Codec.encodeClassifyResponse(modelName: "m", modelVersion: "1",
                                               classifications: [[Classification(index: 3, score: 0.5, label: "cat")]])
        let v = try JSONValue.parse(r.body)
        #expect(v["classifications"] == .array([.array([.object(["index": .integer(3), "label": .string("cat"), "score": .double(0.5)])])]))
    }

    @Test func metadataBodies() throws {
        let m = V2Codec.encodeModelMetadata(name: "mnv2", versions: ["1", "2"], inputs: [
            V2TensorMetadata(name: "input", dtype: .float32, dimensions: [.symbolic("N"), .fixed(3), .fixed(224), .fixed(224)]),
        ], outputs: [V2TensorMetadata(name: "out", datatype: .fp32, shape: [-1, 1000])])
        let v = try JSONValue.parse(m.body)
        #expect(v["platform"] == .string("onnx"))
        #expect(v["inputs"]?.arrayValue?[0]["shape"] == .array([.integer(-1), .integer(3), .integer(224), .integer(224)]))
        #expect(v["inputs"]?.arrayValue?[0]["datatype"] == .string("FP32"))
        let s = V2Codec.encodeServerMetadata(name: "osprey", version: "0.1", extensions: ["binary_tensor_data"])
        #expect(try JSONValue.parse(s.body)["extensions"] == .array([.string("binary_tensor_data")]))
    }
}
