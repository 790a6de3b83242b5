import Testing
@testable import Infrastructure

/// Records what the fake services did, in order.
private final class Journal: Sendable {
    private let entries = Locked<[String]>([])
    func note(_ entry: String) { entries.withLock { $0.append(entry) } }
    var all: [String] { entries.withLock { $0 } }
}

/// A service that runs until shutdown or cancellation, noting each step.
private struct FakeService: Service {
    let name: String
    let journal: Journal
    var failure: (any Error)?
    /// Returns at once instead of waiting (like a poller with polling off).
    var returnsAtOnce = false
    let started = Latch()
    let stop = Latch()

    func run() async throws {
        journal.note("run \(name)")
        started.open()
        if let failure { throw failure }
        if returnsAtOnce { return }
        await stop.wait()
        journal.note("ran \(name)")
    }

    func shutdown() async {
        // Each step takes a while: the next service must not start its shutdown before this one is done.
        for _ in 0..<50 { await Task.yield() }
        journal.note("shutdown \(name)")
        stop.open()
    }
}

/// A service that only stops when its task is cancelled (no `shutdown()` of its own).
private struct CancelledOnlyService: Service {
    let name = "poller"
    let journal: Journal
    let started = Latch()
    func run() async throws {
        started.open()
        while !Task.isCancelled { await Task.yield() }
        journal.note("cancelled poller")
    }
}

private struct Boom: Error {}

@Suite struct ServiceGroupTests {
    @Test func servicesStopInReverseOrderEachFinishedBeforeTheNext() async throws {
        let journal = Journal()
        let models = FakeService(name: "models", journal: journal)
        let poller = CancelledOnlyService(journal: journal)
        let http = FakeService(name: "http", journal: journal)
        let group = ServiceGroup(services: [models, poller, http])
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            await models.started.wait()
            await poller.started.wait()
            await http.started.wait()
            #expect(!group.isShuttingDown)
            group.triggerShutdown()
            try await tasks.waitForAll()
        }
        let stops = journal.all.filter { !$0.hasPrefix("run ") }
        #expect(stops == ["shutdown http", "ran http", "cancelled poller", "shutdown models", "ran models"])
        #expect(group.isShuttingDown)
    }

    @Test func aFailingServiceShutsTheOthersDownAndItsErrorIsRethrown() async throws {
        let journal = Journal()
        let models = FakeService(name: "models", journal: journal)
        let http = FakeService(name: "http", journal: journal, failure: Boom())
        let group = ServiceGroup(services: [models, http])
        await #expect(throws: Boom.self) { try await group.run() }
        #expect(journal.all.filter { $0.hasPrefix("shutdown") } == ["shutdown http", "shutdown models"])
    }

    @Test func aServiceThatReturnsEarlyDoesNotStopTheOthers() async throws {
        let journal = Journal()
        let loader = FakeService(name: "loader", journal: journal, returnsAtOnce: true)
        let http = FakeService(name: "http", journal: journal)
        let group = ServiceGroup(services: [loader, http])
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            await loader.started.wait()
            await http.started.wait()
            for _ in 0..<100 { await Task.yield() }
            #expect(!journal.all.contains("ran http"), "http keeps running after the loader returned")
            group.triggerShutdown()
            try await tasks.waitForAll()
        }
        #expect(journal.all.filter { $0.hasPrefix("shutdown") } == ["shutdown http", "shutdown loader"])
    }
}

@Suite struct ToolkitTests {
    @Test func manualClockMovesOnlyWhenAdvanced() {
        let clock = ManualClock(start: 100)
        #expect(clock.now() == 100)
        clock.advance(by: 50)
        clock.advance(by: .microseconds(2))
        #expect(clock.now() == 2150)
        #expect(Duration.seconds(-1).clampedNanoseconds == 0)
    }

    @Test func systemClockNeverGoesBackwards() {
        var last = SystemClock.nanoseconds()
        for _ in 0..<1000 {
            let now = SystemClock().now()
            #expect(now >= last)
            last = now
        }
    }

    @Test func conditionTimesOutAtItsDeadline() {
        let lock = Lock()
        let condition = Condition()
        let deadline = SystemClock.nanoseconds() + 20_000_000
        lock.lock()
        var signalled = false
        while !signalled && SystemClock.nanoseconds() < deadline { signalled = condition.wait(lock, until: deadline) }
        lock.unlock()
        #expect(!signalled)
        #expect(SystemClock.nanoseconds() >= deadline)
    }

    @Test func latchReleasesThreadsAndTasks() async {
        let latch = Latch()
        let executor = BlockingExecutor(name: "test-latch")
        async let blocked: Void? = try? executor.run { latch.wait() }
        #expect(!latch.opened)
        latch.open()
        await latch.wait()
        _ = await blocked
        #expect(latch.opened)
    }

    @Test func recorderLoggerReceivesLinesAtOrAboveItsLevel() {
        let lines = Locked<[String]>([])
        let logger = Logger(level: .info) { level, message, fields in
            lines.withLock { $0.append("\(level) \(message) \(fields.map { "\($0.0)=\($0.1)" }.joined())") }
        }
        logger.debug("hidden")
        logger.info("shown", [("k", "v")])
        logger(.warning, "warned")
        #expect(lines.withLock { $0 } == ["info shown k=v", "warn warned "])
        #expect(LogLevel(name: "WARNING") == .warning && LogLevel(name: "warn") == .warning)
        #expect(!Logger.disabled.enabled(.error))
    }
}
