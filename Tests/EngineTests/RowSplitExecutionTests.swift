import Testing
import Tensor
@testable import Engine

/// `runSplittingRows` (one row range per thread, each thread running the whole plan alone) against 1-thread runs.
@Suite struct RowSplitExecutionTests {
    /// `model.run(feeds)` with every kernel planning for one thread (a part of `parallelParts` computes alone).
    static func oneThreadRun(_ model: CompiledModel, _ feeds: [String: Tensor]) throws -> [String: Tensor] {
        var result: Result<[String: Tensor], Error>?
        parallelParts(1) { _ in result = Result { try model.run(feeds) } }
        return try result!.get()
    }

    /// The fixture's batch repeated `copies` times, each copy scaled differently so that no two rows are equal.
    static func widened(_ feeds: [String: Tensor], copies: Int) -> [String: Tensor] {
        feeds.mapValues { tensor in
            let values = tensor.scalars(as: Float.self)
            let scaled = (0..<copies).flatMap { copy in values.map { $0 * (1 + 0.25 * Float(copy)) } }
            return Tensor(shape: [tensor.shape[0] * copies] + tensor.shape.dropFirst(), scalars: scaled)
        }
    }

    static func bytes(_ tensor: Tensor) -> [UInt8] { tensor.withUnsafeBytes { Array($0) } }

    @Test(arguments: OnnxRuntimeFixtureTests.models) func partsEqualOneThreadRunsOfTheirRows(_ name: String) throws {
        let (model, fixtureFeeds, _) = try OnnxRuntimeFixtureTests.load(name)
        let feeds = Self.widened(fixtureFeeds, copies: 3)
        let rows = feeds.values.first!.shape[0]
        for parts in [2, 3, rows, rows + 2] {
            let split = try model.runSplittingRows(feeds, parts: parts)
            let whole = try Self.oneThreadRun(model, feeds)
            #expect(Set(split.keys) == Set(whole.keys), "\(name) parts \(parts)")
            for (output, value) in whole {
                let actual = try #require(split[output])
                #expect(actual.shape == value.shape && actual.dtype == value.dtype, "\(name).\(output) parts \(parts)")
                // Each part is what one thread computes on its rows, so it matches those rows' own 1-thread run bit for bit.
                let used = min(parts, rows)
                for part in 0..<used {
                    let range = (rows * part / used)..<(rows * (part + 1) / used)
                    let alone = try Self.oneThreadRun(model, feeds.mapValues { Tensor.concatenatingRows([$0.rows(range)]) })
                    #expect(Self.bytes(actual.rows(range)) == Self.bytes(alone[output]!), "\(name).\(output) parts \(parts) rows \(range)")
                }
                if value.dtype == .float32 {
                    #expect(TestSupport.close(actual.scalars(as: Float.self), value.scalars(as: Float.self)), "\(name).\(output) parts \(parts)")
                } else {
                    #expect(Self.bytes(actual) == Self.bytes(value), "\(name).\(output) parts \(parts)")
                }
            }
        }
    }

    @Test func oneRowOrOnePartIsAPlainRun() throws {
        let (model, fixtureFeeds, _) = try OnnxRuntimeFixtureTests.load("cnn")
        let oneRow = fixtureFeeds.mapValues { Tensor.concatenatingRows([$0.rows(0..<1)]) }
        let expected = try Self.oneThreadRun(model, oneRow)
        let split = try model.runSplittingRows(oneRow, parts: 2)
        for (output, value) in expected { #expect(Self.bytes(split[output]!) == Self.bytes(value)) }
        let single = try model.runSplittingRows(fixtureFeeds, parts: 1)
        let plain = try model.run(fixtureFeeds)
        for (output, value) in plain { #expect(Self.bytes(single[output]!) == Self.bytes(value)) }
    }

    @Test func defaultPartsAreTwoPerThreadOfAtLeastTwoRows() {
        #expect(CompiledModel.defaultParts(rows: 8, threads: 2) == 4)
        #expect(CompiledModel.defaultParts(rows: 32, threads: 2) == 4)
        #expect(CompiledModel.defaultParts(rows: 5, threads: 2) == 2)
        #expect(CompiledModel.defaultParts(rows: 2, threads: 2) == 2)
        #expect(CompiledModel.defaultParts(rows: 8, threads: 1) == 1)
        #expect(CompiledModel.defaultParts(rows: 12, threads: 3) == 6)
    }

    @Test func lightBatchesAreNotSplitOnceMeasured() {
        let cost = RowCostEstimate()
        #expect(cost.worthSplitting(rows: 8, parts: 4), "unmeasured: split")
        cost.record(rows: 8, parallel: 1, nanoseconds: 80_000)  // 10 us a row: parts of 20 us
        #expect(!cost.worthSplitting(rows: 8, parts: 4))
        cost.record(rows: 8, parallel: 4, nanoseconds: 30_000_000)  // 15 ms a row on one thread
        #expect(cost.worthSplitting(rows: 8, parts: 4))
        #expect(!cost.worthSplitting(rows: 1_000, parts: 1_000_000))
    }

    @Test func weightsThatFitTheCacheRunOneRowPerPart() {
        let cache = 32 << 20, fiveMilliseconds = 5_000_000
        #expect(CompiledModel.automaticParts(rows: 8, threads: 2, constantBytes: 14 << 20, cacheBytes: cache, nanosecondsPerRow: fiveMilliseconds) == 8)
        #expect(CompiledModel.automaticParts(rows: 32, threads: 2, constantBytes: 1 << 20, cacheBytes: cache, nanosecondsPerRow: fiveMilliseconds) == 32)
        #expect(CompiledModel.automaticParts(rows: 8, threads: 2, constantBytes: 20 << 20, cacheBytes: cache, nanosecondsPerRow: fiveMilliseconds) == 4,
                "weights past half the cache: the two-row rule")
        #expect(CompiledModel.automaticParts(rows: 32, threads: 2, constantBytes: 8 << 20, cacheBytes: cache, nanosecondsPerRow: 500_000) == 4,
                "0.5 ms a row over 8 MiB of weights (a matrix-vector row): the two-row rule")
        #expect(CompiledModel.automaticParts(rows: 8, threads: 2, constantBytes: 14 << 20, cacheBytes: cache, nanosecondsPerRow: 0) == 4,
                "unmeasured: the two-row rule")
        #expect(CompiledModel.automaticParts(rows: 8, threads: 1, constantBytes: 1 << 20, cacheBytes: cache, nanosecondsPerRow: fiveMilliseconds) == 1)
        #expect(CompiledModel.lastLevelCacheBytes > 0)
        #expect(CompiledModel.cacheBytes("32768K") == 32 << 20)
        #expect(CompiledModel.cacheBytes("1M") == 1 << 20)
        #expect(CompiledModel.cacheBytes("512") == 512)
        #expect(CompiledModel.cacheBytes("") == nil && CompiledModel.cacheBytes("K") == nil && CompiledModel.cacheBytes("-1K") == nil)
    }

    @Test func partsKeepTheLeastWorkEach() {
        let cost = RowCostEstimate()
        #expect(cost.affordableParts(rows: 8, wanted: 8) == 8, "unmeasured: as wanted")
        cost.record(rows: 8, parallel: 2, nanoseconds: 20_000_000)  // 5 ms a row on one thread
        #expect(cost.affordableParts(rows: 8, wanted: 8) == 8)
        cost.record(rows: 8, parallel: 1, nanoseconds: 2_400_000)  // 0.3 ms a row: 2.4 ms of work
        #expect(cost.affordableParts(rows: 8, wanted: 8) == 2)
        cost.record(rows: 8, parallel: 1, nanoseconds: 80_000)  // 10 us a row
        #expect(cost.affordableParts(rows: 8, wanted: 8) == 1)
    }

    @Test func kernelsInsideAPartPlanForOneThread() {
        let seen = Tally(2)
        parallelParts(2) { part in if EngineThreads.threads == 1 { seen.hit(part) } }
        #expect(seen.values == [1, 1])
        #expect(EngineThreads.threads == ComputePool.shared.threads)
    }
}
