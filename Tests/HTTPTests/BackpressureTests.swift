#if canImport(Glibc)
import Glibc
#endif
import Foundation
import XCTest
@testable import HTTP

/// Issue 11, defects 5 and 8 on a live server: pipelining bounded while parsing, backpressure on unread answers,
/// work cancelled with its client, probes over the connection budget, and the small protocol fixes on the wire.
final class BackpressureTests: XCTestCase {
    /// Counts responder calls and the most running at once.
    final class Gauge: @unchecked Sendable {
        private let lock = NSLock()
        private var running = 0
        private(set) var peak = 0
        private(set) var calls = 0
        private(set) var cancelled = 0
        func enter() { lock.withLock { running += 1; calls += 1; peak = max(peak, running) } }
        func leave(cancelled wasCancelled: Bool = false) { lock.withLock { running -= 1; if wasCancelled { cancelled += 1 } } }
        var snapshot: (calls: Int, peak: Int, cancelled: Int) { lock.withLock { (calls, peak, cancelled) } }
    }

    func testPipeliningLimitIsEnforcedWhileParsing() throws {
        let gauge = Gauge()
        let (server, port) = try startServer(responder: { request in
            gauge.enter()
            try? await Task.sleep(nanoseconds: 5_000_000)
            gauge.leave()
            return HTTPResponse(status: 200, body: Array(request.path.utf8))
        })
        defer { server.shutdown(gracePeriod: 1) }
        let client = try TestClient(port: port, timeout: 10)
        // About 40 KB in one write: one read used to admit every request in it.
        client.send((0..<2000).map { "GET /\($0) HTTP/1.1\r\n\r\n" }.joined())
        for i in 0..<2000 {
            guard let response = client.readResponse() else { return XCTFail("response \(i) missing") }
            XCTAssertEqual(response.text, "/\(i)")
        }
        XCTAssertLessThanOrEqual(gauge.snapshot.peak, server.configuration.maxPipelinedRequests)
    }

    func testAClientThatNeverReadsStopsGettingAnswersComputed() throws {
        let gauge = Gauge()
        let body = [UInt8](repeating: 0x61, count: 64 * 1024)
        let (server, port) = try startServer(responder: { _ in
            gauge.enter()
            gauge.leave()
            return HTTPResponse(status: 200, body: body)
        })
        defer { server.shutdown(gracePeriod: 1) }
        let client = try TestClient(port: port)
        var size: Int32 = 16 * 1024
        setsockopt(client.fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        client.send((0..<3000).map { "GET /\($0) HTTP/1.1\r\n\r\n" }.joined())
        // Answers fill the socket buffers, then the unsent-output bound; after that nothing more is computed.
        // Waits for the count to stop moving (slow under sanitizers), then checks it stays put and is small.
        var settled = -1
        for _ in 0..<40 {
            usleep(250_000)
            let now = gauge.snapshot.calls
            if now == settled { break }
            settled = now
        }
        usleep(500_000)
        let later = gauge.snapshot.calls
        XCTAssertEqual(later, settled, "answers kept being computed for a client that does not read")
        XCTAssertLessThan(later, 600, "3000 answers of 64 KiB were computed for a client that reads none")
        // Reading resumes everything, in order.
        for i in 0..<3000 {
            guard let response = client.readResponse() else { return XCTFail("response \(i) missing") }
            XCTAssertEqual(response.body.count, body.count)
        }
    }

    func testAResetCancelsTheClientsRequests() throws {
        let gauge = Gauge()
        let (server, port) = try startServer(responder: { _ in
            gauge.enter()
            do {
                try await Task.sleep(nanoseconds: 20_000_000_000)
                gauge.leave()
            } catch {
                gauge.leave(cancelled: true)
            }
            return HTTPResponse(status: 200)
        })
        defer { server.shutdown(gracePeriod: 1) }
        do {
            let client = try TestClient(port: port)
            // Six pipelined requests: the connection's window runs four, the other two wait their turn.
            client.send((0..<6).map { "GET /slow/\($0) HTTP/1.1\r\n\r\n" }.joined())
            let window = server.configuration.maxConcurrentRequestsPerConnection
            XCTAssertTrue(eventually { gauge.snapshot.calls == window })
            var linger = linger(l_onoff: 1, l_linger: 0)
            setsockopt(client.fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<linger>.size))
        }
        XCTAssertTrue(eventually { gauge.snapshot.cancelled == server.configuration.maxConcurrentRequestsPerConnection }, "cancelled: \(gauge.snapshot)")
        XCTAssertTrue(eventually { server.openConnections == 0 })
        usleep(100_000)
        XCTAssertEqual(gauge.snapshot.calls, server.configuration.maxConcurrentRequestsPerConnection, "waiting requests of a gone client started")
    }

    func testAFloodOfUnreadPipelinedRequestsStaysBounded() throws {
        let gauge = Gauge()
        // About the size of a /metrics answer.
        let body = [UInt8](repeating: 0x6D, count: 12 * 1024)
        let (server, port) = try startServer(responder: { _ in
            gauge.enter()
            gauge.leave()
            return HTTPResponse(status: 200, body: body)
        })
        defer { server.shutdown(gracePeriod: 1) }
        let burst = Array(String(repeating: "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", count: 64 * 1024 / 34).utf8)
        let before = residentBytes()
        var clients: [TestClient] = []
        for _ in 0..<100 {
            let client = try TestClient(port: port)
            client.send(burst)
            clients.append(client)
        }
        usleep(500_000)
        let peak = residentBytes()
        let computed = gauge.snapshot.calls
        // 100 x 1900 answers used to be computed and queued (hundreds of MB).
        XCTAssertLessThan(computed, 100 * 200, "answers computed for clients that read none")
        for client in clients {
            var linger = linger(l_onoff: 1, l_linger: 0)
            setsockopt(client.fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<linger>.size))
        }
        clients.removeAll()
        XCTAssertTrue(eventually(timeout: 5) { server.openConnections == 0 }, "open: \(server.openConnections)")
        XCTAssertLessThan(peak - before, 200 << 20, "RSS grew by \((peak - before) >> 20) MiB")
        let client = try TestClient(port: port, timeout: 2)
        let start = Date()
        client.send("GET /metrics HTTP/1.1\r\n\r\n")
        XCTAssertEqual(client.readResponse()?.status, 200)
        XCTAssertLessThan(Date().timeIntervalSince(start), 1)
    }

    func testProbesAreAnsweredWhenTheConnectionBudgetIsFull() throws {
        let inline: HTTPInlineResponder = { request in
            request.path == "/v2/health/live" ? HTTPResponse(status: 200, body: Array(#"{"live":true}"#.utf8)) : nil
        }
        let (server, port) = try startServer({ $0.maxConnections = 2 }, inline: inline)
        defer { server.shutdown(gracePeriod: 1) }
        let a = try TestClient(port: port), b = try TestClient(port: port)
        for client in [a, b] {
            client.send("GET / HTTP/1.1\r\n\r\n")
            XCTAssertEqual(client.readResponse()?.status, 200)
        }
        let probe = try TestClient(port: port)
        probe.send("GET /v2/health/live HTTP/1.1\r\n\r\n")
        let live = try XCTUnwrap(probe.readResponse())
        XCTAssertEqual(live.status, 200)
        XCTAssertEqual(live.header("Connection"), "close")
        XCTAssertTrue(probe.isClosedByPeer())
        let other = try TestClient(port: port)
        other.send("GET /work HTTP/1.1\r\n\r\n")
        XCTAssertEqual(other.readResponse()?.status, 503)
        XCTAssertTrue(other.isClosedByPeer())
        XCTAssertEqual(server.openConnections, 2)
    }

    func testUnauthenticatedOversizeUploadGets401BeforeItsBodyIsRead() throws {
        var configuration = HTTPServerConfiguration(host: "127.0.0.1", port: 0)
        configuration.logLevel = .off
        configuration.maxBodyBytes = 1024
        let server = HTTPServer(configuration: configuration, responder: echoResponder, admission: { head in
            head.headers["Authorization"] == nil ? HTTPResponse(status: 401, headers: ["WWW-Authenticate": "Bearer"]) : nil
        })
        let port = try server.start()
        defer { server.shutdown(gracePeriod: 1) }
        let client = try TestClient(port: port)
        client.send("PUT /v2/repository/models/m/versions/1 HTTP/1.1\r\nContent-Length: 1000000000\r\n\r\n")
        let response = try XCTUnwrap(client.readResponse())
        XCTAssertEqual(response.status, 401)
        XCTAssertEqual(response.header("WWW-Authenticate"), "Bearer")
        let authorized = try TestClient(port: port)
        authorized.send("PUT /u HTTP/1.1\r\nAuthorization: Bearer x\r\nContent-Length: 1000000000\r\n\r\n")
        XCTAssertEqual(authorized.readResponse()?.status, 413)
    }

    func testProtocolFixesOnTheWire() throws {
        let (server, port) = try startServer()
        defer { server.shutdown(gracePeriod: 1) }
        let query = try TestClient(port: port)
        query.send("QUERY /q HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi")
        XCTAssertEqual(query.readResponse()?.text, "QUERY /q? 2\nhi")
        let future = try TestClient(port: port)
        future.send("GET / HTTP/9.9\r\n\r\n")
        let refused = try XCTUnwrap(future.readResponse())
        XCTAssertEqual(refused.status, 505)
        XCTAssertTrue(refused.text.contains("HTTP/9.9"))
        let chunks = try TestClient(port: port)
        chunks.send("POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n")
        XCTAssertEqual(chunks.readResponse()?.status, 400)
    }
}

/// This process's resident set size in bytes.
func residentBytes() -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8),
          let pages = text.split(separator: " ").dropFirst().first.flatMap({ Int($0) }) else { return 0 }
    return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
}
