import Engine
import Infrastructure
import Tensor

/// Queues the requests of one served version, coalesces compatible ones into batches and runs them: the thin driver
/// around `BatchingMachine`, which makes every decision; this class only does what the decisions say.
///
/// Whoever changes the machine (a submitting task, a cancellation, the compute thread finishing) polls it at once and
/// does what it says, so a ready batch starts without a thread hop. Dedicated threads per version: one compute thread
/// per instance (`instance_group` count) takes a compute slot, the batch, runs the model and answers the rows; the
/// timer thread sleeps until the machine's next instant (a batch delay or a deadline), so requests expire on time even
/// while an execution runs. When the runtime computes each row alone, an execution streams rows from one batch into
/// the next instead (`DynamicBatcher+Stream.swift`).
/// Whoever removes a request from the machine is the one that resumes it, so each is answered exactly once.
final class DynamicBatcher: @unchecked Sendable {
    /// Limits read from the model config.
    typealias Policy = BatchingMachine.Policy

    /// A queued request's inputs and its waiting task; guarded by `lock`.
    struct Waiter {
        let feeds: [String: Tensor]
        let rows: Int
        let enqueued: UInt64
        let timeoutMicroseconds: Int
        let continuation: CheckedContinuation<[String: Tensor], Error>
    }

    /// What one pass of the compute thread did while holding the compute slot.
    private enum Pass {
        /// The batch ran once, concatenated, and its outputs keep one row per input row.
        case batched(outputs: [String: Tensor])
        /// Each request got its own result (a single request, rows run in place, a failure, or outputs that do not keep rows).
        case separate([Result<[String: Tensor], Error>])
    }

    let model: String
    let version: Int
    let gate: ComputeGate
    let instruments: VersionInstruments
    private let inputNames: [String]
    /// The config declares a batch axis (more than one row per execution): rows are independent.
    private let rowsAreIndependent: Bool
    private let compute: BlockingExecutor
    let lock = Lock()
    private let wake = Condition()
    /// Signalled when a streamed row finishes or a request arrives while rows stream (`DynamicBatcher+Stream`).
    let streamWake = Condition()
    // Guarded by `lock`.
    var machine: BatchingMachine
    var waiters: [UInt64: Waiter] = [:]
    /// The rows of the execution that streams them, if one does.
    var stream = StreamState()
    private var nextID: UInt64 = 0
    private var runtime: (any ModelRuntime)?
    /// When the timer thread will poll next on its own (0 while it is awake, so no one needs to wake it).
    private var timerWake: UInt64 = 0
    /// The instant of the last poll's decision.
    private var nextWake: UInt64?
    private var finished = false

    /// Starts the batcher's threads; it holds the runtime until `close()` and the queue drained.
    init(model: String, version: Int, runtime: any ModelRuntime, inputNames: [String], policy: Policy, gate: ComputeGate,
         instruments: VersionInstruments) {
        self.model = model
        self.version = version
        self.runtime = runtime
        self.inputNames = inputNames.sorted()
        rowsAreIndependent = policy.maxBatchRows > 1
        self.gate = gate
        self.instruments = instruments
        machine = BatchingMachine(policy: policy)
        compute = BlockingExecutor(name: "osprey-run-\(version)", threads: max(1, policy.instances))
        gate.batcherStarted()
        DedicatedThread.start(name: "osprey-batch-\(version)") { [self] in runTimer() }
    }

    /// Stops accepting requests; what is queued still runs, then the runtime is dropped and the threads exit.
    func close() {
        let expired = lock.withLock {
            machine.close()
            return pollLocked()
        }
        answerTimedOut(expired)
    }

    /// Queues validated feeds of `rows` rows and waits for their own rows of the outputs.
    func submit(_ feeds: [String: Tensor], rows: Int, timeoutNanos: UInt64?) async throws -> [String: Tensor] {
        let id = lock.withLock { () -> UInt64 in
            nextID &+= 1
            return nextID
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[String: Tensor], Error>) in
                enqueue(id: id, feeds: feeds, rows: rows, timeoutNanos: timeoutNanos, continuation: continuation)
            }
        } onCancel: {
            drop(id: id)
        }
    }

    /// Requests currently queued.
    var queueDepth: Int { lock.withLock { machine.queueDepth } }

    private func enqueue(id: UInt64, feeds: [String: Tensor], rows: Int, timeoutNanos: UInt64?,
                         continuation: CheckedContinuation<[String: Tensor], Error>) {
        let shapeKey = inputNames.map { Array(feeds[$0]?.shape.dropFirst() ?? []) }
        let now = SystemClock.nanoseconds()
        let entry = BatchingMachine.Entry(id: id, rows: rows, shapeKey: shapeKey, enqueued: now, deadline: timeoutNanos.map { now &+ $0 })
        let waiter = Waiter(feeds: feeds, rows: rows, enqueued: now, timeoutMicroseconds: Int((timeoutNanos ?? 0) / 1000),
                            continuation: continuation)
        let (refusal, expired) = lock.withLock { () -> (Error?, [Waiter]) in
            // Checked under the lock: a cancellation handler that ran first found nothing to drop.
            if Task.isCancelled { return (CancellationError(), []) }
            switch machine.submit(entry) {
            case .closed?: return (ServingError.shuttingDown(model: model, version: version), [])
            case .queueFull?: return (ServingError.queueFull(model: model, version: version, capacity: machine.policy.maxQueue), [])
            case nil: break
            }
            waiters[id] = waiter
            instruments.queueDepthChanged(machine.queueDepth)
            return (nil, pollLocked())
        }
        if let refusal { continuation.resume(throwing: refusal) }
        answerTimedOut(expired)
    }

    /// Drops a cancelled request's rows if still queued and answers it with `CancellationError`.
    private func drop(id: UInt64) {
        let (waiter, expired) = lock.withLock { () -> (Waiter?, [Waiter]) in
            guard machine.cancel(id: id) else { return (nil, []) }
            instruments.queueDepthChanged(machine.queueDepth)
            return (waiters.removeValue(forKey: id), pollLocked())
        }
        waiter?.continuation.resume(throwing: CancellationError())
        answerTimedOut(expired)
    }

    /// Polls the machine and does what it decided (with `lock` held): starts an execution on the compute thread,
    /// wakes the timer thread when the next instant moved earlier. Returns the expired requests, to be answered
    /// after unlocking.
    private func pollLocked() -> [Waiter] {
        let decision = machine.poll(now: SystemClock.nanoseconds())
        let expired = decision.expired.compactMap { waiters.removeValue(forKey: $0) }
        if !expired.isEmpty { instruments.queueDepthChanged(machine.queueDepth) }
        if decision.startExecution { compute.execute { [self] in executeNextBatch() } }
        // A compute thread of a streaming execution may be waiting for this request (or this closing).
        if stream.active { streamWake.signal() }
        if decision.finished { finished = true }
        if decision.finished || (decision.wakeAt ?? .max) < timerWake { wake.signal() }
        nextWake = decision.wakeAt
        return expired
    }

    // MARK: - Timer thread

    /// Polls the machine at its next instant (or when woken because that instant moved earlier), until it says finished.
    private func runTimer() {
        lock.lock()
        while true {
            let expired = pollLocked()
            if !expired.isEmpty {
                lock.unlock()
                answerTimedOut(expired)
                lock.lock()
                continue
            }
            if finished { break }
            timerWake = nextWake ?? .max
            if let wakeAt = nextWake { wake.wait(lock, until: wakeAt) } else { wake.wait(lock) }
            timerWake = 0
        }
        runtime = nil
        lock.unlock()
        compute.shutdown()
        gate.batcherFinished()
    }

    func answerTimedOut(_ expired: [Waiter]) {
        for waiter in expired {
            waiter.continuation.resume(throwing: ServingError.timeout(model: model, version: version,
                                                                      microseconds: waiter.timeoutMicroseconds))
        }
    }

    // MARK: - Compute thread

    /// Takes the compute slot (the only place it is taken), then the batch, runs it, frees the slot, answers the rows.
    private func executeNextBatch() {
        var expired: [Waiter] = []
        var batch: [Waiter] = []
        var pass = Pass.separate([])
        var timing = (start: UInt64(0), concatenated: UInt64(0), computed: UInt64(0))
        var streamed = false
        gate.withSlot {
            let runtime: (any ModelRuntime)?
            (batch, expired, runtime) = lock.withLock {
                let taken = machine.takeBatch(now: SystemClock.nanoseconds())
                instruments.queueDepthChanged(machine.queueDepth)
                // Polled at once: what this batch left queued may start on another instance while this one computes.
                let expiredNow = taken.expired.compactMap { waiters.removeValue(forKey: $0) } + pollLocked()
                return (taken.batch.compactMap { waiters.removeValue(forKey: $0.id) }, expiredNow, self.runtime)
            }
            guard !batch.isEmpty else { return }
            guard let runtime else {
                pass = .separate(batch.map { _ in .failure(ServingError.shuttingDown(model: model, version: version)) })
                return
            }
            if rowsAreIndependent && runtime.streamsRows(batch.map(\.feeds)) && streamRows(batch, on: runtime) {
                streamed = true
                return
            }
            timing.start = SystemClock.nanoseconds()
            pass = run(batch, on: runtime, timing: &timing)
        }
        let expiredAfter = lock.withLock {
            if !batch.isEmpty { machine.executionFinished() }
            return pollLocked()
        }
        answerTimedOut(expired + expiredAfter)
        // A stream answered its requests as their rows finished.
        guard !batch.isEmpty, !streamed else { return }
        let results: [Result<[String: Tensor], Error>]
        switch pass {
        case .separate(let separate):
            results = separate
        case .batched(let outputs):
            var offset = 0
            results = batch.map { waiter in
                let range = offset..<(offset + waiter.rows)
                offset += waiter.rows
                return .success(outputs.mapValues { $0.rows(range) })
            }
        }
        let split = SystemClock.nanoseconds()
        if timing.start != 0 {
            instruments.executed(rows: batch.reduce(0) { $0 + $1.rows }, queueNanos: batch.map { timing.start &- $0.enqueued },
                                 inputNanos: timing.concatenated &- timing.start, inferNanos: timing.computed &- timing.concatenated,
                                 outputNanos: split &- timing.computed)
        }
        for (waiter, result) in zip(batch, results) { waiter.continuation.resume(with: result) }
    }

    /// Runs `batch` once, concatenated along the batch axis; falls back to one run per request when an output does not
    /// keep one row per input row.
    private func run(_ batch: [Waiter], on runtime: any ModelRuntime,
                     timing: inout (start: UInt64, concatenated: UInt64, computed: UInt64)) -> Pass {
        let totalRows = batch.reduce(0) { $0 + $1.rows }
        if batch.count > 1 && rowsAreIndependent {
            // Rows run where each request holds them when the runtime's schedule allows: no batch-sized stacking.
            let inPlace = guarded { try runtime.runBatch(requests: batch.map(\.feeds)) }
            if case .success(let answers?) = inPlace, answers.count == batch.count {
                timing.concatenated = timing.start
                timing.computed = SystemClock.nanoseconds()
                return .separate(answers.map { .success($0) })
            }
            if case .failure(let error) = inPlace {
                timing.concatenated = timing.start
                timing.computed = SystemClock.nanoseconds()
                return .separate(Array(repeating: .failure(error), count: batch.count))
            }
        }
        var feeds = batch[0].feeds
        if batch.count > 1 {
            // Into the engine's buffer pool: the same memory every execution, not MiBs allocated and faulted in afresh.
            for name in inputNames { feeds[name] = Tensor.pooledBatch(concatenating: batch.compactMap { $0.feeds[name] }) }
        }
        timing.concatenated = SystemClock.nanoseconds()
        let outcome = runGuarded(runtime, feeds, rowsAreIndependent: rowsAreIndependent && totalRows > 1)
        timing.computed = SystemClock.nanoseconds()
        switch outcome {
        case .failure(let error):
            return .separate(Array(repeating: .failure(error), count: batch.count))
        case .success(let outputs) where batch.count == 1:
            return .separate([.success(outputs)])
        case .success(let outputs):
            guard Self.keepsRows(outputs, totalRows) else {
                // The model does not keep rows independent on this output; run each request alone instead.
                return .separate(batch.map { runGuarded(runtime, $0.feeds) })
            }
            return .batched(outputs: outputs)
        }
    }

    /// True when every output of a run on `rows` stacked rows has one row per input row, so each request's rows can
    /// be cut back out of it.
    static func keepsRows(_ outputs: [String: Tensor], _ rows: Int) -> Bool {
        outputs.values.allSatisfy { $0.rank > 0 && $0.shape[0] == rows }
    }

    private func runGuarded(_ runtime: any ModelRuntime, _ feeds: [String: Tensor],
                            rowsAreIndependent: Bool = false) -> Result<[String: Tensor], Error> {
        guarded { try rowsAreIndependent ? runtime.runBatch(feeds) : runtime.run(feeds) }
    }

    /// `body`'s result, a runtime error becoming `executionFailed` (a `ServingError` as it is).
    func guarded<T>(_ body: () throws -> T) -> Result<T, Error> {
        do {
            return .success(try body())
        } catch let error as ServingError {
            return .failure(error)
        } catch {
            return .failure(ServingError.executionFailed(model: model, version: version, reason: String(describing: error)))
        }
    }
}
