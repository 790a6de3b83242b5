import Infrastructure
import Testing
import Tensor
@testable import Engine

/// `parallelStream` and `runRow`: the rows a server streams from one batch into the next.
@Suite struct RowStreamExecutionTests {
    @Test func everyJobRunsOnceAloneAndEndsOnlyWhenNoneIsLeft() {
        let jobs = Locked<(queued: [Int], done: [Int], threadsSeen: Set<Int>)>((Array(0..<40), [], []))
        parallelStream {
            jobs.withLock { state -> (() -> Void)? in
                guard let job = state.queued.popLast() else { return nil }
                return {
                    // A job computes alone: its kernels plan for one thread, as one part of `parallelParts`.
                    let threads = EngineThreads.threads
                    jobs.withLock {
                        $0.done.append(job)
                        $0.threadsSeen.insert(threads)
                    }
                }
            }
        }
        let state = jobs.withLock { $0 }
        #expect(state.done.sorted() == Array(0..<40))
        #expect(state.threadsSeen == [1])
    }

    @Test(arguments: ["cnn", "mlp"]) func streamedRowsEqualTheRowsRunInPlace(_ name: String) throws {
        let (model, fixtureFeeds, _) = try OnnxRuntimeFixtureTests.load(name)
        let feeds = RowSplitExecutionTests.widened(fixtureFeeds, copies: 3)
        let rows = feeds.values.first!.shape[0]
        let requests = RequestRowExecutionTests.requests(feeds, sizes: Array(repeating: 1, count: rows))
        let inPlace = try #require(try model.runRequestRows(requests, parts: rows), "\(name)")
        let results = Locked<[Int: [String: Tensor]]>([:])
        let next = Locked(0)
        parallelStream {
            guard let row = next.withLock({ (n: inout Int) -> Int? in defer { n += 1 }; return n < rows ? n : nil }) else { return nil }
            return { results.withLock { $0[row] = try? model.runRow(requests[row]) } }
        }
        let streamed = results.withLock { $0 }
        for row in 0..<rows {
            let answer = try #require(streamed[row], "\(name) row \(row)")
            for (output, expected) in inPlace[row] {
                // The same 1-thread run of the same row: bit for bit.
                #expect(answer[output].map(RequestRowExecutionTests.bytes) == RequestRowExecutionTests.bytes(expected), "\(name).\(output) row \(row)")
            }
        }
    }

    @Test func aLoneRowOrRequestsThatDoNotStackDoNotStream() throws {
        let (model, fixtureFeeds, _) = try OnnxRuntimeFixtureTests.load("cnn")
        let feeds = RowSplitExecutionTests.widened(fixtureFeeds, copies: 3)
        let requests = RequestRowExecutionTests.requests(feeds, sizes: [1, 1])
        #expect(!model.streamsRows([requests[0]]), "a lone row")
        let name = feeds.keys.first!
        #expect(!model.streamsRows([requests[0], ["other": requests[1][name]!]]), "different feed names")
    }
}
