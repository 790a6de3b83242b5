import CLibUV
import Infrastructure

/// The door into a loop for gRPC answers computed elsewhere: a locked queue plus `uv_async_send`
/// (several sends may fold into one callback, so the loop takes everything each time).
final class HTTP2Mailbox: Sendable {
    /// What to do on stream `stream` of connection `connection`.
    struct Answer: Sendable {
        /// A unary answer, one message of a server stream, or the end of a server stream.
        enum Event: Sendable {
            case response(GRPCResponse)
            case message([UInt8])
            case end(GRPCStatus)
        }
        var connection: UInt64
        var stream: Int32
        var event: Event
    }

    private struct Queue {
        var answers: [Answer] = []
        var closed = false
    }

    private let queue = Locked(Queue())
    /// Owned by the loop; touched here only by `uv_async_send`, under the lock, never after `close()`.
    private nonisolated(unsafe) let async: UnsafeMutablePointer<uv_async_t>

    init(async: UnsafeMutablePointer<uv_async_t>) { self.async = async }

    /// Queues an answer; dropped once the loop is gone.
    func post(_ answer: Answer) {
        queue.withLock { q in
            guard !q.closed else { return }
            q.answers.append(answer)
            if q.answers.count == 1 { uv_async_send(async) }
        }
    }

    /// Everything queued so far.
    func take() -> [Answer] {
        queue.withLock { q in
            defer { q.answers = [] }
            return q.answers
        }
    }

    /// Refuses further posts; called on the loop before the async handle closes.
    func close() { queue.withLock { $0.closed = true; $0.answers = [] } }
}
