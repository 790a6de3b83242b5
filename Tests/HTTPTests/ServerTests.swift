#if canImport(Glibc)
import Infrastructure
import Glibc
#endif
import XCTest
@testable import HTTP

final class ServerTests: XCTestCase {
    func testKeepAliveReusesTheConnectionAndAddsServerHeaders() throws {
        let (server, port) = try startServer { $0.serverName = "osprey-test" }
        defer { server.shutdown(gracePeriod: 1) }
        let client = try TestClient(port: port)
        client.send("GET /a?x=1 HTTP/1.1\r\nHost: t\r\nX-Request-ID: client-id-7\r\n\r\n")
        let first = try XCTUnwrap(client.readResponse())
        XCTAssertEqual(first.status, 200)
        XCTAssertEqual(first.text, "GET /a?x=1 0\n")
        XCTAssertEqual(first.header("X-Request-ID"), "client-id-7")
        XCTAssertEqual(first.header("Server"), "osprey-test")
        XCTAssertNotNil(first.header("Date")?.range(of: #"^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$"#, options: .regularExpression))
        XCTAssertNil(first.header("Connection"))
        client.send("GET /b HTTP/1.1\r\nHost: t\r\n\r\n")
        let second = try XCTUnwrap(client.readResponse())
        XCTAssertEqual(second.text, "GET /b? 0\n")
        XCTAssertNotEqual(second.header("X-Request-ID"), first.header("X-Request-ID"))
        XCTAssertEqual(server.openConnections, 1)
    }

    func testPipelinedResponsesKeepRequestOrder() throws {
        let (server, port) = try startServer()
        defer { server.shutdown(gracePeriod: 1) }
        let client = try TestClient(port: port)
        // The first request is the slowest, so its response is produced last.
        client.send("GET /1 HTTP/1.1\r\nX-Delay-Ms: 150\r\n\r\nGET /2 HTTP/1.1\r\nX-Delay-Ms: 50\r\n\r\nGET /3 HTTP/1.1\r\n\r\n")
        let paths = (0..<3).compactMap { _ in client.readResponse()?.text }
        XCTAssertEqual(paths, ["GET /1? 0\n", "GET /2? 0\n", "GET /3? 0\n"])
    }

    func testHTTP10ClosesAfterTheResponse() throws {
        let (server, port) = try startServer()
        defer { server.shutdown(gracePeriod: 1) }
        let client = try TestClient(port: port)
        client.send("GET /old HTTP/1.0\r\n\r\n")
        let response = try XCTUnwrap(client.readResponse())
        XCTAssertEqual(response.header("Connection"), "close")
        XCTAssertTrue(client.isClosedByPeer())

        let kept = try TestClient(port: port)
        kept.send("GET /old HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        XCTAssertEqual(kept.readResponse()?.header("Connection"), "keep-alive")
        kept.send("GET /again HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        XCTAssertEqual(kept.readResponse()?.text, "GET /again? 0\n")
    }

    func testConnectionCloseIsHonoured() throws {
        let (server, port) = try startServer()
        defer { server.shutdown(gracePeriod: 1) }
        let client = try TestClient(port: port)
        client.send("GET /x HTTP/1.1\r\nConnection: close\r\n\r\nGET /ignored HTTP/1.1\r\n\r\n")
        XCTAssertEqual(client.readResponse()?.header("Connection"), "close")
        XCTAssertTrue(client.isClosedByPeer())
    }

    func testChunkedAndContentLengthBodies() throws {
        let (server, port) = try startServer()
        defer { server.shutdown(gracePeriod: 1) }
        let client = try TestClient(port: port)
        client.send("POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n")
        usleep(20_000)
        client.send("2\r\nde\r\n0\r\n\r\n")
        XCTAssertEqual(client.readResponse()?.text, "POST /c? 5\nabcde")
        client.send("PUT /l HTTP/1.1\r\nContent-Length: 4\r\n\r\nwxyz")
        XCTAssertEqual(client.readResponse()?.text, "PUT /l? 4\nwxyz")
    }

    func testLargeResponseBodyArrivesWhole() throws {
        let big = [UInt8](repeating: 0x61, count: 3 << 20)
        let (server, port) = try startServer(responder: { _ in HTTPResponse(status: 200, body: big) })
        defer { server.shutdown(gracePeriod: 1) }
        let client = try TestClient(port: port)
        client.send("GET /big HTTP/1.1\r\n\r\nGET /big2 HTTP/1.1\r\n\r\n")
        XCTAssertEqual(client.readResponse()?.body.count, big.count)
        XCTAssertEqual(client.readResponse()?.body, big)
    }

    func testExpectContinue() throws {
        let (server, port) = try startServer { $0.maxBodyBytes = 100 }
        defer { server.shutdown(gracePeriod: 1) }
        let client = try TestClient(port: port)
        client.send("PUT /u HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
        XCTAssertEqual(client.readResponse()?.status, 100)
        client.send("hello")
        XCTAssertEqual(client.readResponse()?.text, "PUT /u? 5\nhello")

        let refused = try TestClient(port: port)
        refused.send("PUT /u HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 500\r\n\r\n")
        let response = try XCTUnwrap(refused.readResponse())
        XCTAssertEqual(response.status, 413)
        XCTAssertTrue(refused.isClosedByPeer())
    }

    func testHeadHasHeadersButNoBody() throws {
        let (server, port) = try startServer()
        defer { server.shutdown(gracePeriod: 1) }
        let client = try TestClient(port: port)
        client.send("HEAD /h HTTP/1.1\r\n\r\nGET /after HTTP/1.1\r\n\r\n")
        let head = try XCTUnwrap(client.readResponse(head: true))
        XCTAssertEqual(head.header("Content-Length"), "11")
        // Had a body been sent, it would corrupt the next response.
        XCTAssertEqual(client.readResponse()?.text, "GET /after? 0\n")
    }

    func testErrorsAnswerJSONAndClose() throws {
        let (server, port) = try startServer { $0.maxHeaderBytes = 512; $0.maxBodyBytes = 64 }
        defer { server.shutdown(gracePeriod: 1) }
        let cases: [(String, Int)] = [
            ("BLAH\u{01} / HTTP/1.1\r\n\r\n", 400),
            ("GET / HTTP/1.1\r\nX-Big: \(String(repeating: "x", count: 1000))\r\n\r\n", 431),
            ("POST / HTTP/1.1\r\nContent-Length: 1000\r\n\r\n" + String(repeating: "z", count: 1000), 413),
            ("POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
            ("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400),
            ("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501),
        ]
        for (request, status) in cases {
            let client = try TestClient(port: port)
            client.send(request)
            let response = try XCTUnwrap(client.readResponse(), "no response to \(request.prefix(40))")
            XCTAssertEqual(response.status, status, request)
            XCTAssertEqual(response.header("Content-Type"), "application/json")
            XCTAssertTrue(response.text.hasPrefix(#"{"error": ""#), response.text)
            XCTAssertEqual(response.header("Connection"), "close")
            XCTAssertTrue(client.isClosedByPeer(), "still open after \(status)")
        }
        XCTAssertTrue(eventually { server.openConnections == 0 })
    }

    func testErrorAfterAGoodPipelinedRequestComesSecond() throws {
        let (server, port) = try startServer()
        defer { server.shutdown(gracePeriod: 1) }
        let client = try TestClient(port: port)
        client.send("GET /ok HTTP/1.1\r\nX-Delay-Ms: 50\r\n\r\n\u{01}\u{02}junk\r\n\r\n")
        XCTAssertEqual(client.readResponse()?.status, 200)
        XCTAssertEqual(client.readResponse()?.status, 400)
        XCTAssertTrue(client.isClosedByPeer())
    }

    func testIdleKeepAliveConnectionIsClosed() throws {
        let (server, port) = try startServer { $0.idleTimeout = 0.2 }
        defer { server.shutdown(gracePeriod: 1) }
        let client = try TestClient(port: port, timeout: 2)
        client.send("GET / HTTP/1.1\r\n\r\n")
        XCTAssertEqual(client.readResponse()?.status, 200)
        let start = SystemClock.nanoseconds()
        XCTAssertTrue(client.isClosedByPeer())
        XCTAssertLessThan(Double(SystemClock.nanoseconds() - start) / 1e9, 1.5)
        XCTAssertTrue(eventually { server.openConnections == 0 })
    }

    func testSilentNewConnectionIsClosedAfterTheReadTimeout() throws {
        let (server, port) = try startServer { $0.readTimeout = 0.2; $0.idleTimeout = 60 }
        defer { server.shutdown(gracePeriod: 1) }
        let client = try TestClient(port: port, timeout: 2)
        XCTAssertTrue(client.isClosedByPeer())
        XCTAssertTrue(eventually { server.openConnections == 0 })
    }

    func testSlowRequestGets408() throws {
        let (server, port) = try startServer { $0.readTimeout = 0.2 }
        defer { server.shutdown(gracePeriod: 1) }
        let client = try TestClient(port: port, timeout: 2)
        client.send("GET /slow HTTP/1.1\r\nHost: t\r\n")
        let response = try XCTUnwrap(client.readResponse())
        XCTAssertEqual(response.status, 408)
        XCTAssertTrue(client.isClosedByPeer())
    }

    func testConnectionsBeyondTheLimitAreTurnedAway() throws {
        let (server, port) = try startServer { $0.maxConnections = 2 }
        defer { server.shutdown(gracePeriod: 1) }
        let a = try TestClient(port: port), b = try TestClient(port: port)
        for client in [a, b] {
            client.send("GET / HTTP/1.1\r\n\r\n")
            XCTAssertEqual(client.readResponse()?.status, 200)
        }
        let c = try TestClient(port: port, timeout: 2)
        c.send("GET / HTTP/1.1\r\n\r\n")
        if let response = c.readResponse() { XCTAssertEqual(response.status, 503) }
        XCTAssertTrue(c.isClosedByPeer())
        XCTAssertEqual(server.openConnections, 2)
    }

    func testShutdownLetsTheRequestInFlightFinish() throws {
        let started = Latch()
        let (server, port) = try startServer(responder: { request in
            if request.path == "/slow" { started.open() }
            return await echoResponder(request)
        })
        let idle = try TestClient(port: port)
        idle.send("GET / HTTP/1.1\r\n\r\n")
        XCTAssertNotNil(idle.readResponse())
        let client = try TestClient(port: port)
        client.send("GET /slow HTTP/1.1\r\nX-Delay-Ms: 300\r\n\r\n")
        // Shut down only once the request is with the responder.
        XCTAssertTrue(eventually { started.opened })
        let stopped = Latch()
        Thread.detachNewThread {
            server.shutdown(gracePeriod: 5)
            stopped.open()
        }
        // The idle keep-alive connection is closed at once.
        XCTAssertTrue(idle.isClosedByPeer())
        let response = try XCTUnwrap(client.readResponse())
        XCTAssertEqual(response.text, "GET /slow? 0\n")
        XCTAssertEqual(response.header("Connection"), "close")
        XCTAssertTrue(eventually { stopped.opened })
        XCTAssertTrue(server.isShuttingDown)
        XCTAssertThrowsError(try TestClient(port: port))
    }

    func testGracePeriodBoundsShutdown() throws {
        let (server, port) = try startServer()
        let client = try TestClient(port: port)
        client.send("GET /forever HTTP/1.1\r\nX-Delay-Ms: 5000\r\n\r\n")
        XCTAssertTrue(eventually { server.openConnections == 1 })
        let start = SystemClock.nanoseconds()
        server.shutdown(gracePeriod: 0.2)
        XCTAssertLessThan(Double(SystemClock.nanoseconds() - start) / 1e9, 2)
        XCTAssertTrue(client.isClosedByPeer())
    }

    func testGarbageNeverCrashesAndConnectionsAreReleased() throws {
        let (server, port) = try startServer { $0.maxHeaderBytes = 1024; $0.readTimeout = 0.3 }
        defer { server.shutdown(gracePeriod: 1) }
        var generator = SystemRandomNumberGenerator()
        for round in 0..<40 {
            let client = try TestClient(port: port, timeout: 1)
            let length = Int.random(in: 1...3000, using: &generator)
            var bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            if round % 3 == 0 { bytes = Array("GET / HTTP/1.1\r\n".utf8) + bytes }
            client.send(bytes)
            if round % 2 == 0 { _ = client.readResponse() }
        }
        // Mid-request and mid-response disconnects.
        for _ in 0..<5 {
            let client = try TestClient(port: port)
            client.send("POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\npartial")
        }
        XCTAssertTrue(eventually(timeout: 5) { server.openConnections == 0 }, "open: \(server.openConnections)")
        let client = try TestClient(port: port)
        client.send("GET /alive HTTP/1.1\r\n\r\n")
        XCTAssertEqual(client.readResponse()?.status, 200)
    }

    func testClientLeavingMidResponseIsHarmless() throws {
        let big = [UInt8](repeating: 0x62, count: 8 << 20)
        let (server, port) = try startServer(responder: { request in
            if request.headers["X-Delay-Ms"] != nil { try? await Task.sleep(nanoseconds: 30_000_000) }
            return HTTPResponse(status: 200, body: big)
        })
        defer { server.shutdown(gracePeriod: 1) }
        for _ in 0..<3 {
            let client = try TestClient(port: port)
            client.send("GET /big HTTP/1.1\r\n\r\n")
            var byte: UInt8 = 0
            _ = recv(client.fd, &byte, 1, 0)
            // Leave with most of the 8 MiB unread: the server's writes now fail with EPIPE/ECONNRESET.
            var linger = linger(l_onoff: 1, l_linger: 0)
            setsockopt(client.fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<linger>.size))
        }
        for _ in 0..<3 {
            // A plain close before the answer: the server's later writes hit a dead peer (EPIPE, SIGPIPE if not ignored).
            let client = try TestClient(port: port)
            client.send("GET /big HTTP/1.1\r\nX-Delay-Ms: 30\r\n\r\n")
            shutdown(client.fd, Int32(SHUT_RDWR))
        }
        XCTAssertTrue(eventually { server.openConnections == 0 }, "open: \(server.openConnections)")
        let client = try TestClient(port: port)
        client.send("GET /again HTTP/1.1\r\n\r\n")
        XCTAssertEqual(client.readResponse()?.body.count, big.count)
    }

    func testInlineResponderAnswersOnTheLoopAndCanDefer() throws {
        let (server, port) = try startServer(inline: { request in
            request.path == "/fast" ? HTTPResponse(status: 200, body: Array("inline".utf8)) : nil
        })
        defer { server.shutdown(gracePeriod: 1) }
        let client = try TestClient(port: port)
        client.send("GET /fast HTTP/1.1\r\n\r\nGET /slow HTTP/1.1\r\n\r\n")
        XCTAssertEqual(client.readResponse()?.text, "inline")
        XCTAssertEqual(client.readResponse()?.text, "GET /slow? 0\n")
    }

    func testAccessLogLineInJSON() throws {
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&fds), 0)
        defer { Glibc.close(fds[0]) }
        let (server, port) = try startServer { $0.logLevel = .info; $0.logFormat = .json; $0.logFileDescriptor = fds[1] }
        let client = try TestClient(port: port)
        client.send("GET /logged?q=1 HTTP/1.1\r\nX-Request-ID: log-me\r\n\r\n")
        XCTAssertNotNil(client.readResponse())
        server.shutdown(gracePeriod: 1)
        Glibc.close(fds[1])
        var data = [UInt8](repeating: 0, count: 4096)
        let n = read(fds[0], &data, data.count)
        let line = String(decoding: data[..<max(0, n)], as: UTF8.self)
        let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], line)
        XCTAssertEqual(object["method"] as? String, "GET")
        XCTAssertEqual(object["path"] as? String, "/logged")
        XCTAssertEqual(object["status"] as? Int, 200)
        XCTAssertEqual(object["request_id"] as? String, "log-me")
        XCTAssertNotNil(object["duration_ms"])
        XCTAssertEqual((object["remote"] as? String)?.hasPrefix("127.0.0.1:"), true)
    }

    func testBindFailureIsTyped() throws {
        let (server, port) = try startServer()
        defer { server.shutdown(gracePeriod: 1) }
        var configuration = HTTPServerConfiguration(host: "127.0.0.1", port: port)
        configuration.logLevel = .off
        let second = HTTPServer(configuration: configuration, responder: echoResponder)
        XCTAssertThrowsError(try second.start()) { error in
            guard case HTTPServerError.bindFailed = error else { return XCTFail("\(error)") }
        }
        configuration.ioThreads = 2
        XCTAssertThrowsError(try HTTPServer(configuration: configuration, responder: echoResponder).start())
        XCTAssertThrowsError(try HTTPServer(configuration: HTTPServerConfiguration(host: "not-an-ip", port: 0), responder: echoResponder).start())
    }

    func testSeveralIOThreadsShareThePort() throws {
        let (server, port) = try startServer { $0.ioThreads = 2 }
        defer { server.shutdown(gracePeriod: 1) }
        let clients = try (0..<8).map { _ in try TestClient(port: port) }
        for (i, client) in clients.enumerated() { client.send("GET /\(i) HTTP/1.1\r\n\r\n") }
        for (i, client) in clients.enumerated() { XCTAssertEqual(client.readResponse()?.text, "GET /\(i)? 0\n") }
    }
}

extension ServerTests {
    func testManyPipelinedRequestsPassThroughBackpressure() throws {
        let (server, port) = try startServer { $0.maxPipelinedRequests = 4 }
        defer { server.shutdown(gracePeriod: 1) }
        let client = try TestClient(port: port)
        client.send((0..<200).map { "GET /\($0) HTTP/1.1\r\n\r\n" }.joined())
        for i in 0..<200 {
            guard let response = client.readResponse() else { return XCTFail("response \(i) missing") }
            XCTAssertEqual(response.text, "GET /\(i)? 0\n")
        }
    }

    func testIPv6Loopback() throws {
        var configuration = HTTPServerConfiguration(host: "::1", port: 0)
        configuration.logLevel = .off
        let server = HTTPServer(configuration: configuration, responder: echoResponder)
        let port: Int
        do { port = try server.start() } catch { throw XCTSkip("no IPv6 loopback here: \(error)") }
        defer { server.shutdown(gracePeriod: 1) }
        let fd = socket(AF_INET6, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in6()
        address.sin6_family = sa_family_t(AF_INET6)
        address.sin6_port = UInt16(port).bigEndian
        address.sin6_addr = in6addr_loopback
        let status = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
        }
        XCTAssertEqual(status, 0)
        let request = Array("GET /six HTTP/1.1\r\nConnection: close\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            received.append(contentsOf: chunk[..<n])
        }
        XCTAssertTrue(String(decoding: received, as: UTF8.self).hasSuffix("GET /six? 0\n"))
    }
}
