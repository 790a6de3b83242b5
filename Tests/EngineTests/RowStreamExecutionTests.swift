import Infrastructure
import Testing
import Tensor
@testable import Engine

/// `parallelStream` and `runRows`: the rows a server streams from one batch into the next.
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
            return { results.withLock { $0[row] = try? model.runRows([requests[row]]) } }
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

    @Test(arguments: ["cnn", "mlp"]) func aJobOfStackedRowsGivesEachRowItsOwnRun(_ name: String) throws {
        let (model, fixtureFeeds, _) = try OnnxRuntimeFixtureTests.load(name)
        let feeds = RowSplitExecutionTests.widened(fixtureFeeds, copies: 3)
        let rows = feeds.values.first!.shape[0]
        let requests = RequestRowExecutionTests.requests(feeds, sizes: Array(repeating: 1, count: rows))
        let stacked = Locked<(taken: Bool, outputs: [String: Tensor]?)>((false, nil))
        parallelStream {
            // One job, on whichever thread asks first.
            guard stacked.withLock({ (state: inout (taken: Bool, outputs: [String: Tensor]?)) -> Bool in
                defer { state.taken = true }
                return !state.taken
            }) else { return nil }
            return {
                let outputs = try? model.runRows([feeds])
                stacked.withLock { $0.outputs = outputs }
            }
        }
        let job = try #require(stacked.withLock { $0.outputs }, "\(name)")
        for row in 0..<rows {
            for (output, expected) in try model.run(requests[row]) {
                let gotRow = try #require(job[output], "\(name).\(output)").rows(row..<(row + 1))
                guard expected.dtype == .float32 else {
                    #expect(RequestRowExecutionTests.bytes(gotRow) == RequestRowExecutionTests.bytes(expected), "\(name).\(output) row \(row)")
                    continue
                }
                let got = gotRow.scalars(as: Float.self), want = expected.scalars(as: Float.self)
                // The same row in a 1-thread run of several rows: kernels may block the rows differently.
                let scale = want.map(abs).max() ?? 1
                #expect(zip(got, want).allSatisfy { abs($0 - $1) <= 1e-5 * max(scale, 1) }, "\(name).\(output) row \(row)")
            }
        }
    }

    @Test func aJobTakesAnIdleThreadsShareOfTheWaitingRowsUpToEight() {
        #expect(CompiledModel.streamJobRows(queued: 8, idleThreads: 2) == 4, "two threads free: half each")
        #expect(CompiledModel.streamJobRows(queued: 8, idleThreads: 1) == 8, "one thread free: all of them")
        #expect(CompiledModel.streamJobRows(queued: 5, idleThreads: 2) == 3)
        #expect(CompiledModel.streamJobRows(queued: 30, idleThreads: 1) == 8, "at most eight")
        #expect(CompiledModel.streamJobRows(queued: 1, idleThreads: 4) == 1)
        #expect(CompiledModel.streamJobRows(queued: 6, idleThreads: 0) == 6, "the asking thread counts as free")
    }

    @Test func aStreamThreadCountsEveryComputeThreadWhenItSizesAJob() throws {
        let (model, _, _) = try OnnxRuntimeFixtureTests.load("cnn")
        let outside = model.streamJobRows(queued: 6, computing: 0)
        let inside = Locked<[Int]>([])
        let asked = Locked(false)
        parallelStream {
            guard !asked.withLock({ (done: inout Bool) -> Bool in defer { done = true }; return done }) else { return nil }
            // Asked from inside a part, as the batcher's stream asks: the part's own view of the threads reads 1.
            inside.withLock { $0.append(model.streamJobRows(queued: 6, computing: 0)) }
            return {}
        }
        #expect(inside.withLock { $0 } == [outside])
        #expect(outside == CompiledModel.streamJobRows(queued: 6, idleThreads: ComputePool.shared.threads))
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
