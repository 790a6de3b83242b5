import Infrastructure
import Foundation
import XCTest
import Engine
import Tensor
@testable import Serving

/// A fake model: `y = x * scale` over rows of 4 floats, optionally slow or failing, recording every execution.
final class ScaleRuntime: ModelRuntime, @unchecked Sendable {
    let inputs: [TensorSpec]
    let outputs: [TensorSpec]
    let scale: Float
    let sleepMilliseconds: Int
    let failRuns: Bool
    /// Reported weights (the `bytes=` field).
    let constantBytes: Int
    /// Reported activation bytes per batch row (the `act=` field).
    let activationBytesPerRow: Int
    /// Rows of each execution, in order (the warm-up included).
    let batches = Locked<[Int]>([])
    /// First value of every executed row.
    let executedRowMarkers = Locked<[Float]>([])
    /// Opened when the first run starts.
    let started = Latch()
    /// When set, every run blocks until it opens (an execution that lasts exactly as long as a test needs).
    let hold: Latch?
    /// Batches of 2 rows or more stream row by row on two threads (as the engine does for a model whose rows each run
    /// alone on one thread).
    let streams: Bool
    /// Rows one stream job takes at most (the engine's share for an idle thread).
    let jobRows: Int
    /// Rows computing at once, and the most seen.
    let concurrentRuns = Locked<(now: Int, most: Int)>((0, 0))

    init(scale: Float, sleepMilliseconds: Int = 0, fixedBatch: Bool = false, failRuns: Bool = false, constantBytes: Int = 0,
         activationBytesPerRow: Int = 0, hold: Latch? = nil, streams: Bool = false, jobRows: Int = 1) {
        self.scale = scale
        self.streams = streams
        self.jobRows = jobRows
        self.hold = hold
        self.constantBytes = constantBytes
        self.activationBytesPerRow = activationBytesPerRow
        self.sleepMilliseconds = sleepMilliseconds
        self.failRuns = failRuns
        let spec = TensorSpec(name: "x", dtype: .float32, shape: fixedBatch ? [.fixed(1), .fixed(4)] : [.symbolic("N"), .fixed(4)])
        inputs = [spec]
        outputs = [TensorSpec(name: "y", dtype: .float32, shape: spec.shape)]
    }

    func streamsRows(_ requests: [[String: Tensor]]) -> Bool {
        streams && requests.reduce(0) { $0 + $1["x"]!.shape[0] } >= 2
    }

    func streamJobRows(queued: Int, computing: Int) -> Int { jobRows }

    func runRowStream(_ next: () -> (() -> Void)?) {
        withoutActuallyEscaping(next) { next in
            // `next` is made for concurrent callers; it ends before this returns.
            nonisolated(unsafe) let shared = next
            DispatchQueue.concurrentPerform(iterations: 2) { _ in
                while let job = shared() { job() }
            }
        }
    }

    func run(_ feeds: [String: Tensor]) throws -> [String: Tensor] {
        concurrentRuns.withLock { $0.now += 1; $0.most = max($0.most, $0.now) }
        defer { concurrentRuns.withLock { $0.now -= 1 } }
        started.open()
        hold?.wait()
        let x = feeds["x"]!
        batches.withLock { $0.append(x.shape[0]) }
        let values = x.scalars(as: Float.self)
        executedRowMarkers.withLock { markers in
            for row in 0..<x.shape[0] { markers.append(values[row * 4]) }
        }
        if sleepMilliseconds > 0 { usleep(UInt32(sleepMilliseconds * 1000)) }
        if failRuns { throw FakeError.runFailed }
        return ["y": Tensor(shape: x.shape, scalars: values.map { $0 * scale })]
    }

    func peakActivationBytes(_ feeds: [String: Tensor]) throws -> Int {
        _ = try run(feeds)
        return activationBytesPerRow * feeds["x"]!.shape[0]
    }
}

enum FakeError: Error { case corrupt(String), runFailed }

/// Keeps weak references to every runtime the fake loader made.
final class LoadedRuntimes: @unchecked Sendable {
    private let entries = Locked<[(path: String, runtime: Weak)]>([])
    final class Weak { weak var value: ScaleRuntime?; init(_ v: ScaleRuntime) { value = v } }

    func add(_ path: String, _ runtime: ScaleRuntime) { entries.withLock { $0.append((path, Weak(runtime))) } }

    /// The most recent runtime loaded from `<model>/<version>/model.onnx`, weakly held.
    func latest(_ model: String, _ version: Int) -> Weak? {
        entries.withLock { $0.last { $0.path.hasSuffix("/\(model)/\(version)/model.onnx") }?.runtime }
    }
}

/// A loader reading fake "model files": `scale=2 sleep=0 fixed=0 fail=0 bytes=0 act=0`, or anything else to fail.
func fakeLoader(_ registry: LoadedRuntimes = LoadedRuntimes()) -> ModelLoader {
    return { path in
        guard let data = FileManager.default.contents(atPath: path) else { throw FakeError.corrupt("unreadable \(path)") }
        let text = String(decoding: data, as: UTF8.self)
        var fields: [String: String] = [:]
        for part in text.split(whereSeparator: { $0 == " " || $0 == "\n" }) {
            let pair = part.split(separator: "=", maxSplits: 1)
            guard pair.count == 2 else { throw FakeError.corrupt("not a model file: \(text.prefix(20))") }
            fields[String(pair[0])] = String(pair[1])
        }
        guard let scale = fields["scale"].flatMap(Float.init) else { throw FakeError.corrupt("no scale") }
        if let loadSleep = fields["loadsleep"].flatMap(UInt32.init) { usleep(loadSleep * 1000) }
        let runtime = ScaleRuntime(scale: scale, sleepMilliseconds: Int(fields["sleep"] ?? "0") ?? 0,
                                   fixedBatch: fields["fixed"] == "1", failRuns: fields["fail"] == "1",
                                   constantBytes: Int(fields["bytes"] ?? "0") ?? 0, activationBytesPerRow: Int(fields["act"] ?? "0") ?? 0)
        registry.add(path, runtime)
        return runtime
    }
}

/// A temporary model repository on disk, removed at deinit.
final class TempRepository {
    let path: String

    init() {
        path = NSTemporaryDirectory() + "osprey-serving-\(UUID().uuidString)"
        try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    func addVersion(_ model: String, _ version: Int, _ contents: String) {
        let directory = "\(path)/\(model)/\(version)"
        try! FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try! Data(contents.utf8).write(to: URL(fileURLWithPath: directory + "/model.onnx"))
    }

    func setConfig(_ model: String, _ json: String) {
        try! FileManager.default.createDirectory(atPath: "\(path)/\(model)", withIntermediateDirectories: true)
        try! Data(json.utf8).write(to: URL(fileURLWithPath: "\(path)/\(model)/config.json"))
    }

    func setLabels(_ model: String, _ text: String) {
        try! Data(text.utf8).write(to: URL(fileURLWithPath: "\(path)/\(model)/labels.txt"))
    }

    func removeVersion(_ model: String, _ version: Int) {
        try! FileManager.default.removeItem(atPath: "\(path)/\(model)/\(version)")
    }
}

/// Collects log lines.
final class LogSink: Sendable {
    private let lines = Locked<[(LogLevel, String)]>([])

    var logger: Logger { Logger(level: .debug) { level, message, _ in self.append(level, message) } }

    func append(_ level: LogLevel, _ message: String) { lines.withLock { $0.append((level, message)) } }

    func messages(atLeast level: LogLevel) -> [String] { lines.withLock { $0.filter { $0.0 >= level }.map(\.1) } }
}

/// One request of `rows` rows whose row r is [marker + r, marker + r, ...].
func rowsTensor(rows: Int, marker: Float) -> Tensor {
    var values: [Float] = []
    for r in 0..<rows { values += Array(repeating: marker + Float(r), count: 4) }
    return Tensor(shape: [rows, 4], scalars: values)
}

/// Waits (polling) until `condition` holds or `seconds` pass.
func eventually(_ seconds: Double = 2, _ condition: () -> Bool) async -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        try? await Task.sleep(nanoseconds: 5_000_000)
    }
    return condition()
}

/// Builds a served version directly, for batcher tests.
func makeVersion(_ runtime: ScaleRuntime, config: String = "{}", name: String = "m", version: Int = 1,
                 gate: ComputeGate = ComputeGate(slots: 1), metrics: Metrics? = nil) throws -> ServedVersion {
    try ServedVersion(name: name, version: version, config: try ModelConfig(json: Array(config.utf8)), labels: [],
                      runtime: runtime, gate: gate, metrics: metrics, loadSeconds: 0)
}

extension ModelRegistry {
    /// Names of the models in the index, sorted.
    nonisolated var modelNames: [String] { Array(Set(index().map(\.name))).sorted() }
    /// Bytes the READY versions hold together, from the index.
    nonisolated var loadedMemoryBytes: Int { index().compactMap(\.memoryBytes).reduce(0, +) }
}
