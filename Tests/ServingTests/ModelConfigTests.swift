import XCTest
@testable import Serving

final class ModelConfigTests: XCTestCase {
    private func parse(_ json: String) throws -> ModelConfig { try ModelConfig(json: Array(json.utf8)) }

    private func assertInvalid(_ json: String, key: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try parse(json), file: file, line: line) { error in
            guard case ServingError.invalidConfig(let gotKey, let expected, let got) = error else {
                return XCTFail("expected invalidConfig, got \(error)", file: file, line: line)
            }
            XCTAssertEqual(gotKey, key, file: file, line: line)
            XCTAssertFalse(expected.isEmpty, file: file, line: line)
            XCTAssertFalse(got.isEmpty, file: file, line: line)
        }
    }

    func testDefaults() throws {
        let config = try parse("{}")
        XCTAssertNil(config.maxBatchSize)
        XCTAssertEqual(config.effectiveMaxBatchSize(batchDimensionIsDynamic: true), 32)
        XCTAssertEqual(config.effectiveMaxBatchSize(batchDimensionIsDynamic: false), 1)
        XCTAssertEqual(config.versionPolicy, .latest(count: 1))
        XCTAssertEqual(config.dynamicBatching, ModelConfig.DynamicBatching())
        XCTAssertEqual(config.dynamicBatching.maxQueueDelayMicroseconds, 0)
        XCTAssertEqual(config.dynamicBatching.maxQueueSize, 256)
        XCTAssertNil(config.outputsAreProbabilities)
        XCTAssertNil(config.image)
    }

    func testFullConfig() throws {
        let config = try parse("""
        {"max_batch_size": 8,
         "dynamic_batching": {"max_queue_delay_microseconds": 500, "preferred_batch_size": [4, 8],
                              "max_queue_size": 16, "default_timeout_microseconds": 2000},
         "version_policy": {"specific": {"versions": [1, 3]}},
         "output": {"probabilities": true},
         "image": {"width": 224, "height": 224, "mean": [0.485, 0.456, 0.406], "layout": "nchw"}}
        """)
        XCTAssertEqual(config.maxBatchSize, 8)
        XCTAssertEqual(config.effectiveMaxBatchSize(batchDimensionIsDynamic: true), 8)
        XCTAssertEqual(config.dynamicBatching.maxQueueDelayMicroseconds, 500)
        XCTAssertEqual(config.dynamicBatching.preferredBatchSizes, [4, 8])
        XCTAssertEqual(config.dynamicBatching.maxQueueSize, 16)
        XCTAssertEqual(config.dynamicBatching.defaultTimeoutMicroseconds, 2000)
        XCTAssertEqual(config.versionPolicy, .specific([1, 3]))
        XCTAssertEqual(config.outputsAreProbabilities, true)
        guard case .object(let image)? = config.image else { return XCTFail("image section kept") }
        XCTAssertEqual(image["width"], .number(224))
        XCTAssertEqual(image["layout"], .string("nchw"))
        XCTAssertEqual(image["mean"], .array([.number(0.485), .number(0.456), .number(0.406)]))
        let object = try XCTUnwrap(config.imageJSONObject)
        XCTAssertEqual(object["width"] as? Double, 224)
        XCTAssertEqual(object["layout"] as? String, "nchw")
        XCTAssertEqual(object["mean"] as? [Double], [0.485, 0.456, 0.406])
    }

    func testVersionPolicies() throws {
        XCTAssertEqual(try parse(#"{"version_policy": {"latest": {"num_versions": 2}}}"#).versionPolicy, .latest(count: 2))
        XCTAssertEqual(try parse(#"{"version_policy": {"latest": {}}}"#).versionPolicy, .latest(count: 1))
        XCTAssertEqual(try parse(#"{"version_policy": {"all": {}}}"#).versionPolicy, .all)
        XCTAssertEqual(ModelConfig.VersionPolicy.latest(count: 2).select(from: [1, 5, 3]), [5, 3])
        XCTAssertEqual(ModelConfig.VersionPolicy.all.select(from: [1, 5, 3]), [5, 3, 1])
        XCTAssertEqual(ModelConfig.VersionPolicy.specific([1, 4]).select(from: [1, 5, 3]), [1])
    }

    func testTritonStyleKeysAreTolerated() throws {
        let config = try parse(#"{"name": "resnet", "platform": "onnxruntime_onnx", "output": [{"name": "prob", "dims": [1000]}], "max_batch_size": 0}"#)
        XCTAssertNil(config.outputsAreProbabilities)
        XCTAssertEqual(config.effectiveMaxBatchSize(batchDimensionIsDynamic: true), 0)
    }

    func testBooleansAreNotNumbers() throws {
        assertInvalid(#"{"max_batch_size": true}"#, key: "max_batch_size")
        assertInvalid(#"{"output": {"probabilities": 1}}"#, key: "output.probabilities")
    }

    func testInstanceGroupCountsAddUp() throws {
        XCTAssertEqual(try parse("{}").instanceCount, 1, "one execution at a time by default")
        XCTAssertEqual(try parse(#"{"instance_group": [{"count": 2, "kind": "KIND_CPU"}]}"#).instanceCount, 2)
        XCTAssertEqual(try parse(#"{"instance_group": [{"count": 2}, {"kind": "KIND_AUTO"}]}"#).instanceCount, 3, "count defaults to 1")
        assertInvalid(#"{"instance_group": {"count": 2}}"#, key: "instance_group")
        assertInvalid(#"{"instance_group": []}"#, key: "instance_group")
        assertInvalid(#"{"instance_group": [3]}"#, key: "instance_group[]")
        assertInvalid(#"{"instance_group": [{"count": 0}]}"#, key: "instance_group[].count")
        assertInvalid(#"{"instance_group": [{"count": 1, "kind": "KIND_GPU"}]}"#, key: "instance_group[].kind")
    }

    func testInvalidConfigsNameTheKey() {
        assertInvalid("[1]", key: "(file)")
        assertInvalid("{not json", key: "(file)")
        assertInvalid(#"{"max_batch_size": "8"}"#, key: "max_batch_size")
        assertInvalid(#"{"max_batch_size": -1}"#, key: "max_batch_size")
        assertInvalid(#"{"max_batch_size": 2.5}"#, key: "max_batch_size")
        assertInvalid(#"{"dynamic_batching": 5}"#, key: "dynamic_batching")
        assertInvalid(#"{"dynamic_batching": {"max_queue_delay_microseconds": -5}}"#, key: "dynamic_batching.max_queue_delay_microseconds")
        assertInvalid(#"{"dynamic_batching": {"preferred_batch_size": 4}}"#, key: "dynamic_batching.preferred_batch_size")
        assertInvalid(#"{"dynamic_batching": {"preferred_batch_size": [0]}}"#, key: "dynamic_batching.preferred_batch_size")
        assertInvalid(#"{"max_batch_size": 4, "dynamic_batching": {"preferred_batch_size": [8]}}"#, key: "dynamic_batching.preferred_batch_size")
        assertInvalid(#"{"dynamic_batching": {"max_queue_size": 0}}"#, key: "dynamic_batching.max_queue_size")
        assertInvalid(#"{"version_policy": {"newest": {}}}"#, key: "version_policy")
        assertInvalid(#"{"version_policy": {"latest": {}, "all": {}}}"#, key: "version_policy")
        assertInvalid(#"{"version_policy": {"latest": {"num_versions": 0}}}"#, key: "version_policy.latest.num_versions")
        assertInvalid(#"{"version_policy": {"specific": {"versions": []}}}"#, key: "version_policy.specific.versions")
        assertInvalid(#"{"image": "yes"}"#, key: "image")
    }

    func testErrorMessageSaysExpectedAndGot() {
        XCTAssertThrowsError(try parse(#"{"max_batch_size": "8"}"#)) { error in
            XCTAssertEqual("\(error)", #"config key 'max_batch_size': expected an integer >= 0, got "8""#)
        }
    }

    func testModelNames() {
        for good in ["resnet50", "a", "my-model_v2.onnx", String(repeating: "x", count: 64), "..."] {
            XCTAssertTrue(ModelRepository.isValidModelName(good), good)
        }
        for bad in ["", ".", "..", "a/b", "../etc", "a b", String(repeating: "x", count: 65), "naïve", "a\0"] {
            XCTAssertFalse(ModelRepository.isValidModelName(bad), bad)
        }
        XCTAssertEqual(ModelRepository.version(fromDirectoryName: "12"), 12)
        XCTAssertNil(ModelRepository.version(fromDirectoryName: "0"))
        XCTAssertNil(ModelRepository.version(fromDirectoryName: "07"))
        XCTAssertNil(ModelRepository.version(fromDirectoryName: "-1"))
        XCTAssertNil(ModelRepository.version(fromDirectoryName: "v1"))
    }
}
