#if canImport(Glibc)
import Glibc
#endif
import Infrastructure
import CLibUV

/// The only door into a loop from other threads: a locked queue plus `uv_async_send`.
final class Mailbox: Sendable {
    /// A response for request `sequence` on connection `connection`.
    struct Completion: Sendable {
        var connection: UInt64
        var sequence: UInt64
        var response: HTTPResponse
    }

    /// Lifecycle requests for the loop.
    enum Command: Sendable {
        /// Stop accepting, drain, and force-close after `grace` seconds.
        case shutdown(grace: Double)
    }

    private struct Queue {
        var completions: [Completion] = []
        var commands: [Command] = []
        var closed = false
    }

    private let queue = Locked(Queue())
    /// Owned by the loop; only `uv_async_send` touches it from here, under the lock, and never after `close()`.
    private nonisolated(unsafe) let async: UnsafeMutablePointer<uv_async_t>

    init(async: UnsafeMutablePointer<uv_async_t>) { self.async = async }

    /// Queues a response; dropped when the loop is gone. Wakes the loop only when the queue was empty.
    func post(_ completion: Completion) {
        queue.withLock { q in
            guard !q.closed else { return }
            let wake = q.completions.isEmpty && q.commands.isEmpty
            q.completions.append(completion)
            if wake { uv_async_send(async) }
        }
    }

    /// Queues a lifecycle command.
    func send(_ command: Command) {
        queue.withLock { q in
            guard !q.closed else { return }
            q.commands.append(command)
            uv_async_send(async)
        }
    }

    /// Takes everything queued (the loop drains all each wake-up, as several sends may fold into one).
    func take() -> (completions: [Completion], commands: [Command]) {
        queue.withLock { q in
            defer { q.completions = []; q.commands = [] }
            return (q.completions, q.commands)
        }
    }

    /// Refuses further posts; called on the loop before its async handle is closed.
    func close() { queue.withLock { $0.closed = true; $0.completions = []; $0.commands = [] } }
}
