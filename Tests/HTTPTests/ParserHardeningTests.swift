import XCTest
@testable import HTTP

/// Issue 11, defect 8 (parser half): each fed whole, byte by byte, split at every offset and suspended after every request.
final class ParserHardeningTests: XCTestCase {
    func testUnknownButValidMethodsReachTheRouterAsSent() {
        for method in ["QUERY", "get", "X-CUSTOM.1~", "BREW"] {
            let seen = parseEverySplit("\(method) /v2/health/live HTTP/1.1\r\nHost: h\r\n\r\nGET /next HTTP/1.1\r\n\r\n")
            XCTAssertEqual(seen.count, 2, method)
            guard case .request(let parsed, "/v2/health/live", _, _, _, _, true, _)? = seen.first else { return XCTFail("\(method): \(seen)") }
            XCTAssertEqual(parsed, method)
            guard case .request("GET", "/next", _, _, _, _, _, _)? = seen.last else { return XCTFail("\(method): \(seen)") }
        }
    }

    func testAnUnknownMethodWithABodyKeepsItsFraming() {
        let seen = parseEverySplit("QUERY /q HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcPROPFIND /p HTTP/1.1\r\n\r\n")
        XCTAssertEqual(seen.count, 2)
        guard case .request("QUERY", "/q", _, _, _, let body, _, _)? = seen.first else { return XCTFail("\(seen)") }
        XCTAssertEqual(body, Array("abc".utf8))
        guard case .request("PROPFIND", "/p", _, _, _, _, _, _)? = seen.last else { return XCTFail("\(seen)") }
    }

    func testNonTokenMethodsAndOverlongTokensAreMalformed() {
        for text in ["G(T / HTTP/1.1\r\n\r\n", "\u{16}\u{03}\u{01}\u{02}\u{00} / HTTP/1.1\r\n\r\n", " GET / HTTP/1.1\r\n\r\n",
                     String(repeating: "A", count: 40) + " / HTTP/1.1\r\n\r\n"] {
            let seen = parseEverySplit(text)
            guard seen.count == 1, case .error(.malformed)? = seen.first else { return XCTFail("\(text.debugDescription): \(seen)") }
        }
    }

    func testEmptyLinesBetweenRequestsAreTolerated() {
        let seen = parseEverySplit("GET /a HTTP/1.1\r\n\r\n\r\n\r\nGET /b HTTP/1.1\r\n\r\n")
        XCTAssertEqual(seen.count, 2)
    }

    func testChunkDataMustEndWithCRLF() {
        for framing in ["5\r\nhelloXX0\r\n\r\n", "5\r\nhello\rX0\r\n\r\n", "5\r\nhelloX\n0\r\n\r\n", "2\r\nhi\r\n5\r\nhello\n\n0\r\n\r\n"] {
            let seen = parseEverySplit("POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + framing + "GET /after HTTP/1.1\r\n\r\n")
            XCTAssertEqual(seen, [.error(.malformed("chunk data is not followed by CRLF"))], framing.debugDescription)
        }
        let good = parseEverySplit("POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n2\r\nXX\r\n0\r\n\r\n")
        guard case .request(_, _, _, _, _, let body, _, _)? = good.first else { return XCTFail("\(good)") }
        XCTAssertEqual(body, Array("helloXX".utf8))
    }

    func testOnlyHTTP1IsServed() {
        for (version, major, minor) in [("9.9", 9, 9), ("2.0", 2, 0), ("0.9", 0, 9), ("3.1", 3, 1)] {
            let seen = parseEverySplit("GET / HTTP/\(version)\r\nHost: h\r\n\r\n")
            XCTAssertEqual(seen, [.error(.unsupportedVersion(major: major, minor: minor))], version)
        }
        XCTAssertEqual(HTTPParseError.unsupportedVersion(major: 9, minor: 9).status, 505)
        guard case .request(_, _, _, "1.1", _, _, _, _)? = parseEverySplit("GET / HTTP/1.1\r\n\r\n").first else { return XCTFail() }
    }

    func testAdmissionRefusesFromTheHeadersBeforeTheBodySizeIsJudged() {
        var asked: [String] = []
        let gate: (HTTPRequest) -> HTTPResponse? = { head in
            asked.append("\(head.method) \(head.path) \(head.headers["Authorization"] ?? "-")")
            return head.headers["Authorization"] == nil ? HTTPResponse(status: 401) : nil
        }
        // Oversize and unauthenticated: 401, not 413.
        let refused = parseEverySplit("PUT /v2/repository/models/m/versions/1 HTTP/1.1\r\nContent-Length: 999999999\r\n\r\nxx", maxBody: 1000, admit: gate)
        XCTAssertEqual(refused, [.refused(status: 401)])
        // Authenticated but oversize: 413 as before.
        let large = parseEverySplit("PUT /u HTTP/1.1\r\nAuthorization: Bearer t\r\nContent-Length: 999999999\r\n\r\n", maxBody: 1000, admit: gate)
        XCTAssertEqual(large, [.error(.bodyTooLarge(limit: 1000, declared: 999_999_999))])
        // Chunked bodies are asked too; requests without a body never are.
        XCTAssertEqual(parseEverySplit("POST /p HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\n\r\n", admit: gate), [.refused(status: 401)])
        asked.removeAll()
        XCTAssertEqual(parseEverySplit("GET /g HTTP/1.1\r\n\r\nDELETE /d HTTP/1.1\r\nContent-Length: 0\r\n\r\n", admit: gate).count, 2)
        XCTAssertEqual(asked, [])
    }

    func testSuspensionStopsExactlyAtARequestBoundary() {
        let requests = (0..<10).map { "GET /\($0) HTTP/1.1\r\n\r\n" }
        let bytes = Array(requests.joined().utf8)
        let parser = RequestParser(maxHeaderBytes: 1024, maxBodyBytes: 1024)
        var complete = 0
        var suspendAt = 3
        parser.shouldSuspend = { [unowned parser] in parser.events.count >= suspendAt }
        var consumed = 0
        var paths: [String] = []
        while consumed < bytes.count {
            let n = parser.feed(Array(bytes[consumed...]))
            for event in parser.events { if case .request(let p) = event { paths.append(p.request.path); complete += 1 } }
            parser.events.removeAll()
            consumed += n
            if complete >= 3 {
                // Parsing stopped after the third request: the rest starts with the fourth.
                XCTAssertEqual(consumed, requests.prefix(3).joined().utf8.count)
                XCTAssertEqual(paths, ["/0", "/1", "/2"])
                complete = -100
                suspendAt = .max
            }
        }
        XCTAssertEqual(paths, (0..<10).map { "/\($0)" })
    }
}
