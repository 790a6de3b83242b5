import CLibUV
import Infrastructure

/// One accepted gRPC connection: a libuv TCP handle feeding an `HTTP2Session`. Loop-thread confined.
final class HTTP2Connection {
    /// Unique within its loop.
    let id: UInt64
    private unowned let acceptor: HTTP2Acceptor
    private let handle: UnsafeMutablePointer<uv_tcp_t>
    private let session: HTTP2Session
    /// `ip:port` of the peer.
    let remote: String
    private var writing = false
    private var closing = false
    /// The session failed (bad preface, protocol error): send what nghttp2 queued (GOAWAY), then close.
    private var failed = false
    /// Last time bytes moved or a call finished, for the idle timeout.
    private(set) var lastActivity = SystemClock.nanoseconds()
    /// Most output gathered per write: nghttp2 keeps the rest until the socket took this.
    private static let writeChunkBytes = 1 << 20

    init(id: UInt64, acceptor: HTTP2Acceptor, handle: UnsafeMutablePointer<uv_tcp_t>, remote: String, maxHeaderBytes: Int) {
        self.id = id
        self.acceptor = acceptor
        self.handle = handle
        self.remote = remote
        session = HTTP2Session(endpoint: acceptor.endpoint, maxHeaderBytes: maxHeaderBytes, remoteAddress: remote)
        handle.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        let connectionID = id
        session.onCall = { [unowned acceptor] call in acceptor.dispatch(call, connection: connectionID) }
        session.onStreamFinished = { [unowned acceptor] stream, path, status, bytes, startedAt, requestID in
            acceptor.streamFinished(connection: connectionID, stream: stream, path: path, status: status, bytes: bytes,
                                    startedAt: startedAt, requestID: requestID, remote: remote)
        }
    }

    /// Starts reading and sends the server's SETTINGS.
    func start() {
        if uv_read_start(streamOf(handle), HTTP2Connection.allocCallback, HTTP2Connection.readCallback) != 0 {
            close()
            return
        }
        flush()
    }

    /// Streams still open (receiving or awaiting their answer).
    var openStreams: Int { session.openStreams }

    /// Delivers an answer computed off the loop.
    func complete(stream: Int32, _ event: HTTP2Answer.Event) {
        guard !closing else { return }
        switch event {
        case .response(let response): session.respond(stream: stream, response)
        case .message(let message): session.send(stream: stream, message: message)
        case .end(let status): session.finish(stream: stream, status)
        }
        lastActivity = SystemClock.nanoseconds()
        flush()
    }

    /// Graceful drain: GOAWAY; open streams finish, then nghttp2 stops wanting I/O and the connection closes.
    func beginDrain() {
        guard !closing else { return }
        session.goAway()
        flush()
    }

    /// Applies the idle and read timeouts.
    func sweep(now: UInt64, policy: TimeoutPolicy) {
        guard !closing else { return }
        if session.openStreams == 0 && !writing && now &- lastActivity >= policy.idle {
            session.terminate()
            failed = true
            flush()
            return
        }
        if let oldest = session.oldestIncompleteStart, now &- oldest >= policy.read {
            session.resetIncomplete(startedBefore: now &- policy.read)
            flush()
        }
    }

    private func onRead(_ count: Int) {
        guard !closing else { return }
        guard count >= 0 else { close(); return }
        lastActivity = SystemClock.nanoseconds()
        if !failed, !session.receive(UnsafeRawBufferPointer(start: acceptor.readBuffer, count: count)) {
            failed = true
            uv_read_stop(streamOf(handle))
        }
        flush()
    }

    /// Writes what nghttp2 has queued, one uv_write at a time; closes once the session is done.
    private func flush() {
        guard !closing, !writing else { return }
        var output: [UInt8] = []
        if !session.takeOutput(into: &output, limit: Self.writeChunkBytes) { failed = true }
        guard !output.isEmpty else {
            if failed || !session.isAlive { close() }
            return
        }
        let block = UnsafeMutableRawPointer.allocate(byteCount: output.count, alignment: 16)
        output.withUnsafeBytes { block.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        let request = UnsafeMutablePointer<uv_write_t>.allocate(capacity: 1)
        request.pointee.data = block
        var buf = uv_buf_init(block.assumingMemoryBound(to: CChar.self), UInt32(output.count))
        writing = true
        if uv_write(request, streamOf(handle), &buf, 1, HTTP2Connection.writeCallback) != 0 {
            block.deallocate()
            request.deallocate()
            writing = false
            close()
        }
    }

    private func onWriteComplete(_ status: Int32) {
        writing = false
        guard status >= 0 else { close(); return }
        lastActivity = SystemClock.nanoseconds()
        flush()
    }

    /// Closes the socket; the acceptor forgets the connection in the close callback.
    func close() {
        guard !closing else { return }
        closing = true
        uv_read_stop(streamOf(handle))
        uv_close(handleOf(handle), HTTP2Connection.closeCallback)
    }

    // MARK: - C callbacks

    private static func from(_ handle: UnsafeMutableRawPointer) -> HTTP2Connection {
        Unmanaged<HTTP2Connection>.fromOpaque(handle.assumingMemoryBound(to: uv_handle_t.self).pointee.data).takeUnretainedValue()
    }

    private static let allocCallback: uv_alloc_cb = { handle, _, buf in
        let connection = from(UnsafeMutableRawPointer(handle!))
        buf!.pointee = uv_buf_init(connection.acceptor.readBuffer.assumingMemoryBound(to: CChar.self), UInt32(EventLoop.readBufferSize))
    }

    private static let readCallback: uv_read_cb = { stream, nread, _ in
        from(UnsafeMutableRawPointer(stream!)).onRead(nread)
    }

    private static let writeCallback: uv_write_cb = { request, status in
        let connection = from(UnsafeMutableRawPointer(request!.pointee.handle!))
        request!.pointee.data.deallocate()
        request!.deallocate()
        connection.onWriteComplete(status)
    }

    private static let closeCallback: uv_close_cb = { handle in
        let connection = from(UnsafeMutableRawPointer(handle!))
        connection.acceptor.connectionClosed(connection)
        UnsafeMutableRawPointer(handle!).assumingMemoryBound(to: uv_tcp_t.self).deallocate()
    }
}
