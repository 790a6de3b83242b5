import Foundation
import Tensor

/// Queues the requests of one served version, coalesces compatible ones into batches and runs them on its own thread.
///
/// The thread waits for a batch to fill (or the oldest request's delay to pass), then takes a compute slot, then takes
/// the batch: requests arriving while it waits for the slot still join. Whoever removes a request from the queue
/// (the thread, its timeout or its cancellation) is the one that resumes it, so each is answered exactly once.
final class DynamicBatcher: @unchecked Sendable {
    /// Limits read from the model config.
    struct Policy: Sendable {
        /// Rows per execution; 1 or less runs requests one by one.
        var maxBatchRows: Int
        /// Longest wait after the oldest queued request before a partial batch runs.
        var maxDelayNanos: UInt64
        /// Row counts that run without waiting further.
        var preferredRows: Set<Int>
        /// Requests allowed in the queue.
        var maxQueue: Int
    }

    /// One queued request; mutable parts are touched only under `condition`.
    private final class Request: @unchecked Sendable {
        let id: UInt64
        let feeds: [String: Tensor]
        let rows: Int
        let shapeKey: [[Int]]
        let enqueued: UInt64
        let deadline: UInt64?
        let timeoutMicroseconds: Int
        let continuation: CheckedContinuation<[String: Tensor], Error>
        var timer: Task<Void, Never>?

        init(id: UInt64, feeds: [String: Tensor], rows: Int, shapeKey: [[Int]], enqueued: UInt64, timeoutNanos: UInt64?,
             continuation: CheckedContinuation<[String: Tensor], Error>) {
            self.id = id
            self.feeds = feeds
            self.rows = rows
            self.shapeKey = shapeKey
            self.enqueued = enqueued
            deadline = timeoutNanos.map { enqueued &+ $0 }
            timeoutMicroseconds = Int((timeoutNanos ?? 0) / 1000)
            self.continuation = continuation
        }

        func finish(_ result: Result<[String: Tensor], Error>) {
            timer?.cancel()
            continuation.resume(with: result)
        }
    }

    let model: String
    let version: Int
    private let policy: Policy
    private let gate: ComputeGate
    private let instruments: VersionInstruments
    private let inputNames: [String]
    private let condition = NSCondition()
    private var queue: [Request] = []
    private var nextID: UInt64 = 0
    private var closed = false
    private var runtime: (any ModelRuntime)?

    /// Starts the batcher thread; it holds the runtime until `close()`.
    init(model: String, version: Int, runtime: any ModelRuntime, inputNames: [String], policy: Policy, gate: ComputeGate,
         instruments: VersionInstruments) {
        self.model = model
        self.version = version
        self.runtime = runtime
        self.inputNames = inputNames.sorted()
        self.policy = policy
        self.gate = gate
        self.instruments = instruments
        let thread = Thread { [self] in self.serve() }
        thread.name = "osprey-batch-\(model)-\(version)"
        thread.start()
    }

    /// Stops accepting requests; the thread drains what is queued, drops the runtime and exits.
    func close() {
        condition.lock()
        closed = true
        condition.broadcast()
        condition.unlock()
    }

    /// Queues validated feeds of `rows` rows and waits for their own rows of the outputs.
    func submit(_ feeds: [String: Tensor], rows: Int, timeoutNanos: UInt64?) async throws -> [String: Tensor] {
        let id = reserveID()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[String: Tensor], Error>) in
                enqueue(id: id, feeds: feeds, rows: rows, timeoutNanos: timeoutNanos, continuation: continuation)
            }
        } onCancel: {
            remove(id: id, error: CancellationError())
        }
    }

    /// Requests currently queued.
    var queueDepth: Int {
        condition.lock()
        defer { condition.unlock() }
        return queue.count
    }

    private func reserveID() -> UInt64 {
        condition.lock()
        defer { condition.unlock() }
        nextID &+= 1
        return nextID
    }

    private func enqueue(id: UInt64, feeds: [String: Tensor], rows: Int, timeoutNanos: UInt64?,
                         continuation: CheckedContinuation<[String: Tensor], Error>) {
        let shapeKey = inputNames.map { Array(feeds[$0]?.shape.dropFirst() ?? []) }
        let request = Request(id: id, feeds: feeds, rows: rows, shapeKey: shapeKey, enqueued: monotonicNanos(),
                              timeoutNanos: timeoutNanos, continuation: continuation)
        if Task.isCancelled {
            // The cancellation handler already ran (and found nothing to remove).
            continuation.resume(throwing: CancellationError())
            return
        }
        condition.lock()
        if closed {
            condition.unlock()
            continuation.resume(throwing: ServingError.shuttingDown(model: model, version: version))
            return
        }
        if queue.count >= policy.maxQueue {
            condition.unlock()
            continuation.resume(throwing: ServingError.queueFull(model: model, version: version, capacity: policy.maxQueue))
            return
        }
        if let timeoutNanos {
            // Answers the request at its deadline even while the thread is busy executing another batch.
            request.timer = Task { [weak self] in
                try? await Task.sleep(nanoseconds: timeoutNanos)
                if Task.isCancelled { return }
                self?.remove(id: id, error: nil)
            }
        }
        queue.append(request)
        instruments.queueDepthChanged(queue.count)
        condition.signal()
        condition.unlock()
    }

    /// Removes a still-queued request and answers it with `error`, or with `.timeout` when `error` is nil.
    private func remove(id: UInt64, error: Error?) {
        condition.lock()
        guard let index = queue.firstIndex(where: { $0.id == id }) else {
            condition.unlock()
            return
        }
        let request = queue.remove(at: index)
        instruments.queueDepthChanged(queue.count)
        condition.unlock()
        request.finish(.failure(error ?? ServingError.timeout(model: model, version: version, microseconds: request.timeoutMicroseconds)))
    }

    // MARK: - Batcher thread

    private func serve() {
        while waitForBatch() {
            gate.acquire()
            let batch = takeBatch()
            if batch.isEmpty {
                gate.release()
                continue
            }
            execute(batch)
        }
        condition.lock()
        runtime = nil
        condition.unlock()
    }

    /// Blocks until a batch is worth running; false once closed with nothing queued.
    private func waitForBatch() -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while true {
            let now = monotonicNanos()
            expireLocked(now: now)
            if queue.isEmpty {
                if closed { return false }
                condition.wait()
                continue
            }
            if isReadyLocked(now: now) { return true }
            var wake = queue[0].enqueued &+ policy.maxDelayNanos
            for request in queue { if let deadline = request.deadline, deadline < wake { wake = deadline } }
            let seconds = Double(wake > now ? wake - now : 0) / 1e9
            _ = condition.wait(until: Date(timeIntervalSinceNow: seconds))
        }
    }

    private func isReadyLocked(now: UInt64) -> Bool {
        if policy.maxBatchRows <= 1 || closed { return true }
        if now >= queue[0].enqueued &+ policy.maxDelayNanos { return true }
        let key = queue[0].shapeKey
        var rows = 0
        for request in queue where request.shapeKey == key {
            if rows + request.rows > policy.maxBatchRows { return true }
            rows += request.rows
            if rows == policy.maxBatchRows || policy.preferredRows.contains(rows) { return true }
        }
        return false
    }

    /// Answers queued requests whose deadline has passed; they are never executed.
    private func expireLocked(now: UInt64) {
        guard queue.contains(where: { ($0.deadline ?? .max) <= now }) else { return }
        var kept: [Request] = []
        for request in queue {
            if let deadline = request.deadline, deadline <= now {
                request.finish(.failure(ServingError.timeout(model: model, version: version, microseconds: request.timeoutMicroseconds)))
            } else {
                kept.append(request)
            }
        }
        queue = kept
        instruments.queueDepthChanged(queue.count)
    }

    /// Removes the oldest request and every later compatible one that still fits.
    private func takeBatch() -> [Request] {
        condition.lock()
        defer { condition.unlock() }
        expireLocked(now: monotonicNanos())
        guard !queue.isEmpty else { return [] }
        if policy.maxBatchRows <= 1 {
            let first = queue.removeFirst()
            instruments.queueDepthChanged(queue.count)
            return [first]
        }
        let key = queue[0].shapeKey
        var rows = 0
        var taken: [Request] = []
        var kept: [Request] = []
        for request in queue {
            if request.shapeKey == key && (taken.isEmpty || rows + request.rows <= policy.maxBatchRows) {
                taken.append(request)
                rows += request.rows
            } else {
                kept.append(request)
            }
        }
        queue = kept
        instruments.queueDepthChanged(queue.count)
        return taken
    }

    /// Runs one batch (holding a compute slot, released here) and answers each request with its own rows.
    private func execute(_ batch: [Request]) {
        let start = monotonicNanos()
        let queueWaits = batch.map { start &- $0.enqueued }
        condition.lock()
        let runtime = self.runtime
        condition.unlock()
        guard let runtime else {
            gate.release()
            for request in batch { request.finish(.failure(ServingError.shuttingDown(model: model, version: version))) }
            return
        }
        let totalRows = batch.reduce(0) { $0 + $1.rows }
        var feeds = batch[0].feeds
        if batch.count > 1 {
            for name in inputNames { feeds[name] = Tensor.concatenatingRows(batch.map { $0.feeds[name]! }) }
        }
        let concatenated = monotonicNanos()
        let outcome = runGuarded(runtime, feeds)
        let computed = monotonicNanos()

        var results: [Result<[String: Tensor], Error>]
        switch outcome {
        case .failure(let error):
            gate.release()
            results = Array(repeating: .failure(error), count: batch.count)
        case .success(let outputs) where batch.count == 1:
            gate.release()
            results = [.success(outputs)]
        case .success(let outputs):
            if outputs.values.contains(where: { $0.rank == 0 || $0.shape[0] != totalRows }) {
                // The model does not keep rows independent on this output; run each request alone instead.
                results = batch.map { runGuarded(runtime, $0.feeds) }
                gate.release()
            } else {
                gate.release()
                var offset = 0
                results = batch.map { request in
                    let range = offset..<(offset + request.rows)
                    offset += request.rows
                    return .success(outputs.mapValues { $0.rows(range) })
                }
            }
        }
        let split = monotonicNanos()
        instruments.executed(rows: totalRows, queueNanos: queueWaits, inputNanos: concatenated &- start,
                             inferNanos: computed &- concatenated, outputNanos: split &- computed)
        for (request, result) in zip(batch, results) { request.finish(result) }
    }

    private func runGuarded(_ runtime: any ModelRuntime, _ feeds: [String: Tensor]) -> Result<[String: Tensor], Error> {
        do {
            return .success(try runtime.run(feeds))
        } catch let error as ServingError {
            return .failure(error)
        } catch {
            return .failure(ServingError.executionFailed(model: model, version: version, reason: String(describing: error)))
        }
    }
}
