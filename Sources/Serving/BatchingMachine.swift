/// The dynamic batcher's decisions, as a pure state machine: which queued requests run together and when, which expire,
/// which are refused or dropped. Every transition takes the current instant and returns what the driver must do;
/// the machine itself never blocks, sleeps, reads a clock or touches a tensor (`DynamicBatcher` does the side effects).
///
/// Up to `instances` executions at a time per version (Triton's `instance_group` count): `poll` asks for one
/// (`startExecution`), the driver takes a compute slot and calls `takeBatch` (so requests arriving while it waited for
/// the slot still join), then `executionFinished`. A second one starts only once the first has taken its batch.
struct BatchingMachine {
    /// Limits read from the model config.
    struct Policy: Sendable {
        /// Rows per execution; 1 or less runs requests one by one.
        var maxBatchRows: Int
        /// Longest wait after the oldest queued request before a partial batch runs.
        var maxDelayNanos: UInt64
        /// Row counts that run without waiting further; with more queued, a batch stops at the largest one reached.
        var preferredRows: Set<Int>
        /// Requests allowed in the queue.
        var maxQueue: Int
        /// Executions that may run at once (at least 1).
        var instances: Int = 1
    }

    /// What the machine knows of one queued request.
    struct Entry: Equatable {
        /// The driver's handle for the request.
        let id: UInt64
        /// Rows it contributes to a batch.
        let rows: Int
        /// Its inputs' shapes without the batch dimension: only equal keys are stacked.
        let shapeKey: [[Int]]
        /// When it was queued.
        let enqueued: UInt64
        /// When it times out, if ever.
        let deadline: UInt64?
    }

    /// The executions under way.
    struct Executions: Equatable {
        /// Asked for (`startExecution`); the driver is waiting for a compute slot (at most one at a time).
        var awaitingSlot = 0
        /// A batch was taken and is computing.
        var running = 0

        /// None under way.
        var isIdle: Bool { awaitingSlot == 0 && running == 0 }
    }

    /// Why `submit` refused a request.
    enum Refusal: Equatable {
        /// `maxQueue` requests are already queued.
        case queueFull
        /// `close()` was called.
        case closed
    }

    /// What the driver does after a `poll`.
    struct Decision: Equatable {
        /// Requests whose deadline passed: answer each with a timeout (they never run).
        var expired: [UInt64] = []
        /// Take a compute slot, then call `takeBatch`.
        var startExecution = false
        /// Poll again at this instant at the latest (nil: only when something happens).
        var wakeAt: UInt64?
        /// Closed, drained and idle: release the runtime and stop.
        var finished = false
    }

    let policy: Policy
    /// Queued requests, oldest first.
    private(set) var queue: [Entry] = []
    /// The executions under way.
    private(set) var executions = Executions()
    /// False once `close()` was called.
    private(set) var accepting = true

    /// A machine with an empty queue.
    init(policy: Policy) { self.policy = policy }

    /// Requests queued.
    var queueDepth: Int { queue.count }

    /// Rows of the requests queued.
    var queuedRows: Int { queue.reduce(0) { $0 + $1.rows } }

    /// Queues `entry`, or says why not.
    mutating func submit(_ entry: Entry) -> Refusal? {
        guard accepting else { return .closed }
        guard queue.count < policy.maxQueue else { return .queueFull }
        queue.append(entry)
        return nil
    }

    /// Drops a still-queued request (its task was cancelled, e.g. by a connection reset): its rows are never computed.
    /// True when it was queued, so the driver answers it; false when it already left (running or answered).
    mutating func cancel(id: UInt64) -> Bool {
        guard let index = queue.firstIndex(where: { $0.id == id }) else { return false }
        queue.remove(at: index)
        return true
    }

    /// Stops accepting requests; what is queued still runs (at once, without waiting for company).
    mutating func close() { accepting = false }

    /// The decision at `now`: expirations, whether to start an execution, and when to look again.
    mutating func poll(now: UInt64) -> Decision {
        var decision = Decision(expired: expire(now: now))
        let deadline = queue.compactMap(\.deadline).min()
        if queue.isEmpty {
            decision.finished = !accepting && executions.isIdle
            return decision
        }
        // One execution waiting for its slot takes whatever is queued by then: never ask for a second.
        guard executions.awaitingSlot == 0, executions.running < max(1, policy.instances) else {
            decision.wakeAt = deadline
            return decision
        }
        if isReady(now: now) {
            executions.awaitingSlot = 1
            decision.startExecution = true
            decision.wakeAt = deadline
            return decision
        }
        let batchDue = queue[0].enqueued &+ policy.maxDelayNanos
        decision.wakeAt = min(batchDue, deadline ?? .max)
        return decision
    }

    /// With a compute slot held: removes the batch to run and the expired requests. The batch is the oldest request
    /// and every later compatible one that fits, cut back to the largest preferred row count it reached (as Triton's
    /// `preferred_batch_size`: the rest waits for the next execution). An empty batch means nothing is left to run; the
    /// execution is then over.
    mutating func takeBatch(now: UInt64) -> (batch: [Entry], expired: [UInt64]) {
        precondition(executions.awaitingSlot == 1, "takeBatch without startExecution")
        executions.awaitingSlot = 0
        let expired = expire(now: now)
        guard !queue.isEmpty else { return ([], expired) }
        executions.running += 1
        return (removeBatch(), expired)
    }

    /// While a running execution streams rows and one of its compute threads is free: the next batch, taken at once
    /// whatever its size (each row then runs alone on one thread, so waiting for company gains nothing and leaves a
    /// core idle), cut like any batch; empty when nothing is queued. Either way the expired requests. The batch joins
    /// the running execution: `executionFinished` is still called once.
    mutating func extend(now: UInt64) -> (batch: [Entry], expired: [UInt64]) {
        let expired = expire(now: now)
        return (queue.isEmpty ? [] : removeBatch(), expired)
    }

    /// Removes the next batch from a non-empty queue: the oldest request and every later compatible one that fits, cut
    /// back to the largest preferred row count it reached.
    private mutating func removeBatch() -> [Entry] {
        if policy.maxBatchRows <= 1 { return [queue.removeFirst()] }
        let key = queue[0].shapeKey
        var rows = 0
        var taken: [Int] = []
        var preferredCount = 0
        for (index, entry) in queue.enumerated() where entry.shapeKey == key {
            guard taken.isEmpty || rows + entry.rows <= policy.maxBatchRows else { continue }
            taken.append(index)
            rows += entry.rows
            if policy.preferredRows.contains(rows) { preferredCount = taken.count }
        }
        if preferredCount > 0 { taken.removeLast(taken.count - preferredCount) }
        let batch = taken.map { queue[$0] }
        let takenSet = Set(taken)
        queue = queue.indices.filter { !takenSet.contains($0) }.map { queue[$0] }
        return batch
    }

    /// An execution whose `takeBatch` found a batch is over (an empty take already ended its own).
    mutating func executionFinished() { executions.running = max(0, executions.running - 1) }

    /// True when the queue holds a batch worth running now: full, preferred size, delay over, or closing.
    private func isReady(now: UInt64) -> Bool {
        if policy.maxBatchRows <= 1 || !accepting { return true }
        if now >= queue[0].enqueued &+ policy.maxDelayNanos { return true }
        let key = queue[0].shapeKey
        var rows = 0
        for entry in queue where entry.shapeKey == key {
            if rows + entry.rows > policy.maxBatchRows { return true }
            rows += entry.rows
            if rows == policy.maxBatchRows || policy.preferredRows.contains(rows) { return true }
        }
        return false
    }

    /// Removes and returns the requests whose deadline is at or before `now`.
    private mutating func expire(now: UInt64) -> [UInt64] {
        guard queue.contains(where: { ($0.deadline ?? .max) <= now }) else { return [] }
        let expired = queue.filter { ($0.deadline ?? .max) <= now }.map(\.id)
        queue.removeAll { ($0.deadline ?? .max) <= now }
        return expired
    }
}
