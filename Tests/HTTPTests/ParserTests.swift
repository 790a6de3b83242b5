import Infrastructure
import XCTest
@testable import HTTP

/// A large Content-Length body read straight into the request's buffer: the parser hands out the unfilled rest,
/// bytes written there and fed from there arrive in the body once, with the pipelined request after it intact.
final class DirectBodyReadTests: XCTestCase {
    func testReadsLandingInTheBodyWindowMakeTheBody() {
        let body = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let head = Array("POST /in HTTP/1.1\r\nHost: x\r\nContent-Length: \(body.count)\r\n\r\n".utf8)
        let parser = RequestParser(maxHeaderBytes: 16 * 1024, maxBodyBytes: 1 << 20)
        XCTAssertNil(parser.directBodyWindow(), "no window outside a body")
        parser.feed(head + body[..<1000])
        var offset = 1000
        while let window = parser.directBodyWindow() {
            XCTAssertEqual(window.count, body.count - offset, "the window is exactly the rest of the body")
            let n = min(window.count, 70_000)
            body[offset..<(offset + n)].withUnsafeBytes { window.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: n) }
            parser.feed(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(window)[..<n]))
            offset += n
        }
        XCTAssertEqual(offset, body.count)
        parser.feed(Array("GET /next HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        let seen = parser.events.compactMap { event -> (String, [UInt8])? in
            if case .request(let p) = event { return (p.request.path, p.request.body) }
            return nil
        }
        XCTAssertEqual(seen.map(\.0), ["/in", "/next"])
        XCTAssertTrue(seen[0].1 == body, "the body arrives whole and in order")
        XCTAssertEqual(seen[1].1, [])
        XCTAssertNil(parser.directBodyWindow())
    }
}

/// A comparable summary of parser output, so whole, byte-by-byte and split feeds can be compared.
enum Seen: Equatable {
    case request(method: String, path: String, query: String, version: String, headers: [String], body: [UInt8], keepAlive: Bool, id: String)
    case expectContinue
    case error(HTTPParseError)
    case refused(status: Int)
}

func summarize(_ events: [ParserEvent]) -> [Seen] {
    events.map { event in
        switch event {
        case .request(let p):
            let r = p.request
            return .request(method: r.method, path: r.path, query: r.query, version: "\(r.version.major).\(r.version.minor)",
                            headers: r.headers.map { "\($0.name): \($0.value)" }, body: r.body, keepAlive: p.keepAlive, id: r.requestID)
        case .expectContinue: return .expectContinue
        case .error(let e): return .error(e)
        case .refused(let response): return .refused(status: response.status)
        }
    }
}

/// Parses `text` whole, byte by byte, and split in two at every offset; asserts all agree and returns the result.
func parseEverySplit(_ text: String, maxHeader: Int = 16 * 1024, maxBody: Int = 1 << 20,
                             admit: ((HTTPRequest) -> HTTPResponse?)? = nil,
                             file: StaticString = #filePath, line: UInt = #line) -> [Seen] {
    let bytes = Array(text.utf8)
    /// Feeds the pieces in order; with `suspending`, the parser stops after every request and the rest is fed again.
    func run(_ pieces: [ArraySlice<UInt8>], suspending: Bool = false) -> [Seen] {
        let parser = RequestParser(maxHeaderBytes: maxHeader, maxBodyBytes: maxBody)
        admit.map { gate in parser.admit = gate }
        if suspending { parser.shouldSuspend = { true } }
        var all: [ParserEvent] = []
        for piece in pieces {
            var rest = Array(piece)
            while true {
                let consumed = parser.feed(rest)
                all.append(contentsOf: parser.events)
                parser.events.removeAll()
                if consumed >= rest.count { break }
                rest = Array(rest[consumed...])
            }
        }
        return summarize(all)
    }
    let whole = run([bytes[...]])
    let byByte = run(bytes.indices.map { bytes[$0...$0] })
    XCTAssertEqual(byByte, whole, "byte-by-byte differs", file: file, line: line)
    XCTAssertEqual(run([bytes[...]], suspending: true), whole, "suspending after each request differs", file: file, line: line)
    for split in 0...bytes.count {
        let parts = run([bytes[..<split], bytes[split...]])
        XCTAssertEqual(parts, whole, "split at \(split) differs", file: file, line: line)
        if parts != whole { break }
        let suspended = run([bytes[..<split], bytes[split...]], suspending: true)
        XCTAssertEqual(suspended, whole, "split at \(split) with suspension differs", file: file, line: line)
        if suspended != whole { break }
    }
    return whole
}

final class ParserTests: XCTestCase {
    func testSimpleGetWithQueryAndHeaders() {
        let seen = parseEverySplit("GET /v2/models/a%20b/ready?x=1&y=%2F HTTP/1.1\r\nHost: h\r\nX-Request-ID: abc-123\r\nAccept:  */*  \r\n\r\n")
        XCTAssertEqual(seen, [.request(method: "GET", path: "/v2/models/a b/ready", query: "x=1&y=%2F", version: "1.1",
                                       headers: ["Host: h", "X-Request-ID: abc-123", "Accept: */*"], body: [], keepAlive: true, id: "abc-123")])
    }

    func testPostWithContentLengthAndPipelinedSecondRequest() {
        let seen = parseEverySplit("POST /infer HTTP/1.1\r\nContent-Length: 5\r\n\r\nhelloGET /b HTTP/1.1\r\nConnection: close\r\n\r\n")
        XCTAssertEqual(seen.count, 2)
        XCTAssertEqual(seen[0], .request(method: "POST", path: "/infer", query: "", version: "1.1", headers: ["Content-Length: 5"],
                                         body: Array("hello".utf8), keepAlive: true, id: ""))
        XCTAssertEqual(seen[1], .request(method: "GET", path: "/b", query: "", version: "1.1", headers: ["Connection: close"],
                                         body: [], keepAlive: false, id: ""))
    }

    func testChunkedBodyIsDechunked() {
        let seen = parseEverySplit("POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nTrailer: x\r\n\r\n")
        guard case .request(_, _, _, _, _, let body, _, _)? = seen.first else { return XCTFail("no request: \(seen)") }
        XCTAssertEqual(String(decoding: body, as: UTF8.self), "hello world")
    }

    func testHTTP10ClosesUnlessKeepAlive() {
        let closed = parseEverySplit("GET / HTTP/1.0\r\n\r\n")
        guard case .request(_, _, _, "1.0", _, _, false, _)? = closed.first else { return XCTFail("\(closed)") }
        let kept = parseEverySplit("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        guard case .request(_, _, _, "1.0", _, _, true, _)? = kept.first else { return XCTFail("\(kept)") }
    }

    func testExpectContinueComesBeforeTheRequest() {
        let seen = parseEverySplit("PUT /u HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nok")
        XCTAssertEqual(seen.first, .expectContinue)
        XCTAssertEqual(seen.count, 2)
    }

    func testUnknownExpectationIs417() {
        XCTAssertEqual(parseEverySplit("PUT /u HTTP/1.1\r\nExpect: magic\r\nContent-Length: 2\r\n\r\nok"),
                       [.error(.unsupportedExpectation("magic"))])
    }

    func testAbsoluteFormTarget() {
        let seen = parseEverySplit("GET http://example.com:8080/v2/health/live?a=b HTTP/1.1\r\n\r\n")
        guard case .request(_, "/v2/health/live", "a=b", _, _, _, _, _)? = seen.first else { return XCTFail("\(seen)") }
    }

    func testInsaneRequestIDIsIgnored() {
        let seen = parseEverySplit("GET / HTTP/1.1\r\nX-Request-ID: bad id\"\r\n\r\n")
        guard case .request(_, _, _, _, _, _, _, "")? = seen.first else { return XCTFail("\(seen)") }
    }

    func testGarbageIsMalformed() {
        let seen = parseEverySplit("\u{01}\u{02}garbage\r\n\r\n")
        guard case .error(.malformed)? = seen.first, seen.count == 1 else { return XCTFail("\(seen)") }
    }

    func testHeaderSectionOverLimitIs431() {
        let big = String(repeating: "a", count: 600)
        XCTAssertEqual(parseEverySplit("GET / HTTP/1.1\r\nX-Big: \(big)\r\n\r\n", maxHeader: 512), [.error(.headerTooLarge(limit: 512))])
        // A long request line counts too.
        XCTAssertEqual(parseEverySplit("GET /\(big) HTTP/1.1\r\n\r\n", maxHeader: 512), [.error(.headerTooLarge(limit: 512))])
    }

    func testOurLimitGovernsAboveTheLibraryDefault() {
        // 100 KiB of headers exceeds http-parser's 80 KiB default; a 200 KiB limit must still accept it.
        let parser = RequestParser(maxHeaderBytes: 200 * 1024, maxBodyBytes: 10)
        parser.feed(Array("GET / HTTP/1.1\r\nX-Big: \(String(repeating: "b", count: 100 * 1024))\r\n\r\n".utf8))
        guard case .request? = parser.events.first else { return XCTFail("\(summarize(parser.events))") }
    }

    func testDeclaredBodyOverLimitIs413BeforeReadingIt() {
        let parser = RequestParser(maxHeaderBytes: 1024, maxBodyBytes: 10)
        parser.feed(Array("POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\n".utf8))
        XCTAssertEqual(summarize(parser.events), [.error(.bodyTooLarge(limit: 10, declared: 11))])
    }

    func testChunkedBodyOverLimitIs413() {
        let seen = parseEverySplit("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nhello!\r\n6\r\nhello!\r\n0\r\n\r\n", maxBody: 10)
        XCTAssertEqual(seen, [.error(.bodyTooLarge(limit: 10, declared: nil))])
    }

    func testContentLengthWithTransferEncodingIsRejected() {
        let seen = parseEverySplit("POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
        XCTAssertEqual(seen, [.error(.conflictingFraming("Content-Length and Transfer-Encoding are both present"))])
    }

    func testTwoContentLengthsAreRejected() {
        let seen = parseEverySplit("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd")
        guard case .error(.conflictingFraming)? = seen.first, seen.count == 1 else { return XCTFail("\(seen)") }
    }

    func testUnsupportedTransferEncoding() {
        XCTAssertEqual(parseEverySplit("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"),
                       [.error(.unsupportedTransferEncoding("gzip"))])
        let notChunked = parseEverySplit("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\nabc")
        guard case .error(let error)? = notChunked.first, error.status == 400 || error.status == 501 else { return XCTFail("\(notChunked)") }
    }

    func testErrorStatuses() {
        XCTAssertEqual(HTTPParseError.malformed("x").status, 400)
        XCTAssertEqual(HTTPParseError.headerTooLarge(limit: 1).status, 431)
        XCTAssertEqual(HTTPParseError.bodyTooLarge(limit: 1, declared: 2).status, 413)
        XCTAssertEqual(HTTPParseError.conflictingFraming("x").status, 400)
        XCTAssertEqual(HTTPParseError.unsupportedTransferEncoding("gzip").status, 501)
    }
}

final class TimeoutPolicyTests: XCTestCase {
    func testActionsFollowTheFakeClock() {
        let policy = TimeoutPolicy(idleSeconds: 1, readSeconds: 0.5, lingerSeconds: 2)
        let ms: UInt64 = 1_000_000
        XCTAssertEqual(policy.action(for: .idle(since: 0), now: 999 * ms), .none)
        XCTAssertEqual(policy.action(for: .idle(since: 0), now: 1000 * ms), .close)
        XCTAssertEqual(policy.action(for: .reading(since: 100 * ms), now: 599 * ms), .none)
        XCTAssertEqual(policy.action(for: .reading(since: 100 * ms), now: 600 * ms), .requestTimeout)
        XCTAssertEqual(policy.action(for: .awaitingResponder, now: UInt64.max), .none)
        // A fresh connection gets the read limit for its first byte, not the idle one.
        XCTAssertEqual(policy.action(for: .awaitingFirstRequest(since: 0), now: 499 * ms), .none)
        XCTAssertEqual(policy.action(for: .awaitingFirstRequest(since: 0), now: 500 * ms), .close)
        XCTAssertEqual(policy.action(for: .writing(since: 0), now: 1000 * ms), .close)
        // Linger never outlasts the read timeout.
        XCTAssertEqual(policy.action(for: .lingering(since: 0), now: 500 * ms), .close)
        XCTAssertEqual(policy.sweepIntervalMilliseconds, 125)
    }
}

final class FormattingTests: XCTestCase {
    func testIMFFixdate() {
        XCTAssertEqual(String(decoding: WallClock.imfFixdate(seconds: 784111777), as: UTF8.self), "Sun, 06 Nov 1994 08:49:37 GMT")
    }

    func testByteWriterGrowsAndFormatsNumbers() {
        var writer = ByteWriter(capacity: 16)
        defer { writer.free() }
        for value in [0, 7, 10, 12345, -42, Int.max] { writer.appendDecimal(value); writer.append(UInt8(ascii: " ")) }
        writer.append(Array(repeating: UInt8(ascii: "x"), count: 100))
        XCTAssertEqual(String(decoding: writer.array, as: UTF8.self), "0 7 10 12345 -42 \(Int.max) " + String(repeating: "x", count: 100))
        writer.removeFirst(2)
        XCTAssertEqual(writer.array.prefix(4), Array("7 10".utf8)[...])
    }

    func testRequestIDsAreUniqueAndSane() {
        let ids = (0..<1000).map { _ in RequestID.generate() }
        XCTAssertEqual(Set(ids).count, 1000)
        XCTAssertTrue(ids.allSatisfy { RequestID.isSane(Array($0.utf8)) })
    }

    func testLogLinesEscape() {
        var json = LogLine(format: .json)
        json.begin(time: Array("t".utf8), level: "info", message: "access")
        json.field("path", "/a\"b\n")
        json.number("status", 200)
        json.milliseconds("duration_ms", nanoseconds: 1_234_567)
        json.end()
        defer { json.out.free() }
        XCTAssertEqual(String(decoding: json.bytes, as: UTF8.self),
                       #"{"time":"t","level":"info","msg":"access","path":"/a\"b\n","status":200,"duration_ms":1.234}"# + "\n")
        var logfmt = LogLine(format: .logfmt)
        logfmt.begin(time: Array("t".utf8), level: "info", message: "two words")
        logfmt.field("path", "/plain")
        logfmt.end()
        defer { logfmt.out.free() }
        XCTAssertEqual(String(decoding: logfmt.bytes, as: UTF8.self), "time=t level=info msg=\"two words\" path=/plain\n")
    }

    func testResponseSerializationAddsServerHeaders() {
        var out = ByteWriter(capacity: 16)
        defer { out.free() }
        let context = ResponseSerializer.Context(date: Array("D".utf8), serverLine: Array("Server: s\r\n".utf8), requestID: "r1",
                                                 keepAlive: true, http10: false, isHead: true)
        let response = HTTPResponse(status: 200, headers: ["Content-Length": "999", "X-Evil": "a\r\nInjected: 1"], body: Array("abc".utf8))
        _ = ResponseSerializer.append(response, context: context, to: &out, detachLargeBody: 1 << 20)
        XCTAssertEqual(String(decoding: out.array, as: UTF8.self),
                       "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nDate: D\r\nServer: s\r\nX-Request-ID: r1\r\n\r\n")
    }
}

extension ParserTests {
    func testTransferEncodingBeforeContentLengthIsRejectedToo() {
        let seen = parseEverySplit("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n")
        XCTAssertEqual(seen, [.error(.conflictingFraming("Content-Length and Transfer-Encoding are both present"))])
    }
}

extension ParserTests {
    func testRandomInputNeverCrashesAndEndsInAnErrorOrRequests() {
        var generator = SystemRandomNumberGenerator()
        let seeds = ["GET / HTTP/1.1\r\n", "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", "PUT / HTTP/1.0\r\nContent-Length: 4\r\n\r\n"]
        for round in 0..<500 {
            let parser = RequestParser(maxHeaderBytes: 512, maxBodyBytes: 256)
            var bytes = Array(seeds[round % seeds.count].utf8)
            bytes += (0..<Int.random(in: 0...600, using: &generator)).map { _ in
                // Mostly printable, with CR/LF and arbitrary bytes mixed in.
                switch UInt8.random(in: 0...9, using: &generator) {
                case 0: 13
                case 1: 10
                case 2: UInt8.random(in: 0...255, using: &generator)
                default: UInt8.random(in: 0x20...0x7E, using: &generator)
                }
            }
            var offset = 0
            while offset < bytes.count {
                let step = Int.random(in: 1...64, using: &generator)
                parser.feed(Array(bytes[offset..<min(bytes.count, offset + step)]))
                offset += step
            }
            for case .error(let error) in parser.events {
                XCTAssertTrue([400, 413, 417, 431, 501].contains(error.status), "\(error)")
            }
        }
    }
}
