import HTTP
import Testing
@testable import API

private let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 1, 2, 3]
private let jpeg: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0, 9]

private func request(_ contentType: String?, _ body: [UInt8], query: String = "") -> HTTPRequest {
    var headers = HTTPHeaders()
    if let contentType { headers.add("Content-Type", contentType) }
    return HTTPRequest(method: "POST", path: "/v2/models/m/classify", query: query, headers: headers, body: body)
}

private func status(_ r: HTTPRequest) -> Int? {
    do { _ = try ClassifyCodec.decodeRequest(r); return nil } catch let e as HTTPErrorConvertible { return e.httpStatus } catch { return -1 }
}

@Suite struct ClassifyRequestTests {
    @Test func rawBodies() throws {
        let p = try ClassifyCodec.decodeRequest(request("image/png", png, query: "top_k=3"))
        #expect(p.images.count == 1 && p.images[0].mediaType == "image/png" && Array(p.images[0].bytes) == png && p.topK == 3)
        let j = try ClassifyCodec.decodeRequest(request("application/octet-stream", jpeg))
        #expect(j.images[0].mediaType == "image/jpeg" && j.topK == 5)
        #expect(status(request("text/plain", png)) == 415)
        #expect(try ClassifyCodec.decodeRequest(request(nil, png)).images[0].mediaType == "image/png")
        #expect(status(request(nil, [1, 2, 3])) == 415)
        #expect(try ClassifyCodec.decodeRequest(request("application/x-www-form-urlencoded", jpeg)).images[0].mediaType == "image/jpeg")
        #expect(status(request("application/octet-stream", [1, 2, 3])) == 415)
        #expect(status(request("image/png", [])) == 400)
        #expect(status(request("image/png", png, query: "top_k=0")) == 400)
        #expect(status(request("image/png", png, query: "top_k=abc")) == 400)
    }

    @Test func multipartImagesAndFields() throws {
        var body = Array("--B\r\nContent-Disposition: form-data; name=\"top_k\"\r\n\r\n2\r\n".utf8)
        body += Array("--B\r\nContent-Disposition: form-data; name=\"a\"; filename=\"a.png\"\r\nContent-Type: image/png\r\n\r\n".utf8) + png
        body += Array("\r\n--B\r\nContent-Disposition: form-data; name=\"b\"; filename=\"b.bin\"\r\n\r\n".utf8) + jpeg
        body += Array("\r\n--B--\r\n".utf8)
        let r = try ClassifyCodec.decodeRequest(request("multipart/form-data; boundary=B", body))
        #expect(r.topK == 2)
        #expect(r.images.map(\.source) == ["a", "b"])
        #expect(r.images.map(\.mediaType) == ["image/png", "image/jpeg"])
        #expect(Array(r.images[1].bytes) == jpeg)
    }

    /// Parts that are not PNG or JPEG get 415, as the same bytes sent as the whole body do (issue 11: a GIF part got 400).
    @Test func multipartNonImagePartsAreRejected() {
        let text = Array("--B\r\nContent-Disposition: form-data; name=\"f\"; filename=\"x.txt\"\r\nContent-Type: text/plain\r\n\r\nhi\r\n--B--".utf8)
        #expect(status(request("multipart/form-data; boundary=B", text)) == 415)
        let none = Array("--B\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nhi\r\n--B--".utf8)
        #expect(status(request("multipart/form-data; boundary=B", none)) == 415)
        let gif = Array("GIF89a\u{01}\u{00}\u{01}\u{00}\u{00}\u{00}\u{00};".utf8)
        let gifPart = Array("--B\r\nContent-Disposition: form-data; name=\"g\"; filename=\"a.gif\"\r\nContent-Type: image/gif\r\n\r\n".utf8) + gif + Array("\r\n--B--".utf8)
        #expect(status(request("multipart/form-data; boundary=B", gifPart)) == 415)
        #expect(status(request("image/gif", gif)) == 415)
        let untypedGIF = Array("--B\r\nContent-Disposition: form-data; name=\"g\"; filename=\"a.gif\"\r\n\r\n".utf8) + gif + Array("\r\n--B--".utf8)
        #expect(status(request("multipart/form-data; boundary=B", untypedGIF)) == 415)
        let unterminated = Array("--B\r\nContent-Disposition: form-data; name=\"a\"\r\nContent-Type: image/png\r\n\r\n".utf8) + png
        #expect(status(request("multipart/form-data; boundary=B", unterminated)) == 400)
        #expect(status(request("multipart/form-data", png)) == 415)
    }
}
