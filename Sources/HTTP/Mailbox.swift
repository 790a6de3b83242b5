import Glibc
import Infrastructure
import CLibUV

/// The only door into a loop from other threads: a locked queue plus `uv_async_send`. Several sends may fold into
/// one callback, so the loop takes everything queued each time.
final class LoopMailbox<Item: Sendable>: Sendable {
    private struct Queue {
        var items: [Item] = []
        var closed = false
    }

    private let queue = Locked(Queue())
    /// Owned by the loop; only `uv_async_send` touches it from here, under the lock, and never after `close()`.
    private nonisolated(unsafe) let async: UnsafeMutablePointer<uv_async_t>

    init(async: UnsafeMutablePointer<uv_async_t>) { self.async = async }

    /// Queues `item`; dropped when the loop is gone. Wakes the loop only when the queue was empty: otherwise a wake
    /// is already pending, since the loop empties the queue each time it wakes.
    func post(_ item: Item) {
        queue.withLock { q in
            guard !q.closed else { return }
            let wake = q.items.isEmpty
            q.items.append(item)
            if wake { uv_async_send(async) }
        }
    }

    /// Takes everything queued, in the order it was posted.
    func take() -> [Item] {
        queue.withLock { q in
            defer { q.items = [] }
            return q.items
        }
    }

    /// Refuses further posts; called on the loop before its async handle is closed.
    func close() { queue.withLock { $0.closed = true; $0.items = [] } }
}

/// An HTTP/1 loop's mailbox: responses computed elsewhere and lifecycle commands.
typealias Mailbox = LoopMailbox<LoopMessage>

/// What other threads hand an HTTP/1 loop.
enum LoopMessage: Sendable {
    /// A response for request `sequence` on connection `connection`.
    case completion(connection: UInt64, sequence: UInt64, response: HTTPResponse)
    /// Stop accepting, drain, and force-close after `grace` seconds.
    case shutdown(grace: Double)
}
