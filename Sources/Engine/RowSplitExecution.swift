import Foundation
import Infrastructure
import Synchronization
import Tensor

extension CompiledModel {
    /// Runs a batch whose rows are independent as `parts` row ranges at once, one per compute thread: each thread runs
    /// every step on its own rows alone (one barrier per run instead of one per operator), sharing the plan and weights.
    ///
    /// The caller asserts what dynamic batching assumes: each output row depends only on the same input row, and every
    /// input and output has the batch as its first axis. Each part computes exactly what a 1-thread engine computes
    /// on those rows. `parts` defaults to `automaticParts`; with fewer than 2 parts or rows (or an output that does not
    /// keep one row per input row), this is `run(feeds)`.
    public func runSplittingRows(_ feeds: [String: Tensor], parts requested: Int? = nil) throws -> [String: Tensor] {
        guard let rows = Self.commonRows(feeds) else { return try run(feeds) }
        let parts = rowParts(rows: rows, requested: requested)
        let started = SystemClock.nanoseconds()
        defer { rowCost.record(rows: rows, parallel: min(parts, EngineThreads.threads), nanoseconds: SystemClock.nanoseconds() &- started) }
        guard parts >= 2 else { return try run(feeds) }
        let ranges = (0..<parts).map { (rows * $0 / parts)..<(rows * ($0 + 1) / parts) }
        let partFeeds = ranges.map { range in feeds.mapValues { $0.rows(range) } }
        var results = [Result<[String: Tensor], Error>?](repeating: nil, count: parts)
        results.withUnsafeMutableBufferPointer { slots in
            parallelParts(parts) { part in slots[part] = Result { try run(partFeeds[part]) } }
        }
        let outputs = try results.map { try $0!.get() }
        // An output without one row per input row, or whose rows differ in shape, cannot be stitched from parts: run
        // the batch whole instead.
        return try Tensor.stackingRows(outputs, rows: ranges.map(\.count)) ?? run(feeds)
    }

    /// The parts `runSplittingRows` cuts `rows` rows into: `requested` (at most one per row), else `automaticParts`
    /// trimmed to the parts that carry enough work each (1 when fewer than one per thread remain).
    func rowParts(rows: Int, requested: Int? = nil) -> Int {
        let threads = EngineThreads.threads
        var parts = min(requested ?? Self.automaticParts(rows: rows, threads: threads, constantBytes: retainedConstantBytes,
                                                         cacheBytes: Self.lastLevelCacheBytes,
                                                         nanosecondsPerRow: rowCost.nanosecondsPerRow), rows)
        // A light model (a few microseconds a row) loses more to waking the other threads than the split gains: as
        // many parts as carry the least work worth a part each, none below one per thread.
        if requested == nil {
            parts = rowCost.affordableParts(rows: rows, wanted: parts)
            if parts < min(threads, rows) { parts = 1 }
        }
        return parts
    }

    /// Parts for `rows` on `threads` threads: none on one thread; else two per thread while each keeps 2 rows or more
    /// (a thread whose core is taken by other work a while is then balanced by the others taking more parts), and
    /// at least one per thread. MobileNetV2, 8 rows, 2 threads, loaded box: 4 parts cost the CPU per image of 2 parts
    /// and of one thread, 10% less than each operator split, and finished sooner than 2 parts.
    static func defaultParts(rows: Int, threads: Int) -> Int {
        threads < 2 ? 1 : max(threads, min(2 * threads, rows / 2))
    }

    /// Parts when the caller names none: one row per part when the weights fit in half of the last-level cache
    /// (`cacheBytes`; each part then reads them from the cache, and its 1-row activations stay closer to the core) and
    /// a row's measured work (`nanosecondsPerRow`, 0 = unmeasured) is at least `rowNanosecondsPerWeightByte` per
    /// byte of weights (a convolution network reuses each weight across a row's pixels; a matrix-vector row would
    /// reread them per part for little work); else `defaultParts`. MobileNetV2 (14 MB of weights, 32 MiB cache,
    /// about 5 ms a row), 8 rows on 2 threads, loaded box, paired runs: 8 parts of 1 row cost 6-14% less CPU per image
    /// than 4 or 2 parts, and 18% less than one thread's batch.
    static func automaticParts(rows: Int, threads: Int, constantBytes: Int, cacheBytes: Int, nanosecondsPerRow: Int) -> Int {
        guard threads >= 2 else { return 1 }
        let weightsStayCached = 2 * constantBytes <= cacheBytes
        let rowsOutworkTheWeights = nanosecondsPerRow > 0 && Double(nanosecondsPerRow) >= rowNanosecondsPerWeightByte * Double(constantBytes)
        return weightsStayCached && rowsOutworkTheWeights ? max(1, rows) : defaultParts(rows: rows, threads: threads)
    }

    /// Least single-thread work of a row per byte of weights for one-row parts: 0.2 ns, twice the time of reading the
    /// weights once at a conservative 10 GB/s, so rereading them per part costs under half of a part's work.
    static let rowNanosecondsPerWeightByte = 0.2

    /// The L3 cache this core shares, in bytes, from sysfs (`index3/size`, e.g. "32768K"); 8 MiB when absent. Not
    /// glibc's `_SC_LEVEL3_CACHE_SIZE`: in this VM it reports the whole socket's 384 MiB, not the 32 MiB a core sees.
    static let lastLevelCacheBytes: Int = {
        let directory = "/sys/devices/system/cpu/cpu0/cache/index3/"
        func read(_ name: String) -> String? {
            (try? String(contentsOfFile: directory + name, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        return read("level") == "3" ? read("size").flatMap(CompiledModel.cacheBytes) ?? 8 << 20 : 8 << 20
    }()

    /// Bytes of a sysfs cache size ("32768K", "1M", "512"); nil when malformed.
    static func cacheBytes(_ text: String) -> Int? {
        let units: [Character: Int] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30]
        guard let last = text.last else { return nil }
        let scale = units[last] ?? 1
        guard let value = Int(scale == 1 ? text : String(text.dropLast())), value > 0 else { return nil }
        return value * scale
    }

    /// The first-axis length every feed shares, if they all have one.
    static func commonRows(_ feeds: [String: Tensor]) -> Int? {
        guard let first = feeds.values.first, first.rank > 0 else { return nil }
        let rows = first.shape[0]
        return feeds.values.allSatisfy({ $0.rank > 0 && $0.shape[0] == rows && $0.dtype != .string }) ? rows : nil
    }
}

/// The last batch run's wall time per row, scaled to one thread: whether splitting a batch into parts pays.
final class RowCostEstimate: Sendable {
    /// Estimated single-thread nanoseconds per row; 0 until a batch ran.
    private let perRow = Atomic<Int>(0)
    /// Least estimated work of one part (1 ms) for the split to pay for the other threads' wake-up and the stitching.
    static let minimumPartNanoseconds = 1_000_000

    /// Estimated single-thread nanoseconds per row of the last batch run; 0 until one ran.
    var nanosecondsPerRow: Int { perRow.load(ordering: .relaxed) }

    /// True until measured, then when each of `parts` parts would compute at least `minimumPartNanoseconds`.
    func worthSplitting(rows: Int, parts: Int) -> Bool {
        let perRow = nanosecondsPerRow
        return perRow == 0 || perRow * rows >= parts * Self.minimumPartNanoseconds
    }

    /// The most parts, up to `wanted`, that each get at least `minimumPartNanoseconds` of estimated work (`wanted`
    /// until measured; at least 1).
    func affordableParts(rows: Int, wanted: Int) -> Int {
        let perRow = nanosecondsPerRow
        guard perRow > 0 else { return wanted }
        return max(1, min(wanted, perRow * rows / Self.minimumPartNanoseconds))
    }

    /// Records a run of `rows` rows on `parallel` threads that took `nanoseconds` of wall time.
    func record(rows: Int, parallel: Int, nanoseconds: UInt64) {
        guard rows > 0 else { return }
        perRow.store(max(1, Int(nanoseconds) * max(1, parallel) / rows), ordering: .relaxed)
    }
}
