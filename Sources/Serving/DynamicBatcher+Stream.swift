import Infrastructure
import Tensor

/// Row streaming: when a batch's rows each run alone on one thread (the runtime says so), the execution feeds them to
/// the compute threads one row at a time and, when none is left, takes what is queued at once as the next batch
/// instead of waiting for the batch's slowest row (or for company: rows that run alone gain nothing from it). On a
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
        var pending: [(request: StreamedRequest, row: Int)] = []
        var next = 0
        /// Rows being computed.
        var computing = 0
        /// An execution streams rows now (arrivals must wake its waiting threads).
        var active = false
    }

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

    /// Runs `first` and every batch that becomes ready while its rows compute, row by row on the runtime's threads,
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
        runtime.runRowStream { nextStreamedRow(on: runtime) }
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

    /// The next row to compute: a queued one, else the first of the next ready batch; waits while other rows compute
    /// (one of them may free a batch, or a request may arrive); nil once none is left, ready or computing.
    private func nextStreamedRow(on runtime: any ModelRuntime) -> (() -> Void)? {
        var expired: [Waiter] = []
        lock.lock()
        while true {
            if stream.next < stream.pending.count {
                let (request, row) = stream.pending[stream.next]
                stream.next += 1
                if stream.next == stream.pending.count {
                    stream.pending.removeAll(keepingCapacity: true)
                    stream.next = 0
                }
                stream.computing += 1
                lock.unlock()
                answerTimedOut(expired)
                return { [self] in computeStreamedRow(request, row, on: runtime) }
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
            if stream.computing == 0 {
                streamWake.broadcast()
                lock.unlock()
                answerTimedOut(expired)
                return nil
            }
            // Woken by a row finishing or a request arriving (queued requests expire on the timer thread).
            streamWake.wait(lock)
        }
    }

    /// Computes one row, records it, and answers its request when that was the request's last row.
    private func computeStreamedRow(_ request: StreamedRequest, _ row: Int, on runtime: any ModelRuntime) {
        let feeds = request.waiter.feeds.mapValues { $0.rows(row..<(row + 1)) }
        let result = guarded { try runtime.runRow(feeds) }
        let finished = SystemClock.nanoseconds()
        let (requestDone, batchDone) = lock.withLock { () -> (Bool, Bool) in
            switch result {
            case .success(let outputs): request.rowOutputs[row] = outputs
            case .failure(let error): request.failure = request.failure ?? error
            }
            request.remaining -= 1
            request.batch.remaining -= 1
            stream.computing -= 1
            streamWake.broadcast()
            return (request.remaining == 0, request.batch.remaining == 0)
        }
        // Recorded before the batch's last request is answered, so a client that saw every answer sees every execution.
        if batchDone {
            let batch = request.batch
            instruments.executed(rows: batch.rows, queueNanos: batch.queueNanos, inputNanos: 0,
                                 inferNanos: finished &- batch.started, outputNanos: 0)
        }
        if requestDone { request.waiter.continuation.resume(with: answer(request, on: runtime)) }
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
