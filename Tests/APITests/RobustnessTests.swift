import HTTP
import Testing
@testable import API

/// Hostile bodies must fail with typed errors, never crash or hang.
@Suite struct RobustnessTests {
    private func decodeOrTypedError(_ body: [UInt8], _ headers: HTTPHeaders) {
        do {
            _ = try V2Codec.decodeInferRequest(body: body, headers: headers)
        } catch is V2CodecError {
        } catch {
            Issue.record("untyped error \(error)")
        }
    }

    @Test func everyTruncationAndByteFlipOfAJSONRequest() {
        let body = Array(#"{"id":"a","inputs":[{"name":"x","shape":[2,2],"datatype":"FP32","data":[[1.5,-2e-3],[3,"#.utf8)
            + Array(#"4]],"parameters":{"k":[1,{"z":null}]}},{"name":"s","shape":[1],"datatype":"BYTES","data":["\u00e9"]}],"outputs":[{"name":"y","parameters":{"classification":2}}]}"#.utf8)
        for cut in 0...body.count { decodeOrTypedError(Array(body[..<cut]), HTTPHeaders()) }
        let replacements: [UInt8] = [0x22, 0x5B, 0x5D, 0x7B, 0x7D, 0x2C, 0x3A, 0x30, 0x2D, 0x65, 0x5C, 0x00, 0xFF]
        for i in 0..<body.count {
            for r in replacements {
                var mutated = body
                mutated[i] = r
                decodeOrTypedError(mutated, HTTPHeaders())
            }
        }
    }

    @Test func everyTruncationOfABinaryRequest() {
        let (body, headers) = binaryBody(#"{"inputs":[{"name":"x","shape":[2],"datatype":"INT32","parameters":{"binary_data_size":8}},{"name":"s","shape":[1],"datatype":"BYTES","parameters":{"binary_data_size":7}}]}"#,
                                         [bytesOf([Int32(1), 2]), [3, 0, 0, 0, 97, 98, 99]])
        for cut in 0...body.count { decodeOrTypedError(Array(body[..<cut]), headers) }
        for i in 0..<body.count {
            var mutated = body
            mutated[i] ^= 0xFF
            decodeOrTypedError(mutated, headers)
        }
    }

    @Test func multipartMutationsNeverCrash() {
        let body = Array("pre\r\n--B \r\nContent-Disposition: form-data; name=\"a\"; filename=\"x\"\r\nContent-Type: image/png\r\n\r\nDATA\r\n--B--\r\n".utf8)
        for i in 0..<body.count {
            for r: UInt8 in [0x0D, 0x0A, 0x2D, 0x42, 0x22, 0x3B, 0x3A] {
                var mutated = body
                mutated[i] = r
                do { _ = try Multipart.parse(body: mutated, boundary: "B") } catch is MultipartError {} catch { Issue.record("\(error)") }
            }
        }
    }
}
