import Infrastructure
import Tensor

extension CompiledModel {
    /// True when these requests' rows, as one batch, would run one row per part (`runRequestRows`'s schedule): each row
    /// is then a 1-thread run of its own, so a server may stream rows from one batch into the next (`parallelStream`)
    /// instead of waiting at the end of each batch for its slowest row.
    public func streamsRows(_ requests: [[String: Tensor]]) -> Bool { oneRowPerPart(requests) != nil }

    /// Runs one job of `parallelStream`, one row or a few stacked as `run(stacking:)` does (single-threaded there, as
    /// each part of `runRequestRows`), and records its time per row as the model's cost per row, which the choice of
    /// schedule reads.
    public func runRows(_ parts: [[String: Tensor]]) throws -> [String: Tensor] {
        let started = SystemClock.nanoseconds()
        defer {
            let rows = parts.reduce(0) { $0 + (Self.commonRows($1) ?? 1) }
            rowCost.record(rows: rows, parallel: 1, nanoseconds: SystemClock.nanoseconds() &- started)
        }
        return try run(stacking: parts)
    }

    /// Rows the next stream job takes when `queued` rows wait (taken into the stream or still queued) and `computing`
    /// jobs run: an even share of them for each compute thread not computing (a thread that runs several rows alone
    /// reads each layer's weights once for all of them), at most `streamJobMaximumRows`.
    public func streamJobRows(queued: Int, computing: Int) -> Int {
        // The pool's threads, not `EngineThreads.threads`: the stream's threads ask from inside their parts, where
        // that reads 1 (and one thread then took every row while the other waited: 8 clients ran at half speed).
        Self.streamJobRows(queued: queued, idleThreads: ComputePool.shared.threads - computing)
    }

    /// `streamJobRows` with `idleThreads` compute threads free to take the rows, the asking one included.
    static func streamJobRows(queued: Int, idleThreads: Int) -> Int {
        let idle = max(1, idleThreads)
        return max(1, min(streamJobMaximumRows, (queued + idle - 1) / idle))
    }

    /// Most rows of one stream job: past 8 rows a 1-thread run's cost per row stops falling (MobileNetV2, one
    /// thread, ms per row at 1, 2, 4, 8, 16 and 32 rows: 6.92, 6.55, 6.47, 6.38, 6.35, 6.43), and a request's
    /// answer waits for its whole job.
    static let streamJobMaximumRows = 8
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
