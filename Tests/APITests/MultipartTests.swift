import HTTP
import Testing
@testable import API

private let crlf = "\r\n"

/// A two-part form: a text field and a PNG-named file with `payload` as its content.
private func form(boundary: String, payload: [UInt8], preamble: String = "", epilogue: String = "") -> [UInt8] {
    var body = Array(preamble.utf8)
    if !preamble.isEmpty { body += Array(crlf.utf8) }
    body += Array("--\(boundary)\(crlf)Content-Disposition: form-data; name=\"top_k\"\(crlf)\(crlf)5\(crlf)".utf8)
    body += Array("--\(boundary)\(crlf)Content-Disposition: form-data; name=\"image\"; filename=\"cat.png\"\(crlf)Content-Type: image/png\(crlf)\(crlf)".utf8)
    body += payload
    body += Array("\(crlf)--\(boundary)--\(epilogue)".utf8)
    return body
}

private func failure(_ body: [UInt8], boundary: String = "XyZ") -> MultipartError? {
    do {
        _ = try Multipart.parse(body: body, boundary: boundary)
        return nil
    } catch let error as MultipartError {
        return error
    } catch {
        Issue.record("unexpected \(error)")
        return nil
    }
}

@Suite struct MultipartTests {
    @Test func boundaryFromContentType() throws {
        #expect(try Multipart.boundary(contentType: "multipart/form-data; boundary=abc") == "abc")
        #expect(try Multipart.boundary(contentType: "Multipart/Form-Data;boundary=\"a b:c\"; charset=utf-8") == "a b:c")
        #expect(throws: MultipartError.self) { try Multipart.boundary(contentType: "multipart/form-data") }
        #expect(throws: MultipartError.self) { try Multipart.boundary(contentType: "image/png") }
        #expect(throws: MultipartError.self) { try Multipart.boundary(contentType: "multipart/form-data; boundary=\"unterminated") }
        #expect(throws: MultipartError.self) { try Multipart.boundary(contentType: "multipart/form-data; boundary=" + String(repeating: "a", count: 71)) }
        #expect(throws: MultipartError.self) { try Multipart.boundary(contentType: "multipart/form-data; boundary=a{b") }
        let e = try? Multipart.boundary(contentType: "text/plain")
        #expect(e == nil)
    }

    @Test func parsesPartsPreambleAndEpilogue() throws {
        let payload: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x2D, 0x2D]
        let body = form(boundary: "XyZ", payload: payload, preamble: "ignore me", epilogue: "\r\ntrailing junk")
        let parts = try Multipart.parse(body: body, contentType: "multipart/form-data; boundary=XyZ")
        #expect(parts.count == 2)
        #expect(parts[0].name == "top_k" && parts[0].filename == nil && parts[0].contentType == nil)
        #expect(Array(parts[0].body) == Array("5".utf8))
        #expect(parts[1].name == "image" && parts[1].filename == "cat.png" && parts[1].contentType == "image/png")
        #expect(Array(parts[1].body) == payload)
    }

    /// Content bytes that resemble the delimiter at every position must not end the part early.
    @Test func nearBoundaryContentAtEveryOffset() throws {
        let boundary = "----osprey42"
        let lookalikes = ["\r\n------osprey4", "\r\n--", "----osprey42", "\n------osprey42\r\n", "\r\r\n-"]
        for lookalike in lookalikes {
            for offset in 0...6 {
                let payload = [UInt8](repeating: 0x41, count: offset) + Array(lookalike.utf8) + [UInt8](repeating: 0x42, count: 6 - offset)
                let parts = try Multipart.parse(body: form(boundary: boundary, payload: payload), boundary: boundary)
                #expect(Array(parts[1].body) == payload, "\(lookalike.debugDescription) at \(offset)")
            }
        }
    }

    /// Cutting a valid body anywhere before its closing delimiter is an error, never a crash or a short part.
    @Test func truncatedAtEveryOffsetFails() {
        let body = form(boundary: "XyZ", payload: Array("hello".utf8))
        let closing = body.count - "--XyZ--".count
        for cut in 0..<(closing + 6) {
            let prefix = Array(body[..<cut])
            #expect(failure(prefix) != nil, "cut at \(cut)")
        }
        #expect(failure(body) == nil)
    }

    @Test func missingClosingBoundaryNamesThePart() {
        let body = Array("--XyZ\r\nContent-Disposition: form-data; name=\"image\"\r\n\r\nabc".utf8)
        let e = failure(body)
        #expect(e?.kind == .missingClosingBoundary)
        #expect(e?.message.contains("part 1 ('image')") == true)
    }

    @Test func emptyPartAndPartWithoutHeaders() throws {
        let body = Array("--XyZ\r\nContent-Disposition: form-data; name=\"f\"; filename=\"\"\r\n\r\n\r\n--XyZ--".utf8)
        let parts = try Multipart.parse(body: body, boundary: "XyZ")
        #expect(parts.count == 1 && parts[0].body.isEmpty && parts[0].filename == "")
        let headerless = Array("--XyZ\r\n\r\ndata\r\n--XyZ--".utf8)
        #expect(failure(headerless)?.message.contains("missing Content-Disposition") == true)
    }

    @Test func structuralErrors() {
        #expect(failure(Array("no boundary here".utf8))?.kind == .missingBoundary)
        #expect(failure(Array("--XyZ--".utf8))?.kind == .noParts)
        #expect(failure(Array("--XyZjunk\r\n".utf8))?.kind == .malformedPart)
        #expect(failure(Array("--XyZ\r\nContent-Disposition: attachment; name=\"a\"\r\n\r\nx\r\n--XyZ--".utf8))?.kind == .malformedPart)
        #expect(failure(Array("--XyZ\r\nContent-Disposition: form-data\r\n\r\nx\r\n--XyZ--".utf8))?.message.contains("no name") == true)
        #expect(failure(Array("--XyZ\r\nno colon line\r\n\r\nx\r\n--XyZ--".utf8))?.kind == .malformedPart)
        #expect(failure(Array("--XyZ\r\nContent-Disposition: form-data; name=a\r\nx\r\n--XyZ--".utf8))?.kind == .malformedPart)
    }

    @Test func transportPaddingAfterBoundary() throws {
        let body = Array("--XyZ  \t\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nx\r\n--XyZ \r\nContent-Disposition: form-data; name=b\r\n\r\ny\r\n--XyZ--\r\n".utf8)
        let parts = try Multipart.parse(body: body, boundary: "XyZ")
        #expect(parts.map(\.name) == ["a", "b"])
    }

    @Test func limits() {
        var body: [UInt8] = []
        for i in 0..<5 { body += Array("--XyZ\r\nContent-Disposition: form-data; name=\"p\(i)\"\r\n\r\nx\r\n".utf8) }
        body += Array("--XyZ--".utf8)
        #expect(throws: MultipartError.self) { try Multipart.parse(body: body, boundary: "XyZ", limits: MultipartLimits(maxParts: 4)) }
        #expect(throws: Never.self) { try Multipart.parse(body: body, boundary: "XyZ", limits: MultipartLimits(maxParts: 5)) }
        let bigHeader = Array("--XyZ\r\nContent-Disposition: form-data; name=\"\(String(repeating: "n", count: 200))\"\r\n\r\nx\r\n--XyZ--".utf8)
        let e = try? Multipart.parse(body: bigHeader, boundary: "XyZ", limits: MultipartLimits(maxHeaderBytes: 100))
        #expect(e == nil)
        #expect(MultipartError(.limitExceeded, "x").httpStatus == 413)
    }

    @Test func extendedFilename() throws {
        let body = Array("--XyZ\r\nContent-Disposition: form-data; name=\"f\"; filename=\"a.jpg\"; filename*=UTF-8''caf%C3%A9+1.jpg\r\n\r\nx\r\n--XyZ--".utf8)
        #expect(try Multipart.parse(body: body, boundary: "XyZ")[0].filename == "café+1.jpg")
    }
}
