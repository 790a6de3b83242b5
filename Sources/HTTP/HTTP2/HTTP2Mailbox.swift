/// The door into a loop for gRPC answers computed elsewhere.
typealias HTTP2Mailbox = LoopMailbox<HTTP2Answer>

/// What to do on stream `stream` of connection `connection`.
struct HTTP2Answer: Sendable {
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
