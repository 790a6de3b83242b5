import HTTP

/// One image sent to a `/classify` route.
public struct ImageUpload: Sendable {
    /// Where it came from: `body`, or the multipart field name.
    public var source: String
    /// Declared media type (`image/png`, `image/jpeg`), or the sniffed one for octet-stream bodies.
    public var mediaType: String
    /// The encoded image bytes.
    public var bytes: ArraySlice<UInt8>
}

/// The decoded inputs of a `/classify` request.
public struct ClassifyRequest: Sendable {
    /// Images in request order.
    public var images: [ImageUpload]
    /// Classes wanted per image.
    public var topK: Int
}

/// Reads `/classify` bodies: a raw PNG/JPEG body, or `multipart/form-data` with image parts and an optional `top_k` field.
public enum ClassifyCodec {
    /// Media types accepted for an image.
    public static let imageTypes: Set<String> = ["image/png", "image/jpeg"]

    /// Decodes the request; `top_k` comes from the query (or a form field), default `defaultTopK`, at most `maxTopK`.
    public static func decodeRequest(_ request: HTTPRequest, defaultTopK: Int = 5, maxTopK: Int = 1000,
                                     limits: MultipartLimits = MultipartLimits()) throws -> ClassifyRequest {
        var topKText = request.queryItems.first { $0.name == "top_k" }?.value
        let contentType = request.headers["Content-Type"] ?? ""
        let media = ((try? HeaderValueWithParameters(parsing: contentType))?.value ?? contentType).lowercased()
        var images: [ImageUpload] = []
        switch media {
        case "image/png", "image/jpeg", "image/jpg":
            images = [ImageUpload(source: "body", mediaType: media == "image/jpg" ? "image/jpeg" : media, bytes: request.body[...])]
        case "application/octet-stream", "", "image/*", "*/*", "application/x-www-form-urlencoded":
            // Missing or generic types are common from scripts (curl --data-binary sends form-urlencoded): the magic bytes decide.
            guard let sniffed = sniffImageType(request.body[...]) else {
                let declared = media.isEmpty ? "a body without Content-Type" : "\(media) body"
                throw APIError.unsupportedMediaType("\(declared) is neither PNG nor JPEG; expected image/png, image/jpeg or multipart/form-data")
            }
            images = [ImageUpload(source: "body", mediaType: sniffed, bytes: request.body[...])]
        case "multipart/form-data":
            for (index, part) in try Multipart.parse(body: request.body, contentType: contentType, limits: limits).enumerated() {
                if part.name == "top_k" && part.filename == nil {
                    if topKText == nil { topKText = String(decoding: part.body, as: UTF8.self).trimmingASCIIWhitespace() }
                    continue
                }
                let declared = part.contentType.map { $0 == "image/jpg" ? "image/jpeg" : $0 }
                let label = part.name.isEmpty ? "#\(index + 1)" : part.name
                if let declared, imageTypes.contains(declared) {
                    images.append(ImageUpload(source: label, mediaType: declared, bytes: part.body))
                } else if declared == nil || declared == "application/octet-stream", let sniffed = sniffImageType(part.body) {
                    images.append(ImageUpload(source: label, mediaType: sniffed, bytes: part.body))
                } else {
                    // Every part is an image to classify; anything else is an unsupported media type, as for a raw body.
                    throw APIError.unsupportedMediaType("part '\(label)' is \(declared ?? "untyped data that is neither PNG nor JPEG"), expected a PNG or JPEG image")
                }
            }
            guard !images.isEmpty else { throw APIError.badRequest("multipart body has no image part (image/png or image/jpeg)") }
        default:
            throw APIError.unsupportedMediaType("Content-Type '\(media)' is not accepted; expected image/png, image/jpeg or multipart/form-data")
        }
        for image in images where image.bytes.isEmpty {
            throw APIError.badRequest("image '\(image.source)' is empty")
        }
        var topK = defaultTopK
        if let topKText {
            guard let k = Int(topKText), k >= 1, k <= maxTopK else {
                throw APIError.badRequest("top_k must be an integer from 1 to \(maxTopK), got '\(topKText.prefix(20))'")
            }
            topK = k
        }
        return ClassifyRequest(images: images, topK: topK)
    }

    /// `image/png` or `image/jpeg` from the leading magic bytes, else nil.
    public static func sniffImageType(_ bytes: ArraySlice<UInt8>) -> String? {
        if bytes.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return "image/png" }
        if bytes.starts(with: [0xFF, 0xD8, 0xFF]) { return "image/jpeg" }
        return nil
    }
}
