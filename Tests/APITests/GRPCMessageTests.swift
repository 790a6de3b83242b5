import Testing
import Tensor
@testable import API

/// ModelInferRequest/Response against bytes that Python's protobuf (tritonclient.grpc's service_pb2) produced.
@Suite struct GRPCMessageTests {
    private static func hex(_ text: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            bytes.append(UInt8(text[index..<next], radix: 16)!)
            index = next
        }
        return bytes
    }

    /// model "m" v2, id "req", parameters timeout=1000 and flag=true; INT32 a=[-1,300], FP32 b=[[1.5,-2]],
    /// BYTES c=["xy",""] in typed contents; output "out" with classification=2.
    static let typed = hex("0a016d1201321a03726571220a0a04666c616712020801220e0a0774696d656f7574120310e8072a1d0a01611205494e5433321a01022a0e120cffffffffffffffffff01ac022a190a01621204465033321a0201022a0a32080000c03f000000c02a150a0163120542595445531a01022a06420278794200321b0a036f757412140a0e636c617373696669636174696f6e12021002")
    /// model "m"; INT64 x=[1,-2,3] in raw_input_contents.
    static let raw = hex("0a016d2a0d0a01781205494e5436341a01033a180100000000000000feffffffffffffff0300000000000000")
    /// model "m" v1, id "q"; FP32 y=[[0.5, 2]] in raw_output_contents.
    static let response = hex("0a016d1201311a01712a0d0a01791204465033321a02010232080000003f00000040")

    @Test func typedContentsDecode() throws {
        let decoded = try GRPCInferRequestDecoder.decode(Self.typed)
        #expect(decoded.modelName == "m" && decoded.modelVersion == "2")
        let request = decoded.request
        #expect(request.id == "req")
        #expect(request.parameters["timeout"]?.intValue == 1000)
        #expect(request.parameters["flag"]?.boolValue == true)
        #expect(request.inputs.map(\.name) == ["a", "b", "c"])
        #expect(request.inputs[0].tensor.dtype == .int32 && request.inputs[0].tensor.shape == [2])
        request.inputs[0].tensor.withUnsafeBufferPointer(of: Int32.self) { #expect(Array($0) == [-1, 300]) }
        request.inputs[1].tensor.withUnsafeBufferPointer(of: Float.self) { #expect(Array($0) == [1.5, -2]) }
        #expect(request.inputs[1].tensor.shape == [1, 2])
        #expect(request.inputs[2].tensor.strings == [Array("xy".utf8), []])
        #expect(request.requestedOutputs == [V2RequestedOutput(name: "out", binary: true, classification: 2)])
    }

    @Test func rawContentsDecode() throws {
        let decoded = try GRPCInferRequestDecoder.decode(Self.raw)
        let tensor = decoded.request.inputs[0].tensor
        #expect(tensor.dtype == .int64 && tensor.shape == [3])
        tensor.withUnsafeBufferPointer(of: Int64.self) { #expect(Array($0) == [1, -2, 3]) }
    }

    @Test func responseEncodesAsProtobufDoes() {
        let response = V2InferenceResponse(modelName: "m", modelVersion: "1", id: "q",
                                           outputs: [V2Output(name: "y", tensor: Tensor(shape: [1, 2], scalars: [Float(0.5), 2]))])
        #expect(GRPCInferResponseEncoder.encode(response) == Self.response)
    }

    /// model "m" v1 with response parameters answered_by='["a/1","b/1"]', cascaded=false, first_score=0.25, n=-3
    /// (SerializeToString(deterministic=True): map keys sorted).
    static let responseParameters = hex("0a016d120131221e0a0b616e7377657265645f6279120f1a0d5b22612f31222c22622f31225d220e0a0863617363616465641202080022180a0b66697273745f73636f7265120921000000000000d03f22100a016e120b10fdffffffffffffffff01")

    @Test func responseParametersEncodeAsProtobufDoes() {
        let parameters: JSONObject = ["answered_by": .array([.string("a/1"), .string("b/1")]), "cascaded": .bool(false),
                                      "first_score": .double(0.25), "n": .integer(-3)]
        let response = V2InferenceResponse(modelName: "m", modelVersion: "1", parameters: parameters, outputs: [])
        #expect(GRPCInferResponseEncoder.encode(response) == Self.responseParameters)
    }

    @Test func everyTruncationIsATypedErrorNeverACrash() {
        for message in [Self.typed, Self.raw] {
            for length in 0..<message.count {
                do {
                    _ = try GRPCInferRequestDecoder.decode(Array(message[..<length]))
                } catch is V2CodecError {
                    continue
                } catch {
                    Issue.record("prefix \(length): unexpected \(error)")
                }
            }
        }
    }

    @Test func contentsMustMatchTheShapeAndTheDatatype() throws {
        var writer = WireWriterShim()
        // FP32 input of shape [3] with two fp32_contents values.
        writer.input(name: "x", datatype: "FP32", shape: [3]) { $0.packedFloats(6, [1, 2]) }
        #expect(throws: V2CodecError.self) { try GRPCInferRequestDecoder.decode(writer.bytes) }
        var wrongMember = WireWriterShim()
        wrongMember.input(name: "x", datatype: "FP32", shape: [1]) { $0.packedInt64(3, [1]) }
        #expect(throws: V2CodecError(.datatypeMismatch, "input 'x': FP32 data goes in fp32_contents, got int64_contents")) {
            try GRPCInferRequestDecoder.decode(wrongMember.bytes)
        }
        var tooBig = WireWriterShim()
        tooBig.input(name: "x", datatype: "INT8", shape: [1]) { $0.packedInt64(2, [300]) }
        #expect(throws: V2CodecError.self) { try GRPCInferRequestDecoder.decode(tooBig.bytes) }
    }

    @Test func decodedBytesAreClaimedAgainstTheLimits() {
        var writer = WireWriterShim()
        writer.input(name: "x", datatype: "FP32", shape: [1000, 1000]) { $0.packedFloats(6, [1]) }
        #expect(throws: V2CodecError.self) {
            try GRPCInferRequestDecoder.decode(writer.bytes, limits: V2DecodeLimits(maxDecodedBytes: 1024))
        }
    }
}

import Protobuf

/// Builds small ModelInferRequests for the error tests.
private struct WireWriterShim {
    var writer = WireWriter()
    var bytes: [UInt8] { writer.bytes }

    mutating func input(name: String, datatype: String, shape: [Int64], contents: (inout WireWriter) -> Void) {
        writer.message(5) { input in
            input.string(1, name)
            input.string(2, datatype)
            input.packedInt64s(3, shape)
            input.message(5, contents)
        }
    }
}

private extension WireWriter {
    mutating func packedFloats(_ number: Int, _ values: [Float]) { values.withUnsafeBytes { packedFixed(number, $0) } }
    mutating func packedInt64(_ number: Int, _ values: [Int64]) { packedInt64s(number, values) }
}
