#if canImport(Glibc)
import Glibc
#endif
import Foundation
import XCTest
@testable import HTTP

/// On a live server: W3C `traceparent` continued, echoed and logged; a half-closed client gets its answers.
final class TraceAndHalfCloseTests: XCTestCase {
    private let incoming = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    func testTraceparentIsParsedByTheSpec() {
        XCTAssertEqual(TraceContext.parse(incoming)?.traceID, "4bf92f3577b34da6a3ce929d0e0e4736")
        XCTAssertEqual(TraceContext.parse(incoming)?.parentID, "00f067aa0ba902b7")
        XCTAssertEqual(TraceContext.parse(incoming)?.flags, "01")
        // A later version may carry more fields after a dash; version 00 may not.
        XCTAssertNotNil(TraceContext.parse("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-holds"))
        for invalid in [
            "", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",
            "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
            "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01.",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
        ] {
            XCTAssertNil(TraceContext.parse(invalid), invalid)
        }
        let continued = TraceContext(continuing: incoming)
        XCTAssertEqual(continued.traceID, "4bf92f3577b34da6a3ce929d0e0e4736")
        XCTAssertEqual(continued.parentID, "00f067aa0ba902b7")
        XCTAssertNotEqual(continued.spanID, "00f067aa0ba902b7", "the server's span is its own")
        let fresh = TraceContext(continuing: "garbage")
        XCTAssertNil(fresh.parentID)
        XCTAssertNotNil(TraceContext.parse(fresh.traceparent), fresh.traceparent)
        XCTAssertNotEqual(fresh.traceID, TraceContext(continuing: nil).traceID)
        // Two traceparent fields are invalid: a new trace starts.
        let doubled = TraceContext(continuingFrom: HTTPHeaders([("traceparent", incoming), ("Traceparent", incoming)]))
        XCTAssertNotEqual(doubled.traceID, "4bf92f3577b34da6a3ce929d0e0e4736")
    }

    func testTraceparentIsEchoedWithTheSameTraceAndLogged() throws {
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&fds), 0)
        defer { Glibc.close(fds[0]) }
        let (server, port) = try startServer({ $0.logLevel = .info; $0.logFormat = .json; $0.logFileDescriptor = fds[1] },
                                             responder: { request in
            HTTPResponse(status: 200, body: Array((request.trace?.traceID ?? "none").utf8))
        })
        let client = try TestClient(port: port)
        client.send("GET /traced HTTP/1.1\r\ntraceparent: \(incoming)\r\n\r\n")
        let traced = try XCTUnwrap(client.readResponse())
        XCTAssertEqual(traced.text, "4bf92f3577b34da6a3ce929d0e0e4736", "the responder sees the trace")
        let echoed = try XCTUnwrap(TraceContext.parse(try XCTUnwrap(traced.header("traceparent"))))
        XCTAssertEqual(echoed.traceID, "4bf92f3577b34da6a3ce929d0e0e4736")
        XCTAssertNotEqual(echoed.parentID, "00f067aa0ba902b7", "the echo names the server's span")
        XCTAssertEqual(echoed.flags, "01")
        // Invalid: ignored, a new trace is started and still echoed.
        client.send("GET /fresh HTTP/1.1\r\ntraceparent: 00-XYZ\r\n\r\n")
        let fresh = try XCTUnwrap(client.readResponse())
        let restarted = try XCTUnwrap(TraceContext.parse(try XCTUnwrap(fresh.header("traceparent"))))
        XCTAssertEqual(fresh.text, restarted.traceID)
        // Errors the server answers itself carry one too.
        let broken = try TestClient(port: port)
        broken.send("NOT HTTP\r\n\r\n")
        let error = try XCTUnwrap(broken.readResponse())
        XCTAssertEqual(error.status, 400)
        XCTAssertNotNil(error.header("traceparent").flatMap(TraceContext.parse))
        server.shutdown(gracePeriod: 1)
        Glibc.close(fds[1])
        var data = [UInt8](repeating: 0, count: 8192)
        let n = read(fds[0], &data, data.count)
        let lines = String(decoding: data[..<max(0, n)], as: UTF8.self).split(separator: "\n")
        let objects = try lines.map { try XCTUnwrap(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }
        let tracedLine = try XCTUnwrap(objects.first { $0["path"] as? String == "/traced" })
        XCTAssertEqual(tracedLine["trace_id"] as? String, "4bf92f3577b34da6a3ce929d0e0e4736")
        let freshLine = try XCTUnwrap(objects.first { $0["path"] as? String == "/fresh" })
        XCTAssertEqual(freshLine["trace_id"] as? String, restarted.traceID)
    }

    func testAHalfClosedClientGetsEveryRequestItSentAnswered() throws {
        let (server, port) = try startServer({ $0.maxPipelinedRequests = 2; $0.maxConcurrentRequestsPerConnection = 1 },
                                             responder: { request in
            try? await Task.sleep(nanoseconds: 20_000_000)
            return HTTPResponse(status: 200, body: Array(request.path.utf8))
        })
        defer { server.shutdown(gracePeriod: 1) }
        let client = try TestClient(port: port, timeout: 5)
        // Five pipelined requests, more than the pipelining limit, then FIN: the held-back ones are answered too.
        client.send((0..<5).map { "GET /\($0) HTTP/1.1\r\n\r\n" }.joined())
        XCTAssertEqual(shutdown(client.fd, Int32(SHUT_WR)), 0)
        for i in 0..<5 {
            guard let response = client.readResponse() else { return XCTFail("response \(i) missing") }
            XCTAssertEqual(response.text, "/\(i)")
            XCTAssertNil(response.header("Connection"), "kept alive until the last")
        }
        XCTAssertTrue(client.isClosedByPeer(), "closed after the last answer")
        XCTAssertTrue(eventually { server.openConnections == 0 })
    }
}
