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

    @Test func rangesCoverTheWholeSpan() {
        EngineThreads.configure(threads: 2)
        for total in [1, 5, 64, 1001] {
            let tally = Tally(total)
            parallelRanges(total, minimumChunk: 3) { range in for i in range { tally.hit(i) } }
            #expect(tally.values.allSatisfy { $0 == 1 }, "total \(total)")
        }
    }
}
