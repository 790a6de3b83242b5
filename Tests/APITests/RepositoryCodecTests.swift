import Serving
import Testing
@testable import API

@Suite struct RepositoryCodecTests {
    @Test func defaultVersionRequest() throws {
        #expect(try RepositoryCodec.decodeDefaultVersionRequest(Array(#"{"version": "2"}"#.utf8)) == 2)
        #expect(try RepositoryCodec.decodeDefaultVersionRequest(Array(#"{"version": 17}"#.utf8)) == 17)
        for bad in [#"{"version": "0"}"#, #"{"version": "x"}"#, #"{"version": 1.5}"#, #"{}"#, #"[]"#, "{", #"{"version": "-3"}"#] {
            #expect(throws: APIError.self, "\(bad)") { try RepositoryCodec.decodeDefaultVersionRequest(Array(bad.utf8)) }
        }
    }

    @Test func indexRequest() throws {
        #expect(try RepositoryCodec.decodeIndexRequest([]) == false)
        #expect(try RepositoryCodec.decodeIndexRequest(Array(#"{"ready": true}"#.utf8)) == true)
        #expect(throws: APIError.self) { try RepositoryCodec.decodeIndexRequest(Array(#"{"ready": 1}"#.utf8)) }
    }

    @Test func encodedBodies() throws {
        let index = try JSONValue.parse(RepositoryCodec.encodeIndex([
            ModelIndexEntry(name: "m", version: 2, state: .ready, reason: nil),
            ModelIndexEntry(name: "n", version: nil, state: .unavailable, reason: "bad onnx"),
        ]).body)
        #expect(index == .array([
            .object(["name": .string("m"), "version": .string("2"), "state": .string("READY")]),
            .object(["name": .string("n"), "state": .string("UNAVAILABLE"), "reason": .string("bad onnx")]),
        ]))
        var s = ModelStatistics(name: "m", version: 1)
        s.inferenceCount = 5
        var batch = BatchStatistics(batchSize: 4)
        batch.computeInfer = DurationStatistic(count: 1, nanoseconds: 900)
        s.batchStatistics = [batch]
        let stats = try JSONValue.parse(RepositoryCodec.encodeStatistics([s]).body)
        #expect(stats["model_stats"]?.arrayValue?[0]["inference_count"] == .integer(5))
        #expect(stats["model_stats"]?.arrayValue?[0]["batch_stats"]?.arrayValue?[0]["compute_infer"]?["ns"] == .integer(900))
    }
}
