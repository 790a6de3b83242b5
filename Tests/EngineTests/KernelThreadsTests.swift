import Glibc
import Synchronization
import Testing
@testable import Engine

/// Per-index hit counts recorded from any thread.
final class Tally: Sendable {
    let counts: Mutex<[Int]>
    init(_ count: Int) { counts = Mutex(Array(repeating: 0, count: count)) }
    func hit(_ index: Int) { counts.withLock { $0[index] += 1 } }
    var values: [Int] { counts.withLock { $0 } }
}

@Suite(.serialized) struct KernelThreadsTests {
    @Test func parallelForVisitsEveryIndexOnce() {
        for threads in [1, 2, 3] {
            EngineThreads.configure(threads: threads)
            for count in [0, 1, 2, 7, 1000] {
                let tally = Tally(count)
                parallelFor(count) { tally.hit($0) }
                #expect(tally.values.allSatisfy { $0 == 1 }, "threads \(threads) count \(count)")
            }
        }
        EngineThreads.configure(threads: 2)
    }

    @Test func nestedAndConcurrentCallsComplete() async {
        EngineThreads.configure(threads: 2)
        let tally = Tally(1)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<4 {
                group.addTask {
                    parallelFor(10) { _ in parallelFor(10) { _ in tally.hit(0) } }
                }
            }
        }
        #expect(tally.values == [400])
    }

    /// Thousands of back-to-back short jobs: the lock-free hand-off and the closing of a job that a late worker never
    /// entered must still run every index exactly once, at every thread count.
    @Test func backToBackShortJobsRunEveryIndexOnce() {
        for threads in [2, 3] {
            EngineThreads.configure(threads: threads)
            let tally = Tally(5)
            for _ in 0..<20_000 { parallelFor(5) { tally.hit($0) } }
            #expect(tally.values == Array(repeating: 20_000, count: 5), "threads \(threads)")
        }
        EngineThreads.configure(threads: 2)
    }

    /// A worker that sleeps between jobs (past its spin budget) is woken for the next one.
    @Test func jobsAfterAnIdlePauseComplete() {
        EngineThreads.configure(threads: 2)
        let tally = Tally(2)
        for _ in 0..<3 {
            usleep(20_000)
            parallelFor(2) { tally.hit($0) }
        }
        #expect(tally.values == [3, 3])
    }

    @Test func rangesCoverTheWholeSpan() {
        EngineThreads.configure(threads: 2)
        for total in [1, 5, 64, 1001] {
            let tally = Tally(total)
            parallelRanges(total, minimumChunk: 3) { range in for i in range { tally.hit(i) } }
            #expect(tally.values.allSatisfy { $0 == 1 }, "total \(total)")
        }
    }

    /// `partsPerThread` caps the number of ranges (contiguous, covering the span once) at that many per thread.
    @Test func rangesPerThreadAreCapped() {
        EngineThreads.configure(threads: 2)
        for (total, parts) in [(12, 2), (48, 1), (5, 2), (3, 4)] {
            let tally = Tally(total)
            let ranges = Mutex<[Range<Int>]>([])
            parallelRanges(total, partsPerThread: parts) { range in
                ranges.withLock { $0.append(range) }
                for i in range { tally.hit(i) }
            }
            let seen = ranges.withLock { $0 }
            #expect(tally.values.allSatisfy { $0 == 1 }, "total \(total)")
            #expect(seen.count == min(total, 2 * parts), "total \(total) parts \(parts): \(seen)")
        }
    }
}
