import Infrastructure
import Tensor
import Testing
@testable import Serving

private func floats(_ values: [Float], shape: [Int]) -> Tensor { Tensor(shape: shape, scalars: values) }

private func key(model: String = "m", version: Int = 1, load: UInt64 = 7, _ inputs: [String: Tensor], outputs: [String] = ["y"]) -> ResponseCacheKey {
    InferenceCache.key(model: model, version: version, load: load, inputs: inputs, outputs: outputs)!
}

/// The response cache key over real requests: any change to what decides the outputs changes it, nothing else does.
@Suite struct InferenceCacheKeyTests {
    let x = floats([1, 2, 3, 4], shape: [1, 4])
    let z = Tensor(shape: [2], scalars: [Int64(5), 6])

    @Test func identicalRequestsShareAKeyWhateverTheInputOrder() {
        var reordered: [String: Tensor] = [:]
        reordered["z"] = z
        reordered["x"] = x
        #expect(key(["x": x, "z": z]) == key(reordered))
        #expect(key(["x": floats([1, 2, 3, 4], shape: [1, 4])]) == key(["x": x]), "equal bytes in another tensor")
    }

    @Test func everyPartOfTheRequestChangesTheKey() {
        let base = key(["x": x, "z": z])
        #expect(base != key(["x": floats([1, 2, 3, 5], shape: [1, 4]), "z": z]), "one byte")
        #expect(base != key(["x": x.reshaped([2, 2]), "z": z]), "the shape, same bytes")
        let sameBytesAsInt32 = Tensor(dtype: .int32, shape: [1, 4], storage: x.storage)
        #expect(base != key(["x": sameBytesAsInt32, "z": z]), "the datatype, same bytes")
        #expect(base != key(["w": x, "z": z]), "an input's name")
        #expect(base != key(["x": x]), "an input fewer")
        #expect(base != key(version: 2, ["x": x, "z": z]), "the version")
        #expect(base != key(load: 8, ["x": x, "z": z]), "the load of the version (a replacement)")
        #expect(base != key(model: "n", ["x": x, "z": z]), "the model")
        #expect(base != key(["x": x, "z": z], outputs: []), "the requested outputs")
        #expect(key(["x": x], outputs: ["a", "b"]) != key(["x": x], outputs: ["b", "a"]), "their order (the response's order)")
    }

    @Test func bytesElementsAreLengthPrefixed() {
        let split1 = Tensor(shape: [2], strings: [Array("ab".utf8), Array("c".utf8)])
        let split2 = Tensor(shape: [2], strings: [Array("a".utf8), Array("bc".utf8)])
        #expect(key(["img": split1]) != key(["img": split2]))
        #expect(key(["img": split1]) == key(["img": Tensor(shape: [2], strings: [Array("ab".utf8), Array("c".utf8)])]))
    }

    @Test func storedOutputsAreCopiedIntoTheirOwnStorage() {
        let batch = floats((0..<16).map(Float.init), shape: [4, 4])
        let row = batch.rows(1..<2).detachedCopy()
        #expect(row.storage.byteCount == 16 && row.byteOffset == 0 && row.storage !== batch.storage)
        #expect(row.scalars(as: Float.self) == [4, 5, 6, 7] && row.shape == [1, 4])
    }
}

/// The cache on `Inference.infer` with a fake model: hits skip the batcher, echo the current id and count in the stats.
@Suite struct InferenceCacheTests {
    private func inference(_ repo: TempRepository = TempRepository(), bytes: Int = 1 << 20, metrics: Metrics? = nil) -> Inference {
        let registry = ModelRegistry(repositoryPath: repo.path, loader: fakeLoader())
        return Inference(registry: registry, workers: BlockingExecutor(name: "cache-test", threads: 1),
                         cache: InferenceCache(capacityBytes: bytes, metrics: metrics))
    }

    private func request(_ marker: Float, id: String) -> InferenceRequest {
        InferenceRequest(model: "m", id: id, inputs: ["x": rowsTensor(rows: 1, marker: marker)])
    }

    @Test func aRepeatedRequestIsAHitThatSkipsTheBatcher() async throws {
        let runtime = ScaleRuntime(scale: 2)
        let served = try makeVersion(runtime, config: #"{"response_cache": {"enable": true}}"#)
        let metrics = Metrics(includeProcessMetrics: false)
        let inference = inference(metrics: metrics)
        let first = try await inference.infer(request(1, id: "first"), on: served)
        let second = try await inference.infer(request(1, id: "second"), on: served)
        #expect(first.cache == .miss && second.cache == .hit)
        #expect(second.id == "second", "a hit echoes the current request's id")
        #expect(second.outputs.map(\.name) == first.outputs.map(\.name))
        #expect(second.outputs[0].tensor.scalars(as: Float.self) == first.outputs[0].tensor.scalars(as: Float.self))
        #expect(runtime.batches.withLock { $0 } == [1], "the hit never reached the model")
        let other = try await inference.infer(request(2, id: "other"), on: served)
        #expect(other.cache == .miss && runtime.batches.withLock { $0 } == [1, 1])

        let stats = served.statistics
        #expect(stats.cacheHit.count == 1 && stats.cacheMiss.count == 2)
        #expect(stats.success.count == 3 && stats.inferenceCount == 3 && stats.executionCount == 2)
        let text = metrics.exposition()
        #expect(text.contains(#"osprey_cache_hits_total{model="m",version="1"} 1"#))
        #expect(text.contains(#"osprey_cache_misses_total{model="m",version="1"} 2"#))
        #expect(text.contains(#"osprey_cache_hit_duration_seconds_count{model="m",version="1"} 1"#))
    }

    @Test func aModelThatDoesNotEnableItIsNeverCached() async throws {
        let runtime = ScaleRuntime(scale: 2)
        let served = try makeVersion(runtime)
        let inference = inference()
        for id in ["a", "b"] {
            let response = try await inference.infer(request(1, id: id), on: served)
            #expect(response.cache == nil)
        }
        #expect(runtime.batches.withLock { $0 } == [1, 1])
        #expect(inference.cache?.store.count == 0)
    }

    @Test func aReplacedVersionNeverAnswersFromItsPredecessorsEntries() async throws {
        let repo = TempRepository()
        repo.setConfig("m", #"{"response_cache": {"enable": true}}"#)
        repo.addVersion("m", 1, "scale=2")
        let inference = inference(repo)
        await inference.registry.loadAll()
        let old = try inference.registry.resolve(model: "m")
        #expect(try await inference.infer(request(1, id: "a")).cache == .miss)
        let hit = try await inference.infer(request(1, id: "b"))
        #expect(hit.cache == .hit && hit.outputs[0].tensor.scalars(as: Float.self) == [2, 2, 2, 2])

        try await inference.registry.putVersion(model: "m", version: 1, bytes: Array("scale=3".utf8), replace: true)
        let replaced = try await inference.infer(request(1, id: "c"))
        #expect(replaced.cache == .miss, "the same version number, loaded again, starts with no entries")
        #expect(replaced.outputs[0].tensor.scalars(as: Float.self) == [3, 3, 3, 3])
        #expect(inference.cache?.store.count == 1, "the predecessor's entry was dropped")
        let again = try await inference.infer(request(1, id: "d"))
        #expect(again.cache == .hit && again.outputs[0].tensor.scalars(as: Float.self) == [3, 3, 3, 3])

        // A request still running on the old load neither reads nor writes the cache.
        let late = try await inference.infer(request(1, id: "e"), on: old)
        #expect(late.cache == nil && late.outputs[0].tensor.scalars(as: Float.self) == [2, 2, 2, 2])
        #expect(inference.cache?.store.count == 1)
    }

    @Test func theLeastRecentlyUsedEntryIsEvictedBySize() async throws {
        let served = try makeVersion(ScaleRuntime(scale: 2), config: #"{"response_cache": {"enable": true}}"#)
        let entry = InferenceCache.entryBytes([NamedTensor(name: "y", tensor: rowsTensor(rows: 1, marker: 0))])
        let metrics = Metrics(includeProcessMetrics: false)
        let inference = inference(bytes: 2 * entry + entry / 2, metrics: metrics)
        _ = try await inference.infer(request(1, id: "a"), on: served)
        _ = try await inference.infer(request(2, id: "b"), on: served)
        #expect(try await inference.infer(request(1, id: "a"), on: served).cache == .hit)  // 2 is now the oldest
        _ = try await inference.infer(request(3, id: "c"), on: served)
        #expect(inference.cache?.store.evictions == 1 && inference.cache?.store.heldBytes == 2 * entry)
        #expect(metrics.exposition().contains("osprey_cache_evictions_total 1"))
        #expect(try await inference.infer(request(1, id: "a"), on: served).cache == .hit)
        #expect(try await inference.infer(request(3, id: "c"), on: served).cache == .hit)
        #expect(try await inference.infer(request(2, id: "b"), on: served).cache == .miss, "the least recently used entry went")
    }
}
