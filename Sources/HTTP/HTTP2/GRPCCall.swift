/// One unary gRPC call as the server hands it to the responder: owned values, no pointers into nghttp2 buffers.
public struct GRPCRequest: Sendable {
    /// `:path`, e.g. `/inference.GRPCInferenceService/ModelInfer`.
    public var path: String
    /// Custom metadata (lower-case names; pseudo-headers and transport headers left out).
    public var metadata: HTTPHeaders
    /// The request message (the single length-prefixed message of a unary call).
    public var message: [UInt8]
    /// From `grpc-timeout`, when the client set a deadline.
    public var timeout: Duration?
    /// `ip:port` of the peer.
    public var remoteAddress: String
    /// Generated per call, for logs.
    public var requestID: String

    /// A request value.
    public init(path: String, metadata: HTTPHeaders = HTTPHeaders(), message: [UInt8], timeout: Duration? = nil,
                remoteAddress: String = "127.0.0.1:0", requestID: String = "") {
        self.path = path
        self.metadata = metadata
        self.message = message
        self.timeout = timeout
        self.remoteAddress = remoteAddress
        self.requestID = requestID
    }
}

/// The outcome of a unary call: a response message on OK, a status otherwise.
public struct GRPCResponse: Sendable {
    /// `grpc-status` and `grpc-message`.
    public var status: GRPCStatus
    /// The response message (only sent with OK).
    public var message: [UInt8]?
    /// Server streaming: further messages after `message`, sent as they come; the call ends with `status` when the
    /// sequence ends. The task iterating it is cancelled when the client goes away.
    public var updates: AsyncStream<[UInt8]>?

    /// A response value.
    public init(status: GRPCStatus = .ok, message: [UInt8]? = nil) {
        self.status = status
        self.message = message
    }

    /// OK with `message`.
    public static func ok(_ message: [UInt8]) -> GRPCResponse { GRPCResponse(status: .ok, message: message) }
    /// A server-streaming answer: `first`, then every element of `updates`, then OK.
    public static func streaming(_ first: [UInt8], updates: AsyncStream<[UInt8]>) -> GRPCResponse {
        var response = GRPCResponse(status: .ok, message: first)
        response.updates = updates
        return response
    }

    /// An error status with no message (sent Trailers-Only).
    public static func error(_ status: GRPCStatus) -> GRPCResponse { GRPCResponse(status: status, message: nil) }
}

/// The application behind the gRPC port: one async call per unary RPC.
public typealias GRPCResponder = @Sendable (GRPCRequest) async -> GRPCResponse

/// The second listening port, speaking gRPC over HTTP/2 with prior knowledge (h2c).
public struct GRPCEndpoint: Sendable {
    /// TCP port; 0 picks a free one (read it back from `HTTPServer.grpcPort`).
    public var port: Int
    /// Largest request message accepted (RESOURCE_EXHAUSTED beyond it).
    public var maxMessageBytes: Int
    /// HTTP/2 streams one connection may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS).
    public var maxConcurrentStreams: Int = 100
    /// Per-stream flow-control window advertised to clients: large enough that a multi-megabyte tensor
    /// is not throttled by round trips of WINDOW_UPDATE.
    public var streamWindowBytes: Int = 16 << 20
    /// Connection-level receive window.
    public var connectionWindowBytes: Int = 64 << 20
    /// Answers each call off the loop thread.
    public var responder: GRPCResponder

    /// An endpoint on `port` answering with `responder`.
    public init(port: Int, maxMessageBytes: Int, responder: @escaping GRPCResponder) {
        self.port = port
        self.maxMessageBytes = maxMessageBytes
        self.responder = responder
    }
}
