import Imaging
import Infrastructure
import Tensor

// The one serving call every front end makes. HTTP JSON, HTTP binary and gRPC are codecs on the other side: each
// decodes its wire format into an `InferenceRequest`, calls `Inference.infer`, and encodes the `InferenceResponse`
// (or maps the thrown `ServingError` / `ImageInputError` to its own status codes):
//
//     let inference = Inference(registry: registry, workers: workers, imageLimits: ImageLimits())
//     let request = InferenceRequest(model: "resnet", version: nil, id: "42",
//                                    inputs: ["input": tensor], outputs: ["logits"],
//                                    parameters: InferenceParameters(timeout: .milliseconds(50)))
//     let response = try await inference.infer(request)
//     for output in response.outputs { encode(output.name, output.tensor) }   // requested order, else model order
//
// The request is checked once, against the version's `ModelContract`; the version is resolved once and held for the
// whole call, so a hot swap never touches a request already admitted.

/// An owned, protocol-neutral inference request.
public struct InferenceRequest: Sendable {
    /// Model name.
    public var model: String
    /// Version to run on; nil means the model's default (pinned, else highest READY).
    public var version: Int?
    /// The client's request id, echoed in the response.
    public var id: String?
    /// Input name to tensor, as decoded. A BYTES tensor on a model's image input holds encoded PNG/JPEG images,
    /// which are preprocessed exactly as `classify` does.
    public var inputs: [String: Tensor]
    /// Outputs wanted, in the order the response lists them; empty means every model output in model order.
    public var outputs: [String]
    /// Per-request settings.
    public var parameters: InferenceParameters
    /// What the traffic split hashes when `version` is nil: the V2 `id`, else a client-sent `X-Request-ID`; never a generated id.
    public var routingKey: String?

    /// A request value.
    public init(model: String, version: Int? = nil, id: String? = nil, inputs: [String: Tensor], outputs: [String] = [],
                parameters: InferenceParameters = InferenceParameters(), routingKey: String? = nil) {
        self.model = model
        self.version = version
        self.id = id
        self.inputs = inputs
        self.outputs = outputs
        self.parameters = parameters
        self.routingKey = routingKey
    }
}

/// Per-request settings every protocol can carry.
public struct InferenceParameters: Sendable, Equatable {
    /// Longest time the request may wait in the queue; nil uses the config's `default_timeout_microseconds`.
    public var timeout: Duration?
    /// The front end the request came through (the `protocol` label of the request metrics).
    public var `protocol`: InferenceProtocol

    /// Parameters with the given values (defaults: no timeout, HTTP).
    public init(timeout: Duration? = nil, protocol: InferenceProtocol = .http) {
        self.timeout = timeout
        self.protocol = `protocol`
    }
}

/// One named tensor of a response.
public struct NamedTensor: Sendable {
    /// Output name.
    public var name: String
    /// Its value.
    public var tensor: Tensor

    /// A named tensor.
    public init(name: String, tensor: Tensor) {
        self.name = name
        self.tensor = tensor
    }
}

/// What a request produced, on the version that ran it.
public struct InferenceResponse: Sendable {
    /// Model name.
    public var model: String
    /// The version that served the request.
    public var version: Int
    /// The request's id, echoed.
    public var id: String?
    /// Outputs in the request's order, or every output in model order when none were named.
    public var outputs: [NamedTensor]
    /// The version's class labels (empty when it has none), for front ends that rank classes.
    public var labels: [String]
    /// `.hit` or `.miss` when the model's response cache is on; nil when it is off (for the model or the server).
    public var cache: CacheOutcome? = nil
    /// Who answered each row when the model has a `cascade` (nil when it has none).
    public var cascade: CascadeReport? = nil
}

/// Bounds on the images one request may carry, checked from each image's header before decoding.
public struct ImageLimits: Sendable, Equatable {
    /// Most pixels per decoded image.
    public var maxPixels: Int
    /// Most bytes per decoded image (width x height x channels x bytes per sample).
    public var maxBytes: Int

    /// Limits with the given values (defaults: 50 megapixels, the decoder's byte limit).
    public init(maxPixels: Int = 50_000_000, maxBytes: Int = DecodeOptions.defaultMaxBytes) {
        self.maxPixels = maxPixels
        self.maxBytes = maxBytes
    }
}

/// The serving entry point: resolves the version, checks the request against its contract, preprocesses images,
/// batches and runs it.
public struct Inference: Sendable {
    /// Models and versions.
    public let registry: ModelRegistry
    /// Threads for image decoding.
    public let workers: BlockingExecutor
    /// Per-image limits.
    public let imageLimits: ImageLimits
    /// The response cache (`--cache-bytes`); nil when it is off.
    public let cache: InferenceCache?

    /// An entry point over `registry`, decoding images on `workers`, answering repeated requests from `cache` when given.
    public init(registry: ModelRegistry, workers: BlockingExecutor, imageLimits: ImageLimits = ImageLimits(), cache: InferenceCache? = nil) {
        self.registry = registry
        self.workers = workers
        self.imageLimits = imageLimits
        self.cache = cache
    }

    /// Runs `request` on its version (the named one, else the pinned default, else one drawn by the model's traffic
    /// split, else the highest READY: `ModelRegistry.route`) and returns its outputs.
    ///
    /// Throws `ServingError` (`.modelNotFound`, `.versionNotFound`, `.notReady`, `.invalidInput`, `.queueFull`,
    /// `.timeout`, `.executionFailed`, `.shuttingDown`) and `ImageInputError` for an image that cannot be decoded.
    public func infer(_ request: InferenceRequest) async throws -> InferenceResponse {
        try await infer(request, on: try registry.route(model: request.model, version: request.version, routingKey: request.routingKey))
    }

    /// Runs `request` on `served`, a version the caller resolved first (HTTP answers an unknown model with 404 before
    /// it reads the body); `request.model` and `request.version` are not consulted again.
    public func infer(_ request: InferenceRequest, on served: ServedVersion) async throws -> InferenceResponse {
        // Response cache lookup: a hit answers at once (no image decoding, batcher or cascade), with this request's id.
        let cached = try await cacheLookup(request, on: served)
        if let hit = cached?.hit { return hit }
        var inputs = request.inputs
        // Only a request that sends BYTES meets the image plan (and a broken `image` section's error).
        if inputs.values.contains(where: { $0.dtype == .string }), let plan = try served.imageInputPlan(),
           let images = inputs[plan.input.name], images.dtype == .string {
            inputs[plan.input.name] = try await served.imageBatch(images.strings, plan: plan, maxPixels: imageLimits.maxPixels,
                                                                 maxBytes: imageLimits.maxBytes, workers: workers)
        }
        let wanted = request.outputs.isEmpty ? nil : request.outputs
        let results = try await served.infer(inputs, outputs: outputsComputed(for: wanted, on: served), timeout: request.parameters.timeout,
                                             protocol: request.parameters.protocol)
        let names = wanted ?? served.outputs.map(\.name)
        let outputs = names.compactMap { name in results[name].map { NamedTensor(name: name, tensor: $0) } }
        let response = InferenceResponse(model: served.name, version: served.version, id: request.id, outputs: outputs, labels: served.labels)
        let final = await cascade(response, results: results, request: request, on: served)
        // Response cache store of the final (post-cascade) answer.
        let rows = served.maxBatchSize > 0 ? (inputs.values.first?.shape.first ?? 1) : 1
        return cacheStore(final, rows: rows, probe: cached, on: served)
    }

    /// Classifies encoded PNG/JPEG `images` on `served`: the one output holds class probabilities, one row per image
    /// (rows the model was unsure of answered by its cascade target, as `cascade` reports).
    ///
    /// Throws like `infer`; `ImageInputError.index` says which image failed.
    public func classify(_ images: [[UInt8]], on served: ServedVersion, timeout: Duration? = nil) async throws -> InferenceResponse {
        // Keyed apart from `/infer` (whose outputs are the model's raw tensors, not probabilities) by its output name.
        let keyed = InferenceRequest(model: served.name, version: served.version, inputs: ["images": Tensor(shape: [images.count], strings: images)],
                                     outputs: ["classify:probabilities"])
        let probe = try await cacheLookup(keyed, on: served)
        if let hit = probe?.hit { return hit }
        let probabilities = try await served.classify(images, maxPixels: imageLimits.maxPixels, maxBytes: imageLimits.maxBytes,
                                                      workers: workers, timeout: timeout)
        let response = await cascadeClassification(images, probabilities: probabilities, on: served, timeout: timeout)
        return cacheStore(response, rows: images.count, probe: probe, on: served)
    }
}
