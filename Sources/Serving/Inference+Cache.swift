import Infrastructure
import Tensor

// The response cache on the one request path. `Inference.infer` looks the request up once its version is resolved
// (before images are decoded or anything is queued) and stores the final response (after the cascade step).
//
// What is stored is the response's output tensors, not an encoded body: a hit is encoded for the current request, with
// its own id and its own `binary_data` and `classification` parameters (both applied by the codecs to these tensors).
// So the key covers exactly what decides the tensors: the model, its version and that version's load (a replaced
// version never matches its predecessor's entries), every input's name, datatype, shape and bytes in name order, and
// the requested outputs in request order. The timeout and the protocol change no tensor and are left out.

/// Whether a response came from the response cache.
public enum CacheOutcome: String, Sendable {
    /// Answered from the cache, without running the model.
    case hit
    /// Not in the cache: computed, then stored.
    case miss
}

/// What the response cache holds for one request: the final response and the rows it answers.
public struct CachedResponse: Sendable {
    /// The response as computed (every field the request path filled in), its outputs each in their own storage
    /// (never a window into a batch's buffer); a hit replaces only the id and the cache outcome.
    public var response: InferenceResponse
    /// Rows of the request (a hit counts them in `inference_count`, as the computed answer did).
    public var rows: Int
    /// For an answer with cascaded rows, the registry's routing generation when it was computed: those rows came from
    /// other models, so the entry stands only while no route changed (nil: the answer is the model's own).
    public var routingGeneration: UInt64? = nil
}

/// The response cache shared by every model that enables it (`--cache-bytes`), and the bookkeeping around it.
public final class InferenceCache: Sendable {
    /// The byte-bounded LRU of responses.
    public let store: ResponseCache<CachedResponse>
    /// The newest load seen per model and version.
    private let newestLoads = Locked<[String: [Int: UInt64]]>([:])

    /// A cache of at most `capacityBytes`, recording the `osprey_cache_*` series in `metrics`.
    public init(capacityBytes: Int, metrics: Metrics?) {
        store = ResponseCache(capacityBytes: capacityBytes, metrics: metrics)
    }

    /// The key of `inputs` and `outputs` on `model`/`version` as loaded by `load`; nil when an input is not a plain tensor.
    static func key(model: String, version: Int, load: UInt64, inputs: [String: Tensor], outputs: [String]) -> ResponseCacheKey? {
        var builder = ResponseCacheKey.Builder(model: model, version: version)
        builder.addParameter("load", String(load))
        for name in inputs.keys.sorted() {
            let tensor = inputs[name]!
            guard tensor.container == nil else { return nil }
            let datatype = tensor.dtype.description
            if tensor.dtype == .string {
                builder.addInput(name: name, datatype: datatype, shape: tensor.shape, strings: tensor.strings)
            } else {
                tensor.withUnsafeBytes { builder.addInput(name: name, datatype: datatype, shape: tensor.shape, bytes: $0) }
            }
        }
        builder.addOutputs(outputs)
        return builder.finish()
    }

    /// Bytes one stored response is charged: its tensors plus a fixed share for the entry, key and names.
    static func entryBytes(_ outputs: [NamedTensor]) -> Int {
        outputs.reduce(256) { total, output in
            total + 64 + output.name.utf8.count + output.tensor.byteCount + output.tensor.strings.reduce(0) { $0 + 16 + $1.count }
        }
    }

    /// True when `served` is the newest load of its version seen here. The first request on a replacement drops its
    /// predecessor's entries (they could never match: the load is in the key, this frees their bytes); requests still
    /// running on the predecessor neither read nor write the cache.
    func admits(_ served: ServedVersion) -> Bool {
        let (admitted, replaced) = newestLoads.withLock { loads -> (Bool, Bool) in
            let newest = loads[served.name]?[served.version] ?? 0
            guard served.loadID >= newest else { return (false, false) }
            loads[served.name, default: [:]][served.version] = served.loadID
            return (true, newest != 0 && newest != served.loadID)
        }
        if replaced { store.removeAll(model: served.name, version: served.version) }
        return admitted
    }
}

/// One request's cache state between its lookup and its store.
struct CacheProbe {
    /// The request's key.
    let key: ResponseCacheKey
    /// The answer when the lookup hit.
    let hit: InferenceResponse?
    /// The registry's routing generation at the lookup.
    let routingGeneration: UInt64
}

extension Inference {
    /// Step 2 of `infer`: nil when the cache is off for this request (no server cache, the model does not enable it,
    /// a stale load); else the key and, on a hit, the stored response with this request's id.
    func cacheLookup(_ request: InferenceRequest, on served: ServedVersion) async throws -> CacheProbe? {
        guard let cache, served.config.responseCacheEnabled, cache.admits(served) else { return nil }
        let started = SystemClock.nanoseconds()
        let inputs = request.inputs
        let outputs = request.outputs
        let hash = { @Sendable in
            InferenceCache.key(model: served.name, version: served.version, load: served.loadID, inputs: inputs, outputs: outputs)
        }
        // Hashing runs at a few hundred MB/s: large inputs are hashed on a worker, off the cooperative pool.
        let inputBytes = inputs.values.reduce(0) { $0 + $1.byteCount + $1.strings.reduce(0) { $0 + $1.count } }
        guard let key = inputBytes < 64 * 1024 ? hash() : try await workers.run(hash) else { return nil }
        // Read before anything is resolved: a route changing while this request runs leaves its entry already stale.
        let generation = registry.routingGeneration
        guard case .hit(let cached) = cache.store.lookup(key, model: served.name, version: served.version),
              cached.routingGeneration.map({ $0 == generation }) ?? true else {
            served.instruments.cacheMiss(nanoseconds: SystemClock.nanoseconds() &- started, count: 1)
            return CacheProbe(key: key, hit: nil, routingGeneration: generation)
        }
        let nanoseconds = SystemClock.nanoseconds() &- started
        served.instruments.cacheHit(rows: cached.rows, nanoseconds: nanoseconds, protocol: request.parameters.protocol)
        cache.store.recordHitDuration(seconds: Double(nanoseconds) / 1e9, model: served.name, version: served.version)
        var response = cached.response
        response.id = request.id
        response.cache = .hit
        return CacheProbe(key: key, hit: response, routingGeneration: generation)
    }

    /// Step 5 of `infer`: stores the final `response` of a request that missed (`rows` rows) and marks it a miss.
    func cacheStore(_ response: InferenceResponse, rows: Int, probe: CacheProbe?, on served: ServedVersion) -> InferenceResponse {
        guard let cache, let probe else { return response }
        var response = response
        response.cache = .miss
        // Sequences and optionals are not stored, nor a cascade's fallback answer (its target was not ready: the next
        // request should try it again); an answer with escalated rows is stored with the routing generation, so a new
        // version of its target (or any other route change) makes it a miss. Outputs are copied into storage of their own: an output may be a
        // window into its batch's buffer, a pooled engine block (up to a quarter larger) or even the weights arena, and
        // an entry must hold (and be charged for) its own bytes only, never keep an unloaded model alive.
        guard cache.admits(served), response.outputs.allSatisfy({ $0.tensor.container == nil }), response.cascade?.unavailable != true else {
            return response
        }
        let started = SystemClock.nanoseconds()
        var stored = response
        stored.outputs = response.outputs.map { NamedTensor(name: $0.name, tensor: $0.tensor.detachedCopy()) }
        cache.store.insert(probe.key, value: CachedResponse(response: stored, rows: rows,
                                                          routingGeneration: response.cascade?.cascaded == true ? probe.routingGeneration : nil), bytes: InferenceCache.entryBytes(stored.outputs),
                           model: served.name, version: served.version)
        served.instruments.cacheMiss(nanoseconds: SystemClock.nanoseconds() &- started, count: 0)
        return response
    }
}

extension Tensor {
    /// This tensor's bytes in a fresh allocation of exactly its size (BYTES elements are values already: returned as is).
    func detachedCopy() -> Tensor {
        guard dtype != .string else { return self }
        var copy = Tensor(uninitialized: dtype, shape: shape)
        withUnsafeBytes { source in copy.withUnsafeMutableBytes { $0.copyMemory(from: source) } }
        return copy
    }
}
