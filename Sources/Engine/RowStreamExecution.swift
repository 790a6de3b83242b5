import Infrastructure
import Tensor

extension CompiledModel {
    /// True when these requests' rows, as one batch, would run one row per part (`runRequestRows`'s schedule): each row
    /// is then a 1-thread run of its own, so a server may stream rows from one batch into the next (`parallelStream`)
    /// instead of waiting at the end of each batch for its slowest row.
    public func streamsRows(_ requests: [[String: Tensor]]) -> Bool { oneRowPerPart(requests) != nil }

    /// Runs one row's feeds as one job of `parallelStream` (single-threaded there, as each part of `runRequestRows`)
    /// and records its time as the model's cost per row, which the choice of schedule reads.
    public func runRow(_ feeds: [String: Tensor]) throws -> [String: Tensor] {
        let started = SystemClock.nanoseconds()
        defer { rowCost.record(rows: 1, parallel: 1, nanoseconds: SystemClock.nanoseconds() &- started) }
        return try run(feeds)
    }
}

/// Runs the jobs `next` hands out on every compute thread, each job computing alone (its kernels plan for one thread,
/// as in `parallelParts`), until `next` has returned nil on every thread that asked. Work-conserving: a thread that
/// finds no job of one batch left takes the next batch's first job instead of waiting for the batch's last row.
/// `next` is called concurrently; it may block until a job arrives or the stream is over.
public func parallelStream(_ next: () -> (() -> Void)?) {
    parallelParts(EngineThreads.threads) { _ in
        while let job = next() { job() }
    }
}
