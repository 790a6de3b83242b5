import Foundation
import HTTP
import Imaging
import Serving
import Tensor

extension ServiceContext {
    /// `POST /v2/models/{model}[/versions/{version}]/classify`: one image body or multipart images, top-k labels each.
    func classify(_ request: HTTPRequest, _ p: PathParameters) async throws -> HTTPResponse {
        let served = try registry.resolve(model: p.model ?? "", version: p.version)
        let topK = try requestedTopK(request)
        let (images, names) = try imagesOf(request)
        let probabilities: Tensor
        do {
            probabilities = try await served.classify(images, maxPixels: options.maxImagePixels, workers: imageWorkers)
        } catch let error as ImageInputError where names != nil {
            let part = names![error.index]
            throw APIError(status: error.httpStatus, "part '\(part)': \(error.reason)")
        }
        let ranked = try V2Codec.topK(probabilities, k: topK, labels: served.labels.isEmpty ? nil : served.labels)
        for row in ranked {
            if let best = row.first { metrics.recordTopScore(model: served.name, version: served.version, score: best.score) }
        }
        return V2Codec.encodeClassifyResponse(modelName: served.name, modelVersion: String(served.version), classifications: ranked)
    }

    /// `top_k` from the query: a positive integer, default from the options (capped at the class count later).
    private func requestedTopK(_ request: HTTPRequest) throws -> Int {
        guard let text = request.queryItems.last(where: { $0.name == "top_k" })?.value else { return options.defaultTopK }
        guard let k = Int(text), k >= 1 else { throw APIError.badRequest("query parameter top_k: expected a positive integer, got '\(text)'") }
        return k
    }

    /// The encoded images of a classify request and, for multipart bodies, each image's part name.
    private func imagesOf(_ request: HTTPRequest) throws -> (images: [[UInt8]], partNames: [String]?) {
        let contentType = request.headers["Content-Type"] ?? ""
        let mediaType = contentType.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
        if mediaType == "multipart/form-data" {
            let parts = try Multipart.parse(body: request.body, contentType: contentType)
            guard !parts.isEmpty else { throw APIError.badRequest("multipart body has no parts: expected one or more image files") }
            var images: [[UInt8]] = []
            var names: [String] = []
            for (index, part) in parts.enumerated() {
                let label = part.name.isEmpty ? "#\(index + 1)" : part.name
                guard !part.body.isEmpty else { throw APIError.badRequest("part '\(label)' is empty: expected a PNG or JPEG image") }
                guard ImageFormat.sniff(Array(part.body.prefix(16))) != nil else {
                    let declared = part.contentType.map { " (Content-Type \($0))" } ?? ""
                    throw APIError.unsupportedMediaType("part '\(label)'\(declared) is not a PNG or JPEG image")
                }
                images.append(Array(part.body))
                names.append(label)
            }
            return (images, names)
        }
        let acceptable = ["", "image/png", "image/jpeg", "image/jpg", "application/octet-stream", "image/*", "*/*"]
        guard acceptable.contains(mediaType) || mediaType.hasPrefix("image/") else {
            throw APIError.unsupportedMediaType("Content-Type '\(mediaType)' is not accepted: expected image/png, image/jpeg or multipart/form-data")
        }
        guard !request.body.isEmpty else { throw APIError.badRequest("empty body: expected a PNG or JPEG image") }
        return ([request.body], nil)
    }
}
