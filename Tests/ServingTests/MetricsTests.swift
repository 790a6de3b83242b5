import Foundation
import XCTest
@testable import Serving

final class MetricsTests: XCTestCase {
    func testCounterGaugeAndHistogramText() {
        let metrics = Metrics(includeProcessMetrics: false)
        metrics.counter("osprey_http_requests_total", help: "HTTP requests.", labels: ["route": "/v2", "status": "200"]).increment()
        metrics.counter("osprey_http_requests_total", help: "HTTP requests.", labels: ["status": "200", "route": "/v2"]).increment(by: 2)
        metrics.gauge("osprey_http_open_connections", help: "Open connections.").set(3)
        let histogram = metrics.histogram("osprey_test_seconds", help: "A test histogram.", buckets: [0.1, 1, 0.5])
        for value in [0.05, 0.1, 0.3, 2] { histogram.observe(value) }
        XCTAssertEqual(metrics.exposition(), """
        # HELP osprey_http_requests_total HTTP requests.
        # TYPE osprey_http_requests_total counter
        osprey_http_requests_total{route="/v2",status="200"} 3
        # HELP osprey_http_open_connections Open connections.
        # TYPE osprey_http_open_connections gauge
        osprey_http_open_connections 3
        # HELP osprey_test_seconds A test histogram.
        # TYPE osprey_test_seconds histogram
        osprey_test_seconds_bucket{le="0.1"} 2
        osprey_test_seconds_bucket{le="0.5"} 3
        osprey_test_seconds_bucket{le="1"} 3
        osprey_test_seconds_bucket{le="+Inf"} 4
        osprey_test_seconds_sum 2.45
        osprey_test_seconds_count 4

        """)
    }

    func testEscaping() {
        let metrics = Metrics(includeProcessMetrics: false)
        metrics.gauge("g", help: "line one\nback\\slash \"quoted\"", labels: ["path": "a\"b\\c\nd"]).set(-1.5)
        XCTAssertEqual(metrics.exposition(), """
        # HELP g line one\\nback\\\\slash "quoted"
        # TYPE g gauge
        g{path="a\\"b\\\\c\\nd"} -1.5

        """)
    }

    func testProcessMetricsAreRead() {
        let text = Metrics().exposition()
        for name in ["process_resident_memory_bytes", "process_cpu_seconds_total", "process_open_fds", "process_start_time_seconds"] {
            let line = text.split(separator: "\n").first { $0.hasPrefix(name + " ") }
            XCTAssertNotNil(line, name)
            if let line, let value = Double(line.split(separator: " ")[1]) {
                XCTAssertGreaterThan(value, 0, name)
            }
        }
        let start = text.split(separator: "\n").first { $0.hasPrefix("process_start_time_seconds ") }.flatMap { Double($0.split(separator: " ")[1]) } ?? 0
        XCTAssertLessThan(abs(start - Date().timeIntervalSince1970), 3600 * 24, "start time is a unix timestamp")
    }

    func testServingSeriesPassPromtool() async throws {
        let repo = TempRepository()
        repo.addVersion("m", 1, "scale=2")
        repo.addVersion("broken", 1, "nonsense")
        let metrics = Metrics()
        let registry = ModelRegistry(repositoryPath: repo.path, loader: fakeLoader(), metrics: metrics)
        await registry.loadAll()
        let served = try registry.resolve(model: "m")
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<5 { group.addTask { _ = try await served.infer(["x": rowsTensor(rows: 1, marker: Float(i))]) } }
            try await group.waitForAll()
        }
        _ = try? await served.infer(["x": rowsTensor(rows: 100, marker: 0)])
        metrics.recordTopScore(model: "m", version: 1, score: 0.93)
        metrics.recordHTTPRequest(route: "/v2/models/{model}/infer", method: "POST", status: 200, seconds: 0.004)
        metrics.openConnections.increment()
        metrics.counter("osprey_custom_events_total", help: "A generic counter with \"quotes\".", labels: ["kind": "a\"b\\c"]).increment()

        let text = metrics.exposition()
        XCTAssertTrue(text.contains(#"osprey_inference_requests_total{model="m",outcome="success",protocol="http",version="1"} 5"#), text)
        XCTAssertTrue(text.contains(#"osprey_inference_requests_total{model="m",outcome="failure",protocol="http",version="1"} 1"#))
        XCTAssertTrue(text.contains(#"osprey_model_state{model="m",state="READY",version="1"} 1"#))
        XCTAssertTrue(text.contains(#"osprey_model_state{model="broken",state="FAILED",version="1"} 1"#))
        XCTAssertTrue(text.contains(#"osprey_inference_batch_size_count{model="m",version="1"}"#))
        XCTAssertTrue(text.contains(#"osprey_inference_queue_depth{model="m",version="1"} 0"#))
        XCTAssertTrue(text.contains(#"osprey_inference_in_flight_requests{model="m",version="1"} 0"#))
        XCTAssertTrue(text.contains(#"osprey_classification_top_score_bucket{model="m",version="1",le="0.95"} 1"#))
        XCTAssertTrue(text.contains(#"osprey_model_load_duration_seconds{model="m",version="1"}"#))
        XCTAssertTrue(text.contains(#"osprey_http_requests_total{method="POST",route="/v2/models/{model}/infer",status="200"} 1"#))
        XCTAssertTrue(text.contains("osprey_http_open_connections 1"))

        let promtool = ["/usr/bin/promtool", "/usr/local/bin/promtool"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let promtool else { throw XCTSkip("promtool not installed") }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: promtool)
        process.arguments = ["check", "metrics"]
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = output
        try process.run()
        input.fileHandleForWriting.write(Data(text.utf8))
        try input.fileHandleForWriting.close()
        let report = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, report)
        XCTAssertEqual(report.trimmingCharacters(in: .whitespacesAndNewlines), "", report)
    }
}
