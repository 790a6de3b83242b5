import CLibUV

/// The gRPC side of one event loop: its own listening socket on the gRPC port, the HTTP/2 connections accepted
/// there, and a mailbox for answers. Created and used on the loop thread; `EventLoop` drives its drain and sweep.
final class HTTP2Acceptor {
    /// The endpoint's settings and responder.
    let endpoint: GRPCEndpoint
    private unowned let owner: EventLoop
    private let loop: UnsafeMutablePointer<uv_loop_t>
    private var listener: UnsafeMutablePointer<uv_tcp_t>?
    private let asyncHandle: UnsafeMutablePointer<uv_async_t>
    private let mailbox: HTTP2Mailbox
    private var connections: [UInt64: HTTP2Connection] = [:]
    /// Responder tasks of calls still open, by connection and stream: cancelled when the client resets the stream
    /// (that ends a server-streaming call's update sequence).
    private var tasks: [CallKey: Task<Void, Never>] = [:]

    /// Calls that turned out to be server streaming (they never end on their own, so a drain ends them).
    private var streamingCalls: Set<CallKey> = []

    private struct CallKey: Hashable {
        var connection: UInt64
        var stream: Int32
    }
    private var nextID: UInt64 = 0
    private var draining = false
    private var closed = false

    /// The loop's shared read buffer (each read is fed to nghttp2, which copies what it keeps, before the next).
    var readBuffer: UnsafeMutableRawPointer { owner.readBuffer }

    /// Starts listening on `listenFD` (bound and listening) inside `loop`.
    init(endpoint: GRPCEndpoint, owner: EventLoop, loop: UnsafeMutablePointer<uv_loop_t>, listenFD: Int32) throws {
        self.endpoint = endpoint
        self.owner = owner
        self.loop = loop
        asyncHandle = .allocate(capacity: 1)
        mailbox = HTTP2Mailbox(async: asyncHandle)
        let this = Unmanaged.passUnretained(self).toOpaque()
        uv_async_init(loop, asyncHandle, HTTP2Acceptor.asyncCallback)
        asyncHandle.pointee.data = this
        let tcp = UnsafeMutablePointer<uv_tcp_t>.allocate(capacity: 1)
        uv_tcp_init(loop, tcp)
        tcp.pointee.data = this
        listener = tcp
        var status = uv_tcp_open(tcp, uv_os_sock_t(listenFD))
        if status == 0 { status = uv_listen(streamOf(tcp), Int32(owner.context.configuration.backlog), HTTP2Acceptor.connectionCallback) }
        guard status == 0 else {
            close()
            throw HTTPServerError.loopFailed("listen (gRPC): \(uvMessage(status))")
        }
    }

    /// True when no gRPC connection is open.
    var isDrained: Bool { connections.isEmpty }

    private func onConnection(_ status: Int32) {
        guard status >= 0, let listener else { return }
        let handle = UnsafeMutablePointer<uv_tcp_t>.allocate(capacity: 1)
        uv_tcp_init(loop, handle)
        guard uv_accept(streamOf(listener), streamOf(handle)) == 0 else {
            uv_close(handleOf(handle), HTTP2Acceptor.freeTCPCallback)
            return
        }
        let context = owner.context
        // The same budget as HTTP/1.1 connections; HTTP/2 has no status line to refuse with, so over it the socket closes.
        if draining || context.openConnections.add(1, ordering: .relaxed).oldValue >= context.configuration.maxConnections {
            if !draining { context.openConnections.subtract(1, ordering: .relaxed) }
            uv_close(handleOf(handle), HTTP2Acceptor.freeTCPCallback)
            return
        }
        uv_tcp_nodelay(handle, 1)
        nextID += 1
        let connection = HTTP2Connection(id: nextID, acceptor: self, handle: handle, remote: owner.peerAddress(handle),
                                         maxHeaderBytes: context.configuration.maxHeaderBytes)
        connections[connection.id] = connection
        connection.start()
    }

    /// Hands a complete call to the responder off the loop; the answer comes back through the mailbox.
    func dispatch(_ call: HTTP2Session.Call, connection: UInt64) {
        let responder = endpoint.responder
        let mailbox = self.mailbox
        let request = call.request
        let stream = call.stream
        tasks[CallKey(connection: connection, stream: stream)] = Task {
            let response = await responder(request)
            guard let updates = response.updates, response.status.code == .ok else {
                mailbox.post(HTTP2Answer(connection: connection, stream: stream, event: .response(response)))
                return
            }
            mailbox.post(HTTP2Answer(connection: connection, stream: stream, event: .message(response.message ?? [])))
            for await message in updates {
                mailbox.post(HTTP2Answer(connection: connection, stream: stream, event: .message(message)))
            }
            mailbox.post(HTTP2Answer(connection: connection, stream: stream, event: .end(.ok)))
        }
    }

    /// One access line per finished stream, with its gRPC status; a responder still running for it is cancelled.
    func streamFinished(connection: UInt64, stream: Int32, path: String, status: GRPCStatusCode?, bytes: Int,
                        startedAt: UInt64, requestID: String, remote: String) {
        let key = CallKey(connection: connection, stream: stream)
        tasks.removeValue(forKey: key)?.cancel()
        streamingCalls.remove(key)
        // gRPC's route is its method path (a closed set of service methods); no W3C trace is carried over gRPC yet.
        owner.logAccess(method: "POST", path: path, route: path, status: status == nil ? 499 : 200, bytes: bytes, startedAt: startedAt,
                        requestID: requestID, traceID: "-", remote: remote, grpcStatus: status.map(\.rawValue) ?? GRPCStatusCode.cancelled.rawValue)
    }

    private func drainMailbox() {
        for answer in mailbox.take() {
            if case .message = answer.event { streamingCalls.insert(CallKey(connection: answer.connection, stream: answer.stream)) }
            // The client may have gone; then the answer is dropped.
            connections[answer.connection]?.complete(stream: answer.stream, answer.event)
        }
    }

    /// Called from a connection's close callback.
    func connectionClosed(_ connection: HTTP2Connection) {
        connections.removeValue(forKey: connection.id)
        // nghttp2 reports no stream closes when a session is deleted: end what still runs for this connection.
        for key in tasks.keys where key.connection == connection.id { tasks.removeValue(forKey: key)?.cancel() }
        streamingCalls = streamingCalls.filter { $0.connection != connection.id }
        owner.context.openConnections.subtract(1, ordering: .relaxed)
        if draining { owner.http2Drained() }
    }

    /// Stops accepting and sends GOAWAY on every connection; in-flight streams finish.
    func beginDrain() {
        guard !draining else { return }
        draining = true
        closeListener()
        for connection in Array(connections.values) { connection.beginDrain() }
        // Server streams (health Watch) end with OK now, so the drain waits only for unary calls.
        for key in streamingCalls { tasks[key]?.cancel() }
    }

    /// The grace period ran out: closes every connection.
    func closeAll() {
        for connection in Array(connections.values) { connection.close() }
    }

    /// Idle and read timeouts, on the loop's sweep timer.
    func sweep(now: UInt64) {
        let policy = owner.context.policy
        for connection in Array(connections.values) { connection.sweep(now: now, policy: policy) }
    }

    /// Closes the listener and the mailbox's async handle (the loop is stopping).
    func close() {
        guard !closed else { return }
        closed = true
        draining = true
        closeListener()
        mailbox.close()
        uv_close(handleOf(asyncHandle), HTTP2Acceptor.freeAsyncCallback)
    }

    private func closeListener() {
        if let listener {
            uv_close(handleOf(listener), HTTP2Acceptor.freeTCPCallback)
            self.listener = nil
        }
    }

    // MARK: - C callbacks

    private static func from(_ handle: UnsafeMutableRawPointer?) -> HTTP2Acceptor {
        Unmanaged<HTTP2Acceptor>.fromOpaque(handle!.assumingMemoryBound(to: uv_handle_t.self).pointee.data).takeUnretainedValue()
    }

    private static let connectionCallback: uv_connection_cb = { server, status in from(UnsafeMutableRawPointer(server)).onConnection(status) }
    private static let asyncCallback: uv_async_cb = { handle in from(UnsafeMutableRawPointer(handle)).drainMailbox() }
    private static let freeTCPCallback: uv_close_cb = { handle in UnsafeMutableRawPointer(handle!).assumingMemoryBound(to: uv_tcp_t.self).deallocate() }
    private static let freeAsyncCallback: uv_close_cb = { handle in UnsafeMutableRawPointer(handle!).assumingMemoryBound(to: uv_async_t.self).deallocate() }
}
