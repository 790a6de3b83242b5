import Infrastructure
import Engine
import Foundation
import Imaging
import Tensor

/// An image that could not be decoded or preprocessed, with its position in the request.
public struct ImageInputError: Error, Sendable, CustomStringConvertible {
    /// Zero-based position of the image in the request.
    public let index: Int
    /// What the decoder or preprocessor refused.
    public let reason: ImagingError

    /// `image 2: corrupt image: ...`.
    public var description: String { "image \(index): \(reason)" }
}

/// Which input of a model takes images and how raw pixels become that tensor.
public struct ImageInputPlan: Sendable {
    /// The model input the images feed.
    public let input: TensorSpec
    /// Preprocessing: the config's `image` section over defaults derived from the input's shape.
    public let preprocessing: PreprocessConfig
}

extension ImageInputPlan {
    /// The image input of a model with `inputs` under `config`, or nil when no input is image-shaped (rank 4 with 1 or
    /// 3 channels); built once per loaded version.
    ///
    /// With several inputs, the config must contain an `image` section and exactly one input may look like an image.
    static func make(inputs: [TensorSpec], config: ModelConfig) throws -> ImageInputPlan? {
        let candidates = inputs.compactMap { spec in
            PreprocessConfig.defaults(inputShape: spec.shape, dtype: spec.dtype).map { (spec, $0) }
        }
        guard candidates.count == 1, let (spec, defaults) = candidates.first else { return nil }
        guard let section = config.image else { return ImageInputPlan(input: spec, preprocessing: defaults) }
        guard let object = section.foundationObject as? [String: Any] else {
            throw ServingError.invalidConfig(key: "image", expected: "an object", got: section.typeName)
        }
        do {
            return ImageInputPlan(input: spec, preprocessing: try PreprocessConfig(json: object, defaults: defaults))
        } catch let error as ImagingError {
            throw ServingError.invalidConfig(key: "image", expected: "a valid preprocessing section", got: error.description)
        }
    }
}

/// One row-major batch tensor's bytes, written by several workers at once, each into its own row.
private struct BatchRows: @unchecked Sendable {
    let base: UnsafeMutableRawPointer
    let rowBytes: Int

    func row(_ index: Int) -> UnsafeMutableRawBufferPointer {
        UnsafeMutableRawBufferPointer(start: base + index * rowBytes, count: rowBytes)
    }
}

extension ServedVersion {
    /// The image input of this version (built at load), or nil when no input is image-shaped; throws the
    /// `.invalidConfig` the config's `image` section earned at load.
    public func imageInputPlan() throws -> ImageInputPlan? { try imagePlan.get() }

    /// Decodes and preprocesses encoded PNG/JPEG `images` on `workers` into one batch for the image input.
    ///
    /// Each image is written straight into its row of the batch tensor; throws `ImageInputError` naming the image.
    public func imageBatch(_ images: [[UInt8]], plan: ImageInputPlan, maxPixels: Int, maxBytes: Int = DecodeOptions.defaultMaxBytes,
                           workers: BlockingExecutor) async throws -> Tensor {
        let config = plan.preprocessing
        let batch = Tensor(uninitialized: config.dtype, shape: [images.count] + config.outputShape.dropFirst())
        // The batch is fresh and not yet shared, so its storage is exactly its bytes and nothing else writes to it.
        let rows = BatchRows(base: batch.storage.pointer, rowBytes: config.outputByteCount)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, bytes) in images.enumerated() {
                group.addTask {
                    try await workers.run {
                        do {
                            try bytes.withUnsafeBytes { source in
                                try decodeAndPreprocess(source, config: config, maxPixels: maxPixels, maxBytes: maxBytes, into: rows.row(index))
                            }
                        } catch let error as ImagingError {
                            throw ImageInputError(index: index, reason: error)
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        return batch
    }

    /// Runs encoded images through the batcher and returns class probabilities, one row per image.
    ///
    /// The scores come from the model's first output; softmax is applied when the config says the model
    /// emits logits, or when it does not say and the rows are not already probability distributions.
    public func classify(_ images: [[UInt8]], maxPixels: Int, maxBytes: Int = DecodeOptions.defaultMaxBytes, workers: BlockingExecutor,
                         timeout: Duration? = nil) async throws -> Tensor {
        guard let plan = try imagePlan.get() else {
            let shapes = inputs.map { "\($0.name) \($0.dtype)[\($0.shape.map(\.description).joined(separator: ", "))]" }
            throw ServingError.invalidInput("model '\(name)' has no image input: expected one rank-4 input with 1 or 3 channels, got \(shapes.joined(separator: "; "))")
        }
        guard inputs.count == 1 else {
            throw ServingError.invalidInput("model '\(name)' takes \(inputs.count) inputs; classify needs a model with a single image input")
        }
        guard let output = outputs.first else {
            throw ServingError.executionFailed(model: name, version: version, reason: "the model has no outputs")
        }
        if !batchingEnabled && images.count > 1 {
            // Unbatched models run one image per execution.
            var rows: [Tensor] = []
            for image in images {
                rows.append(try await classify([image], maxPixels: maxPixels, maxBytes: maxBytes, workers: workers, timeout: timeout))
            }
            return Tensor.concatenatingRows(rows)
        }
        let batch = try await imageBatch(images, plan: plan, maxPixels: maxPixels, maxBytes: maxBytes, workers: workers)
        let result = try await infer([plan.input.name: batch], outputs: [output.name], timeout: timeout)
        guard let scores = result[output.name] else {
            throw ServingError.executionFailed(model: name, version: version, reason: "no output '\(output.name)'")
        }
        return try probabilities(scores, rows: images.count)
    }

    /// Flattens `scores` to [rows, classes] float32 and applies softmax unless they are already probabilities.
    func probabilities(_ scores: Tensor, rows: Int) throws -> Tensor {
        guard scores.dtype == .float32, rows > 0, scores.count % rows == 0, scores.count > 0 else {
            throw ServingError.executionFailed(model: name, version: version,
                                               reason: "classification output must be float32 with one row per image, got \(scores)")
        }
        let classes = scores.count / rows
        var values = scores.scalars(as: Float.self)
        let alreadyProbabilities = config.outputsAreProbabilities ?? isDistribution(values, classes: classes)
        if !alreadyProbabilities {
            values.withUnsafeMutableBufferPointer { softmaxRows($0.baseAddress!, rows: rows, columns: classes) }
        }
        return Tensor(shape: [rows, classes], scalars: values)
    }
}

/// True when every row is non-negative and sums to 1 (within float error): the model already applied softmax.
func isDistribution(_ values: [Float], classes: Int) -> Bool {
    stride(from: 0, to: values.count, by: classes).allSatisfy { start in
        var sum: Float = 0
        for v in values[start..<(start + classes)] {
            if !(v >= 0 && v <= 1) { return false }
            sum += v
        }
        return abs(sum - 1) < 1e-3
    }
}
