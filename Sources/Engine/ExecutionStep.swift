import Foundation
import Tensor

/// One prepared node: its kernel and the value slots it reads and writes.
struct ExecutionStep: Sendable {
    /// Node label for errors.
    let label: String
    /// The prepared operator.
    let kernel: Kernel
    /// Input slots; -1 marks an omitted optional input (or a constant baked into the kernel).
    let inputs: [Int]
    /// Output slots; -1 marks an unused output.
    let outputs: [Int]
    /// Slots whose last reader is this step (released after it runs, so their buffers can be reused).
    var releases: [Int] = []
    /// True when every output depends only on input shapes and constants (computed once per shape signature).
    var shapeDerived = false
}

/// Values that depend only on the input shapes, computed on the first run of each shape signature.
final class ShapePlanCache: @unchecked Sendable {
    private let lock = NSLock()
    private var plans: [[[Int]]: [Int: Tensor]] = [:]
    private let limit = 64

    /// The cached shape-derived values for `signature`, if any.
    func values(for signature: [[Int]]) -> [Int: Tensor]? {
        lock.lock()
        defer { lock.unlock() }
        return plans[signature]
    }

    /// Stores the shape-derived values of `signature` (the cache is bounded; it restarts when full).
    func store(_ values: [Int: Tensor], for signature: [[Int]]) {
        lock.lock()
        defer { lock.unlock() }
        if plans.count >= limit { plans.removeAll() }
        plans[signature] = values
    }

    /// Number of cached signatures (for tests).
    var count: Int {
        lock.lock()
        defer { lock.unlock() }
        return plans.count
    }
}
