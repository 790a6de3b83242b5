import Engine
import Infrastructure
import Tensor

/// Row streaming: when a batch's rows each run alone on one thread (the runtime says so), the execution feeds them to
/// the compute threads a job at a time (one row, or as many as the runtime's `streamJobRows` says: a free thread's
/// share of the rows waiting, as one 1-thread run of them stacked) and, when none is left, takes what is queued at once as the next batch
/// instead of waiting for the batch's slowest job (or for company: jobs that run alone gain nothing from it). On a
/// loaded 2-core box a compute thread whose core was lent to the I/O loop a while finished its last row up to a row's
/// time after the other, which waited idle at the end of every batch.
///
/// The first batch is the machine's usual choice (sizes, delay, preferred counts); each batch is counted as one
/// execution in the statistics; each request is answered as soon as its own rows are computed. The execution keeps
/// its compute slot until no row is left nor ready, or another version waits for the slot.
extension DynamicBatcher {
    /// The rows of a streaming execution; guarded by `lock`.
    struct StreamState {
        /// Rows queued for a compute thread, in order; `next` is the first not yet taken.
        var pending: [StreamedRow] = []
        var next = 0
        /// Jobs being computed.
        var jobs = 0
        /// Set by the first thread that found nothing left: every thread then leaves, so a row arriving later starts a
        /// new execution on all of them instead of streaming on the one thread still here.
        var over = false
        /// An execution streams rows now (arrivals must wake its waiting threads).
        var active = false
    }

    /// One row of a stream: which row of which request.
    typealias StreamedRow = (request: StreamedRequest, row: Int)

    /// One request of a stream and its rows' outputs so far; guarded by `lock`.
    final class StreamedRequest {
        let waiter: Waiter
        let batch: StreamedBatch
        var rowOutputs: [[String: Tensor]?]
        var remaining: Int
        var failure: Error?

        init(waiter: Waiter, batch: StreamedBatch) {
            self.waiter = waiter
            self.batch = batch
            rowOutputs = Array(repeating: nil, count: waiter.rows)
            remaining = waiter.rows
        }
    }

    /// One batch of a stream, recorded as one execution once its last row is computed; guarded by `lock`.
    final class StreamedBatch {
        let rows: Int
        let started: UInt64
        let queueNanos: [UInt64]
        var remaining: Int

        init(_ batch: [Waiter], started: UInt64) {
            rows = batch.reduce(0) { $0 + $1.rows }
            self.started = started
            queueNanos = batch.map { started &- $0.enqueued }
            remaining = rows
        }
    }

    /// Runs `first` and every batch that becomes ready while its rows compute, in jobs of rows on the runtime's threads,
    /// and answers each request; false (nothing done) when another execution of this version streams already (with
    /// `instance_group` count 2 or more): the caller then runs `first` as a batch. Called with the compute slot held.
    func streamRows(_ first: [Waiter], on runtime: any ModelRuntime) -> Bool {
        let started = lock.withLock { () -> Bool in
            guard !stream.active else { return false }
            stream.active = true
            queueStreamRows(first)
            return true
        }
        guard started else { return false }
        runtime.runRowStream { nextStreamedJob(on: runtime) }
        lock.withLock { stream = StreamState() }
        return true
    }

    /// Queues a batch's rows (with `lock` held).
    private func queueStreamRows(_ batch: [Waiter]) {
        let record = StreamedBatch(batch, started: SystemClock.nanoseconds())
        for waiter in batch {
            let request = StreamedRequest(waiter: waiter, batch: record)
            for row in 0..<waiter.rows { stream.pending.append((request, row)) }
        }
    }

    /// The next job: the queued rows the runtime's `streamJobRows` says, else the first of the next ready batch; waits while other rows
    /// compute (one of them may free a batch, or a request may arrive); nil, on every thread, once none is left, ready
    /// or computing.
    private func nextStreamedJob(on runtime: any ModelRuntime) -> (() -> Void)? {
        var expired: [Waiter] = []
        lock.lock()
        while true {
            if stream.over { break }
            if stream.next < stream.pending.count {
                // Sized by every row waiting, taken or still queued, so a deep queue gives each free thread a long job.
                let queued = stream.pending.count - stream.next
                let share = runtime.streamJobRows(queued: queued + machine.queuedRows, computing: stream.jobs)
                let end = stream.next + min(queued, max(1, share))
                let job = Array(stream.pending[stream.next..<end])
                stream.next = end
                if stream.next == stream.pending.count {
                    stream.pending.removeAll(keepingCapacity: true)
                    stream.next = 0
                }
                stream.jobs += 1
                lock.unlock()
                answerTimedOut(expired)
                return { [self] in computeStreamedJob(job, on: runtime) }
            }
            // Another version waiting for the slot gets it once these rows are done.
            if !gate.hasWaiters {
                let taken = machine.extend(now: SystemClock.nanoseconds())
                expired += taken.expired.compactMap { waiters.removeValue(forKey: $0) }
                if !taken.batch.isEmpty || !taken.expired.isEmpty { instruments.queueDepthChanged(machine.queueDepth) }
                if !taken.batch.isEmpty {
                    queueStreamRows(taken.batch.compactMap { waiters.removeValue(forKey: $0.id) })
                    continue
                }
            }
            if stream.jobs == 0 {
                stream.over = true
                streamWake.broadcast()
                break
            }
            // Woken by a row finishing or a request arriving (queued requests expire on the timer thread).
            streamWake.wait(lock)
        }
        lock.unlock()
        answerTimedOut(expired)
        return nil
    }

    /// Computes one job, records its rows, and answers each request whose last row it was.
    private func computeStreamedJob(_ job: [StreamedRow], on runtime: any ModelRuntime) {
        let result = guarded { try Self.runStreamJob(job, on: runtime) }
        let finished = SystemClock.nanoseconds()
        let (requestsDone, batchesDone) = lock.withLock { () -> ([StreamedRequest], [StreamedBatch]) in
            var requestsDone: [StreamedRequest] = [], batchesDone: [StreamedBatch] = []
            for (index, (request, row)) in job.enumerated() {
                switch result {
                case .success(let outputs): request.rowOutputs[row] = outputs[index]
                case .failure(let error): request.failure = request.failure ?? error
                }
                request.remaining -= 1
                request.batch.remaining -= 1
                if request.remaining == 0 { requestsDone.append(request) }
                if request.batch.remaining == 0 { batchesDone.append(request.batch) }
            }
            stream.jobs -= 1
            streamWake.broadcast()
            return (requestsDone, batchesDone)
        }
        // Recorded before the batch's last request is answered, so a client that saw every answer sees every execution.
        for batch in batchesDone {
            instruments.executed(rows: batch.rows, queueNanos: batch.queueNanos, inputNanos: 0,
                                 inferNanos: finished &- batch.started, outputNanos: 0)
        }
        for request in requestsDone { request.waiter.continuation.resume(with: answer(request, on: runtime)) }
    }

    /// Each row's outputs of one job: its rows as one run (`runRows`, which may read each row where its request holds
    /// it), or each row run alone when they do not stack or an output does not keep one row per row.
    private static func runStreamJob(_ job: [StreamedRow], on runtime: any ModelRuntime) throws -> [[String: Tensor]] {
        let rowFeeds = job.map { request, row in request.waiter.feeds.mapValues { $0.rows(row..<(row + 1)) } }
        if rowFeeds.count > 1, let names = rowFeeds.first?.keys,
           names.allSatisfy({ name in Tensor.stackableRows(rowFeeds.compactMap { $0[name] }) && rowFeeds.allSatisfy { $0[name] != nil } }) {
            let outputs = try runtime.runRows(rowFeeds)
            if keepsRows(outputs, job.count) {
                return job.indices.map { index in outputs.mapValues { $0.rows(index..<(index + 1)) } }
            }
        }
        return try rowFeeds.map { try runtime.runRows([$0]) }
    }

    /// A finished request's outputs: its rows' outputs stacked, or the request run whole when an output did not keep
    /// one row per input row or its rows differ in shape (as a batch whose outputs do not keep rows falls back to
    /// separate runs).
    private func answer(_ request: StreamedRequest, on runtime: any ModelRuntime) -> Result<[String: Tensor], Error> {
        if let failure = request.failure { return .failure(failure) }
        let rows = request.rowOutputs.map { $0! }
        if rows.count == 1 { return .success(rows[0]) }
        guard let merged = Tensor.stackingRows(rows, rows: Array(repeating: 1, count: rows.count)) else {
            return guarded { try runtime.run(request.waiter.feeds) }
        }
        return .success(merged)
    }
}
