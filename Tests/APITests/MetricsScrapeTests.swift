#if canImport(Glibc)
import Glibc
#endif
import Foundation
import HTTP
import Serving
import Testing
@testable import API

/// A live server on port 0 after real traffic: every metric of README.md's table has samples in `/metrics`, and the
/// exposition has no family the table does not document.
@Suite(.serialized) struct MetricsScrapeTests {
    /// (name, type) rows of README.md's "## Metrics" table.
    static func documentedMetrics() throws -> [(name: String, type: String)] {
        let readme = try String(contentsOf: ServiceTests.repoRoot.appendingPathComponent("README.md"), encoding: .utf8)
        var rows: [(name: String, type: String)] = []
        var inSection = false
        for line in readme.split(separator: "\n") {
            if line.hasPrefix("## ") { inSection = line == "## Metrics" }
            guard inSection, line.hasPrefix("| `") else { continue }
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            rows.append((name: cells[0].trimmingCharacters(in: CharacterSet(charactersIn: "`")), type: cells[1]))
        }
        return rows
    }

    /// One request on its own connection (`Connection: close`), read to the end: status, headers and body.
    static func exchange(port: Int, _ method: String, _ target: String, headers: [String] = [], body: [UInt8] = []) throws
        -> (status: Int, head: String, body: [UInt8]) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { Glibc.close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw POSIXError(.ECONNREFUSED) }
        var timeout = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let head = (["\(method) \(target) HTTP/1.1", "Host: test", "Connection: close", "Content-Length: \(body.count)"] + headers)
            .joined(separator: "\r\n") + "\r\n\r\n"
        let request = Array(head.utf8) + body
        var sent = 0
        while sent < request.count {
            let n = request[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw POSIXError(.EPIPE) }
            sent += n
        }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n <= 0 { break }
            received += buffer[..<n]
        }
        let separator = Array("\r\n\r\n".utf8)
        guard let end = (0..<max(0, received.count - 3)).first(where: { Array(received[$0..<$0 + 4]) == separator }) else {
            throw POSIXError(.EBADMSG)
        }
        let headText = String(decoding: received[..<end], as: UTF8.self)
        let status = Int(headText.split(separator: " ").dropFirst().first ?? "") ?? 0
        return (status, headText, Array(received[(end + 4)...]))
    }

    @Test func everyDocumentedSeriesHasSamplesAfterRealTraffic() async throws {
        let documented = try Self.documentedMetrics()
        #expect(documented.count >= 15, "README.md's metrics table was not found")
        let (service, temp) = try await ServiceTests.makeService(cacheBytes: 1 << 20, responseCache: true)
        defer { try? FileManager.default.removeItem(at: temp) }
        var configuration = HTTPServerConfiguration(host: "127.0.0.1", port: 0)
        configuration.logLevel = .off
        let server = HTTPServer(configuration: configuration, responder: service.responder, inlineResponder: service.inlineResponder,
                                admission: service.admission, connectionObserver: service.connectionObserver)
        let port = try server.start()
        defer { server.shutdown(gracePeriod: 1) }

        #expect(try Self.exchange(port: port, "GET", "/v2/health/ready").status == 200)
        let meta = try API.JSONValue.parse(try Self.exchange(port: port, "GET", "/v2/models/digits").body)
        let input = try #require(meta["inputs"]?.arrayValue?.first)
        let name = try #require(input["name"]?.stringValue)
        let shape = (input["shape"]?.arrayValue ?? []).compactMap(\.intValue).dropFirst()
        let zeros = Array(repeating: "0", count: shape.reduce(1) { $0 * Int($1) }).joined(separator: ",")
        let infer = #"{"inputs":[{"name":"\#(name)","shape":[1\#(shape.map { ",\($0)" }.joined())],"datatype":"FP32","data":[\#(zeros)]}]}"#
        let traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        let inferred = try Self.exchange(port: port, "POST", "/v2/models/digits/infer", headers: ["traceparent: \(traceparent)"],
                                         body: Array(infer.utf8))
        #expect(inferred.status == 200)
        #expect(inferred.head.contains("traceparent: 00-0af7651916cd43dd8448eb211c80319c-"), "\(inferred.head)")
        // The same request on the version route: a response cache hit (the osprey_cache_* series).
        let repeated = try Self.exchange(port: port, "POST", "/v2/models/digits/versions/1/infer", body: Array(infer.utf8))
        #expect(repeated.status == 200 && repeated.head.contains("X-Cache: hit"), "\(repeated.head)")
        let png = try [UInt8](Data(contentsOf: ServiceTests.examples.appendingPathComponent("digit_4.png")))
        #expect(try Self.exchange(port: port, "POST", "/v2/models/digits/classify", body: png).status == 200)
        #expect(try Self.exchange(port: port, "POST", "/v2/models/digits/infer", body: Array("{".utf8)).status == 400)
        // A cascade: small is unsure of unsure.png and hands it to large.
        for model in ["large", "small"] {
            try FileManager.default.copyItem(at: CascadeTests.fixtures.appendingPathComponent("repository/\(model)"), to: temp.appendingPathComponent(model))
            try await service.registry.load(model: model)
        }
        let unsure = try [UInt8](Data(contentsOf: CascadeTests.fixtures.appendingPathComponent("unsure.png")))
        let cascaded = try Self.exchange(port: port, "POST", "/v2/models/small/classify", body: unsure)
        #expect(String(decoding: cascaded.body, as: UTF8.self).contains(#""answered_by":"large/1""#))
        #expect(try Self.exchange(port: port, "GET", "/no/such/route").status == 404)

        let scrape = try Self.exchange(port: port, "GET", "/metrics")
        #expect(scrape.status == 200)
        let text = String(decoding: scrape.body, as: UTF8.self)
        let lines = text.split(separator: "\n")
        let typeLines = Set(lines.filter { $0.hasPrefix("# TYPE ") }.map(String.init))
        for (metric, type) in documented {
            #expect(typeLines.contains("# TYPE \(metric) \(type)"), "\(metric) is not a \(type) in /metrics")
            let sample = type == "histogram" ? metric + "_bucket" : metric
            let hasSamples = lines.contains { $0.hasPrefix(sample + "{") || $0.hasPrefix(sample + " ") }
            #expect(hasSamples, "\(metric) has no samples")
        }
        let exported = Set(lines.filter { $0.hasPrefix("# TYPE ") }.map { String($0.split(separator: " ")[2]) })
        let undocumented = exported.subtracting(documented.map(\.name))
        #expect(undocumented.isEmpty, "in /metrics but not in README.md: \(undocumented.sorted())")

        // The route label is the openapi template, resolved once by the router; probes answered inline count too.
        #expect(text.contains(#"osprey_http_request_duration_seconds_count{method="POST",route="/v2/models/{model}/infer",status="200"} 1"#))
        #expect(text.contains(#"osprey_http_requests_total{method="POST",route="/v2/models/{model}/infer",status="400"} 1"#))
        #expect(text.contains(#"osprey_http_requests_total{method="POST",route="/v2/models/{model}/classify",status="200"} 2"#))
        #expect(text.contains(#"osprey_http_requests_total{method="GET",route="unmatched",status="404"} 1"#))
        #expect(text.contains(#"osprey_http_requests_total{method="GET",route="/v2/health/ready",status="200"} 1"#))
        #expect(text.contains("osprey_ready 1"))
        // The scrape's own connection is open while it is answered.
        let open = lines.first { $0.hasPrefix("osprey_http_open_connections ") }.flatMap { Double($0.split(separator: " ")[1]) }
        #expect((open ?? 0) >= 1, "open connections: \(String(describing: open))")
    }
}
