import Engine
import HTTP
import Testing
import Tensor
@testable import API

/// Builds a binary-extension body: JSON header then the given binary chunks.
func binaryBody(_ json: String, _ chunks: [[UInt8]]) -> (body: [UInt8], headers: HTTPHeaders) {
    let header = Array(json.utf8)
    return (header + chunks.flatMap { $0 }, [V2Codec.inferenceHeaderContentLength: String(header.count)])
}

func bytesOf<T>(_ values: [T]) -> [UInt8] {
    values.withUnsafeBytes { Array($0) }
}

private func decodeError(_ body: [UInt8], _ headers: HTTPHeaders = HTTPHeaders()) -> V2CodecError? {
    do {
        _ = try V2Codec.decodeInferRequest(body: body, headers: headers)
        return nil
    } catch let error as V2CodecError {
        return error
    } catch {
        Issue.record("unexpected \(error)")
        return nil
    }
}

private func decodeError(_ json: String) -> V2CodecError? { decodeError(Array(json.utf8)) }

@Suite struct V2RequestTests {
    @Test func decodesJSONRequest() throws {
        let json = #"""
        {"id": "42", "parameters": {"binary_data_output": true},
         "inputs": [{"name": "x", "shape": [1, 3], "datatype": "FP32", "data": [[0.5, -1, 2e3]]},
                    {"name": "ids", "shape": [2], "datatype": "INT64", "data": [7, -8]},
                    {"name": "s", "shape": [1], "datatype": "BYTES", "data": ["hi"]}],
         "outputs": [{"name": "y", "parameters": {"binary_data": false, "classification": 3}}, {"name": "z"}]}
        """#
        let request = try V2Codec.decodeInferRequest(body: Array(json.utf8), headers: HTTPHeaders())
        #expect(request.id == "42")
        #expect(request.binaryOutputsByDefault)
        #expect(request.inputs.map(\.name) == ["x", "ids", "s"])
        #expect(request.inputs[0].tensor.shape == [1, 3])
        #expect(request.inputs[0].tensor.scalars(as: Float.self) == [0.5, -1, 2000])
        #expect(request.inputs[1].tensor.scalars(as: Int64.self) == [7, -8])
        #expect(request.inputs[2].tensor.strings == [Array("hi".utf8)])
        #expect(request.requestedOutputs == [V2RequestedOutput(name: "y", binary: false, classification: 3),
                                             V2RequestedOutput(name: "z", binary: true)])
    }

    @Test func dataBeforeShapeAndDatatypeStillDecodes() throws {
        let json = #"{"inputs": [{"data": [1, 2, 3, 4], "name": "x", "datatype": "INT32", "shape": [2, 2]}]}"#
        let request = try V2Codec.decodeInferRequest(body: Array(json.utf8), headers: HTTPHeaders())
        #expect(request.inputs[0].tensor.scalars(as: Int32.self) == [1, 2, 3, 4])
        #expect(request.inputs[0].tensor.shape == [2, 2])
    }

    @Test func decodesBinaryRequest() throws {
        let floats: [Float] = [1, 2, 3, 4, 5, 6]
        let strings = [UInt8]([2, 0, 0, 0]) + Array("ab".utf8) + [0, 0, 0, 0]
        let (body, headers) = binaryBody(#"""
            {"inputs": [{"name": "x", "shape": [2, 3], "datatype": "FP32", "parameters": {"binary_data_size": 24}},
                        {"name": "j", "shape": [1], "datatype": "INT8", "data": [5]},
                        {"name": "s", "shape": [2], "datatype": "BYTES", "parameters": {"binary_data_size": 10}}]}
            """#, [bytesOf(floats), strings])
        let request = try V2Codec.decodeInferRequest(body: body, headers: headers)
        #expect(request.inputs[0].tensor.scalars(as: Float.self) == floats)
        #expect(request.inputs[1].tensor.scalars(as: Int8.self) == [5])
        #expect(request.inputs[2].tensor.strings == [Array("ab".utf8), []])
    }

    @Test func alignedBinaryTensorsViewTheBodyOthersAreCopied() throws {
        let floats: [Float] = (0..<64).map(Float.init)
        // Padding the JSON moves the tensor's first byte: on a 4-byte boundary of the body's buffer it is viewed there.
        var views = 0
        for padding in 0..<4 {
            let json = #"{"inputs": [{"name": "x", "shape": [8, 8], "datatype": "FP32", "parameters": {"binary_data_size": 256}}]}"#
                + String(repeating: " ", count: padding)
            let (body, headers) = binaryBody(json, [bytesOf(floats)])
            var tensor = try V2Codec.decodeInferRequest(body: body, headers: headers).inputs[0].tensor
            #expect(tensor.scalars(as: Float.self) == floats)
            let aligned = body.withUnsafeBytes { Int(bitPattern: $0.baseAddress! + json.utf8.count) % 4 == 0 }
            #expect((tensor.storage.byteCount == body.count) == aligned, "a view exactly when aligned (padding \(padding))")
            if aligned {
                views += 1
                #expect(tensor.byteOffset == json.utf8.count)
                // Writing to the view copies it first: the body stays as it was.
                tensor.withUnsafeMutableBytes { $0.storeBytes(of: Float(-1), as: Float.self) }
                #expect(tensor.scalars(as: Float.self).first == -1)
                #expect(body.suffix(256).withUnsafeBytes { Array($0.bindMemory(to: Float.self)) } == floats)
            }
        }
        #expect(views >= 1)
    }

    @Test func shapeAndDataLengthMustAgree() {
        let e = decodeError(#"{"inputs": [{"name": "x", "shape": [2, 2], "datatype": "FP32", "data": [1, 2, 3]}]}"#)
        #expect(e?.kind == .shapeMismatch)
        #expect(e?.message.contains("input 'x'") == true)
        #expect(e?.message.contains("3 elements, shape [2, 2] needs 4") == true)
    }

    @Test func hugeShapeIsRejectedBeforeAllocating() {
        let e = decodeError(#"{"inputs": [{"name": "x", "shape": [1000000000, 1000], "datatype": "FP32", "data": [1]}]}"#)
        #expect(e?.kind == .shapeMismatch)
        let overflow = decodeError(#"{"inputs": [{"name": "x", "shape": [9223372036854775807, 4], "datatype": "FP32", "data": [1]}]}"#)
        #expect(overflow?.kind == .invalidField)
    }

    @Test func badShapes() {
        #expect(decodeError(#"{"inputs": [{"name": "x", "shape": [-1], "datatype": "FP32", "data": []}]}"#)?.message.contains("negative") == true)
        #expect(decodeError(#"{"inputs": [{"name": "x", "shape": [1.5], "datatype": "FP32", "data": [1]}]}"#)?.kind == .invalidField)
        #expect(decodeError(#"{"inputs": [{"name": "x", "shape": "3", "datatype": "FP32", "data": [1]}]}"#)?.kind == .invalidField)
    }

    @Test func wrongAndUnknownDatatypes() {
        let unknown = decodeError(#"{"inputs": [{"name": "x", "shape": [1], "datatype": "FLOAT32", "data": [1]}]}"#)
        #expect(unknown?.kind == .datatypeMismatch)
        #expect(unknown?.message.contains("unknown datatype 'FLOAT32'") == true)
        let mismatch = decodeError(#"{"inputs": [{"name": "x", "shape": [1], "datatype": "INT32", "data": [1.5]}]}"#)
        #expect(mismatch?.message.contains("expected an integer for INT32") == true)
    }

    @Test func missingAndDuplicateFields() {
        #expect(decodeError(#"{"inputs": []}"#)?.kind == .missingField)
        #expect(decodeError(#"{}"#)?.kind == .missingField)
        #expect(decodeError(#"{"inputs": [{"shape": [1], "datatype": "FP32", "data": [1]}]}"#)?.kind == .missingField)
        #expect(decodeError(#"{"inputs": [{"name": "x", "shape": [1], "datatype": "FP32"}]}"#)?.kind == .missingField)
        let dup = decodeError(#"{"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [1]}, {"name": "x", "shape": [1], "datatype": "FP32", "data": [2]}]}"#)
        #expect(dup?.kind == .duplicateName)
        #expect(decodeError(#"{"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [1]}], "outputs": [{"name": "y"}, {"name": "y"}]}"#)?.kind == .duplicateName)
        #expect(decodeError(#"{"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [1]}], "outputs": [{"name": "y", "parameters": {"classification": 0}}]}"#)?.kind == .invalidField)
    }

    @Test func malformedJSONIsReportedWithOffset() {
        let e = decodeError(#"{"inputs": [{"name": "x",}]}"#)
        #expect(e?.kind == .invalidJSON)
        #expect(e?.message.contains("at byte 25") == true, "\(String(describing: e))")
        #expect(decodeError(#"{"inputs": [}"#)?.kind == .invalidField)
        #expect(decodeError("[1]")?.kind == .invalidJSON)
    }

    @Test func headerLengthBeyondBody() {
        let e = decodeError(Array("{}".utf8), [V2Codec.inferenceHeaderContentLength: "10"])
        #expect(e?.kind == .binaryData)
        #expect(e?.message.contains("only 2 bytes") == true)
        #expect(decodeError(Array("{}".utf8), [V2Codec.inferenceHeaderContentLength: "-1"])?.kind == .binaryData)
        #expect(decodeError(Array("{}".utf8), [V2Codec.inferenceHeaderContentLength: "abc"])?.kind == .binaryData)
    }

    @Test func binarySizeMismatches() {
        let json = #"{"inputs": [{"name": "x", "shape": [2], "datatype": "FP32", "parameters": {"binary_data_size": 4}}]}"#
        let (short, h1) = binaryBody(json, [[0, 0, 0, 0]])
        #expect(decodeError(short, h1)?.message.contains("binary_data_size is 4 bytes, shape [2] of FP32 needs 8") == true)
        let json2 = #"{"inputs": [{"name": "x", "shape": [2], "datatype": "FP32", "parameters": {"binary_data_size": 8}}]}"#
        let (missing, h2) = binaryBody(json2, [[0, 0, 0, 0]])
        #expect(decodeError(missing, h2)?.message.contains("exceeds the 4 bytes") == true)
        let (extra, h3) = binaryBody(json2, [[UInt8](repeating: 0, count: 12)])
        #expect(decodeError(extra, h3)?.message.contains("4 bytes after the JSON are not claimed") == true)
        let both = #"{"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [1], "parameters": {"binary_data_size": 4}}]}"#
        let (b4, h4) = binaryBody(both, [[0, 0, 0, 0]])
        #expect(decodeError(b4, h4)?.kind == .invalidField)
    }

    @Test func binaryDataNeedsTheHeader() {
        let json = #"{"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "parameters": {"binary_data_size": 4}}]}"#
        let e = decodeError(Array(json.utf8) + [0, 0, 0, 0])
        #expect(e?.message.hasSuffix("(binary tensor data needs the Inference-Header-Content-Length header)") == true)
        let alone = decodeError(Array(json.utf8))
        #expect(alone?.message == "input 'x': has binary_data_size but the request has no Inference-Header-Content-Length header")
    }

    @Test func binaryBytesFraming() {
        let json = #"{"inputs": [{"name": "s", "shape": [2], "datatype": "BYTES", "parameters": {"binary_data_size": 9}}]}"#
        let (truncated, h) = binaryBody(json, [[5, 0, 0, 0, 65, 66, 67, 68, 69]])
        #expect(decodeError(truncated, h)?.message.contains("1 BYTES elements, shape [2] needs 2") == true)
        let json2 = #"{"inputs": [{"name": "s", "shape": [1], "datatype": "BYTES", "parameters": {"binary_data_size": 6}}]}"#
        let (overlong, h2) = binaryBody(json2, [[9, 0, 0, 0, 65, 66]])
        #expect(decodeError(overlong, h2)?.message.contains("declares 9 bytes") == true)
    }

    @Test func boolBinaryMustBeZeroOrOne() {
        let json = #"{"inputs": [{"name": "b", "shape": [2], "datatype": "BOOL", "parameters": {"binary_data_size": 2}}]}"#
        let (body, h) = binaryBody(json, [[1, 2]])
        #expect(decodeError(body, h)?.kind == .invalidField)
    }

    @Test func sharedMemoryIsUnsupported() {
        let e = decodeError(#"{"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "parameters": {"shared_memory_region": "r"}}]}"#)
        #expect(e?.kind == .unsupported)
    }
}

@Suite struct V2DuplicateKeyTests {
    @Test func duplicateKeysAreRejected() {
        for json in [#"{"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [1], "data": [2]}]}"#,
                     #"{"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [1]}], "inputs": []}"#] {
            do {
                _ = try V2Codec.decodeInferRequest(body: Array(json.utf8), headers: HTTPHeaders())
                Issue.record("accepted \(json)")
            } catch let error as V2CodecError {
                #expect(error.kind == .invalidJSON && error.message.contains("duplicate key"))
            } catch { Issue.record("\(error)") }
        }
    }
}
