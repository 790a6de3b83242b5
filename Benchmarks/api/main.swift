// Decode throughput of V2 infer requests (JSON and binary extension) through Osprey's API codecs.
// Built and run by run.sh; reads the request bodies that make_requests.py wrote.
import API
import Foundation
import HTTP
import Tensor

func load(_ path: String) -> [UInt8] {
    guard let data = FileManager.default.contents(atPath: path) else { fatalError("missing \(path); run run.sh") }
    return [UInt8](data)
}

/// Best-of-`rounds` seconds per call of `body`, each round timing `iterations` calls.
func measure(rounds: Int = 5, iterations: Int, _ body: () throws -> Void) rethrows -> Double {
    var best = Double.infinity
    for _ in 0..<rounds {
        let start = DispatchTime.now().uptimeNanoseconds
        for _ in 0..<iterations { try body() }
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9 / Double(iterations)
        best = min(best, elapsed)
    }
    return best
}

let dir = CommandLine.arguments.count > 1 ? CommandLine.arguments[1] : "/tmp/osprey-api-bench"
let json = load("\(dir)/request.json")
let binary = load("\(dir)/request.bin")
let headerLength = String(decoding: load("\(dir)/request.bin.header"), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)

var checksum: Float = 0
let jsonSeconds = try measure(iterations: 10) {
    let request = try V2Codec.decodeInferRequest(body: json, headers: HTTPHeaders())
    checksum += request.inputs[0].tensor.withUnsafeBufferPointer(of: Float.self) { $0[1234] }
}
let binaryHeaders: HTTPHeaders = [V2Codec.inferenceHeaderContentLength: headerLength]
let binarySeconds = try measure(iterations: 200) {
    let request = try V2Codec.decodeInferRequest(body: binary, headers: binaryHeaders)
    checksum += request.inputs[0].tensor.withUnsafeBufferPointer(of: Float.self) { $0[1234] }
}
// Encoding the same tensor back as a JSON response (what a client asking for JSON outputs costs).
let tensor = try V2Codec.decodeInferRequest(body: binary, headers: binaryHeaders).inputs[0].tensor
var encodedBytes = 0
let encodeSeconds = measure(iterations: 10) {
    let response = V2Codec.encodeInferResponse(V2InferenceResponse(modelName: "m", modelVersion: "1",
                                                                   outputs: [V2Output(name: "y", tensor: tensor)]))
    encodedBytes = response.body.count
}
var digest: [UInt8] = []
let shaSeconds = measure(iterations: 5) { digest = SHA256Hash.hash(json) }
func mbps(_ bytes: Int, _ seconds: Double) -> String { String(format: "%.0f MB/s", Double(bytes) / seconds / 1e6) }
print(String(format: "osprey json_decode   %8.2f ms  %@  (%d bytes)", jsonSeconds * 1e3, mbps(json.count, jsonSeconds), json.count))
print(String(format: "osprey binary_decode %8.3f ms  %@  (%d bytes)", binarySeconds * 1e3, mbps(binary.count, binarySeconds), binary.count))
print(String(format: "osprey json_encode   %8.2f ms  %@  (%d bytes)", encodeSeconds * 1e3, mbps(encodedBytes, encodeSeconds), encodedBytes))
print(String(format: "osprey sha256        %8.2f ms  %@  (%d bytes)", shaSeconds * 1e3, mbps(json.count, shaSeconds), json.count))
print("checksum \(checksum) \(DigestHeader.hex(digest).prefix(8))")
