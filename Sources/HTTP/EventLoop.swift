import Glibc
import Infrastructure
import CLibUV
import Synchronization

/// State shared by every loop of one server; immutable apart from the atomic counter.
final class ServerContext: Sendable {
    let configuration: HTTPServerConfiguration
    let responder: HTTPResponder
    let inlineResponder: HTTPInlineResponder?
    let admission: HTTPAdmission?
    let connectionObserver: HTTPConnectionObserver?
    let logger: Logger
    let policy: TimeoutPolicy
    /// `Server: <name>\r\n`, built once.
    let serverLine: [UInt8]
    /// Open connections across all loops (the `--max-connections` budget and a metric).
    let openConnections = Atomic<Int>(0)
    /// Connections accepted over the budget to answer health probes (at most `overflowReserve`).
    let overflowConnections = Atomic<Int>(0)
    /// How many over-budget connections may be held at once to answer probes; beyond it they get 503 at once.
    let overflowReserve = 32

    init(configuration: HTTPServerConfiguration, responder: @escaping HTTPResponder, inlineResponder: HTTPInlineResponder?,
         admission: HTTPAdmission? = nil, connectionObserver: HTTPConnectionObserver? = nil) {
        self.configuration = configuration
        self.responder = responder
        self.inlineResponder = inlineResponder
        self.admission = admission
        self.connectionObserver = connectionObserver
        logger = configuration.logger
        policy = TimeoutPolicy(idleSeconds: configuration.idleTimeout, readSeconds: configuration.readTimeout)
        let name = configuration.serverName.utf8.filter { $0 >= 0x20 && $0 < 0x7F }
        serverLine = Array("Server: ".utf8) + name + [13, 10]
    }
}

/// One libuv loop on its own thread: a listener, its connections, a timeout sweep and a mailbox.
/// Created on the starting thread, then used only by the loop thread.
final class EventLoop {
    static let readBufferSize = 64 * 1024

    let index: Int
    let context: ServerContext
    let mailbox: Mailbox
    private let loop: UnsafeMutablePointer<uv_loop_t>
    private let asyncHandle: UnsafeMutablePointer<uv_async_t>
    private let sweepTimer: UnsafeMutablePointer<uv_timer_t>
    private let logFlusher: UnsafeMutablePointer<uv_check_t>
    // Loop-thread confined and never re-entered, so runtime exclusivity checks only cost time here.
    @exclusivity(unchecked) private var graceTimer: UnsafeMutablePointer<uv_timer_t>?
    @exclusivity(unchecked) private var listener: UnsafeMutablePointer<uv_tcp_t>?
    @exclusivity(unchecked) private var connections: [UInt64: Connection] = [:]
    @exclusivity(unchecked) private var nextConnectionID: UInt64 = 0
    @exclusivity(unchecked) private var draining = false
    @exclusivity(unchecked) private var stopping = false
    /// The gRPC (HTTP/2) listener and its connections, when a gRPC port is configured.
    @exclusivity(unchecked) private var http2: HTTP2Acceptor?
    /// Shared by every connection of this loop: each read is parsed (and copied out) before the next one.
    let readBuffer = UnsafeMutableRawPointer.allocate(byteCount: EventLoop.readBufferSize, alignment: 16)
    @exclusivity(unchecked) private(set) var dateCache = DateCache()
    /// Access lines gathered during one loop iteration, written with one write(2) after it.
    @exclusivity(unchecked) private var logBuffer = ByteWriter(capacity: 64 * 1024)
    private let logAccessLines: Bool

    /// Sets up the loop and starts listening on `fd` (already bound and listening), and on `grpc.fd` for gRPC.
    init(index: Int, context: ServerContext, listenFD: Int32, grpc: (endpoint: GRPCEndpoint, fd: Int32)? = nil) throws {
        self.index = index
        self.context = context
        logAccessLines = context.logger.enabled(.info)
        loop = .allocate(capacity: 1)
        asyncHandle = .allocate(capacity: 1)
        sweepTimer = .allocate(capacity: 1)
        logFlusher = .allocate(capacity: 1)
        mailbox = Mailbox(async: asyncHandle)
        var status = uv_loop_init(loop)
        guard status == 0 else {
            loop.deallocate(); asyncHandle.deallocate(); sweepTimer.deallocate(); logFlusher.deallocate()
            throw HTTPServerError.loopFailed(uvMessage(status))
        }
        let this = Unmanaged.passUnretained(self).toOpaque()
        uv_async_init(loop, asyncHandle, EventLoop.asyncCallback)
        asyncHandle.pointee.data = this
        uv_timer_init(loop, sweepTimer)
        sweepTimer.pointee.data = this
        let interval = context.policy.sweepIntervalMilliseconds
        uv_timer_start(sweepTimer, EventLoop.sweepCallback, interval, interval)
        uv_check_init(loop, logFlusher)
        logFlusher.pointee.data = this
        uv_check_start(logFlusher, EventLoop.checkCallback)

        let tcp = UnsafeMutablePointer<uv_tcp_t>.allocate(capacity: 1)
        uv_tcp_init(loop, tcp)
        tcp.pointee.data = this
        listener = tcp
        status = uv_tcp_open(tcp, uv_os_sock_t(listenFD))
        if status == 0 { status = uv_listen(streamOf(tcp), Int32(context.configuration.backlog), EventLoop.connectionCallback) }
        guard status == 0 else {
            abandon()
            throw HTTPServerError.loopFailed("listen: \(uvMessage(status))")
        }
        if let grpc {
            do { http2 = try HTTP2Acceptor(endpoint: grpc.endpoint, owner: self, loop: loop, listenFD: grpc.fd) } catch {
                abandon()
                throw error
            }
        }
    }

    deinit {
        readBuffer.deallocate()
        logBuffer.free()
    }

    /// Thread body: runs until every handle is closed, then frees the loop.
    func run() {
        uv_run(loop, UV_RUN_DEFAULT)
        flushLog()
        uv_loop_close(loop)
        loop.deallocate()
    }

    /// Tears down a loop that never ran (a later loop failed to start).
    func abandon() {
        beginStopping()
        run()
    }

    // MARK: - Accepting

    private func onConnection(_ status: Int32) {
        guard status >= 0, let listener else {
            context.logger.warn("accept failed", [("error", uvMessage(status))])
            return
        }
        let handle = UnsafeMutablePointer<uv_tcp_t>.allocate(capacity: 1)
        uv_tcp_init(loop, handle)
        guard uv_accept(streamOf(listener), streamOf(handle)) == 0 else {
            uv_close(handleOf(handle), EventLoop.freeTCPCallback)
            return
        }
        // Claim a place first, so loops racing for the last one cannot both take it.
        var overflow = false
        if draining || context.openConnections.add(1, ordering: .relaxed).oldValue >= context.configuration.maxConnections {
            if draining { rejectOverCapacity(handle); return }
            context.openConnections.subtract(1, ordering: .relaxed)
            // Over budget: a small reserve still reads one request so liveness and readiness probes get their answer.
            guard context.overflowConnections.add(1, ordering: .relaxed).oldValue < context.overflowReserve else {
                context.overflowConnections.subtract(1, ordering: .relaxed)
                rejectOverCapacity(handle)
                return
            }
            overflow = true
        }
        if !overflow { context.connectionObserver?(1) }
        uv_tcp_nodelay(handle, 1)
        if context.configuration.socketSendBufferBytes > 0 {
            var size = Int32(clamping: context.configuration.socketSendBufferBytes)
            _ = uv_send_buffer_size(handleOf(handle), &size)
        }
        nextConnectionID += 1
        let connection = Connection(id: nextConnectionID, loop: self, handle: handle, remote: peerAddress(handle), overflow: overflow)
        connections[connection.id] = connection
        connection.start()
    }

    /// Over the connection budget: a best-effort 503 then close, so the backlog keeps moving.
    private func rejectOverCapacity(_ handle: UnsafeMutablePointer<uv_tcp_t>) {
        refreshDate()
        var bytes = ByteWriter(capacity: 512)
        defer { bytes.free() }
        let context = ResponseSerializer.Context(date: dateCache.httpDate, serverLine: self.context.serverLine,
                                                 requestID: RequestID.generate(), keepAlive: false, http10: false, isHead: false)
        let response = ResponseSerializer.errorResponse(status: 503, message: "too many open connections (limit \(self.context.configuration.maxConnections))")
        _ = ResponseSerializer.append(response, context: context, to: &bytes, detachLargeBody: Int.max)
        var buf = uv_buf_init(UnsafeMutableRawPointer(bytes.base).assumingMemoryBound(to: CChar.self), UInt32(bytes.count))
        _ = uv_try_write(streamOf(handle), &buf, 1)
        uv_close(handleOf(handle), EventLoop.freeTCPCallback)
    }

    /// Called from a connection's close callback.
    func connectionClosed(_ connection: Connection) {
        connections.removeValue(forKey: connection.id)
        if connection.overflow {
            context.overflowConnections.subtract(1, ordering: .relaxed)
        } else {
            context.openConnections.subtract(1, ordering: .relaxed)
            context.connectionObserver?(-1)
        }
        if draining { stopIfDrained() }
    }

    // MARK: - Mailbox

    private func drainMailbox() {
        let messages = mailbox.take()
        // Responses first, then commands: a drain that begins now still sees these requests answered.
        for case let .completion(connection, sequence, response) in messages {
            // The client may have left; then the response is dropped.
            connections[connection]?.complete(sequence: sequence, response: response)
        }
        for case let .shutdown(grace) in messages { beginDrain(grace: grace) }
    }

    // MARK: - Shutdown

    /// Stops accepting, closes idle connections, lets busy ones finish, force-closes after `grace` seconds.
    private func beginDrain(grace: Double) {
        guard !draining else { return }
        draining = true
        if let listener {
            uv_close(handleOf(listener), EventLoop.freeTCPCallback)
            self.listener = nil
        }
        for connection in Array(connections.values) { connection.beginDrain() }
        http2?.beginDrain()
        let timer = UnsafeMutablePointer<uv_timer_t>.allocate(capacity: 1)
        uv_timer_init(loop, timer)
        timer.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        uv_timer_start(timer, EventLoop.graceCallback, UInt64(max(0, grace) * 1000), 0)
        graceTimer = timer
        stopIfDrained()
    }

    private func graceExpired() {
        for connection in Array(connections.values) { connection.close() }
        http2?.closeAll()
    }

    /// The last gRPC connection closed while draining.
    func http2Drained() { if draining { stopIfDrained() } }

    private func stopIfDrained() {
        guard connections.isEmpty, http2?.isDrained ?? true else { return }
        beginStopping()
    }

    /// Closes every loop handle; uv_run returns once their close callbacks ran.
    private func beginStopping() {
        guard !stopping else { return }
        stopping = true
        draining = true
        mailbox.close()
        http2?.close()
        if let listener {
            uv_close(handleOf(listener), EventLoop.freeTCPCallback)
            self.listener = nil
        }
        uv_close(handleOf(asyncHandle), EventLoop.freeAsyncCallback)
        uv_close(handleOf(sweepTimer), EventLoop.freeTimerCallback)
        uv_close(handleOf(logFlusher), EventLoop.freeCheckCallback)
        if let graceTimer {
            uv_close(handleOf(graceTimer), EventLoop.freeTimerCallback)
            self.graceTimer = nil
        }
    }

    // MARK: - Timeouts, dates and logs

    private func sweep() {
        let now = SystemClock.nanoseconds()
        for connection in Array(connections.values) { connection.timerFired(now: now) }
        http2?.sweep(now: now)
    }

    /// Re-formats the cached `Date:` value when the second changed.
    func refreshDate() { dateCache.refresh() }

    /// Appends one access line; it is written after this loop iteration.
    func logAccess(method: String, path: String, route: String?, status: Int, bytes: Int, startedAt: UInt64, requestID: String,
                   traceID: String, remote: String, grpcStatus: Int? = nil) {
        guard logAccessLines else { return }
        refreshDate()
        let elapsed = SystemClock.nanoseconds() &- startedAt
        var line = LogLine(format: context.logger.format, writer: logBuffer)
        line.begin(time: dateCache.iso8601, level: "info", message: "access")
        line.field("method", method)
        line.field("path", path)
        line.field("route", route ?? "-")
        line.number("status", status)
        if let grpcStatus { line.number("grpc_status", grpcStatus) }
        line.number("bytes", bytes)
        line.milliseconds("duration_ms", nanoseconds: elapsed)
        line.field("request_id", requestID)
        line.field("trace_id", traceID)
        line.field("remote", remote)
        line.end()
        logBuffer = line.out
    }

    private func flushLog() {
        guard !logBuffer.isEmpty else { return }
        context.logger.write(lines: logBuffer.buffer)
        logBuffer.removeAll()
    }

    func peerAddress(_ handle: UnsafeMutablePointer<uv_tcp_t>) -> String {
        var storage = sockaddr_storage()
        var length = Int32(MemoryLayout<sockaddr_storage>.size)
        let status = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { uv_tcp_getpeername(handle, $0, &length) }
        }
        guard status == 0 else { return "-" }
        return formatAddress(&storage)
    }

    // MARK: - C callbacks

    @inline(__always)
    private static func from(_ handle: UnsafeMutableRawPointer?) -> EventLoop {
        Unmanaged<EventLoop>.fromOpaque(handle!.assumingMemoryBound(to: uv_handle_t.self).pointee.data).takeUnretainedValue()
    }

    private static let connectionCallback: uv_connection_cb = { server, status in from(UnsafeMutableRawPointer(server)).onConnection(status) }
    private static let asyncCallback: uv_async_cb = { handle in from(UnsafeMutableRawPointer(handle)).drainMailbox() }
    private static let sweepCallback: uv_timer_cb = { handle in from(UnsafeMutableRawPointer(handle)).sweep() }
    private static let graceCallback: uv_timer_cb = { handle in from(UnsafeMutableRawPointer(handle)).graceExpired() }
    private static let checkCallback: uv_check_cb = { handle in from(UnsafeMutableRawPointer(handle)).flushLog() }
    private static let freeTCPCallback: uv_close_cb = { handle in UnsafeMutableRawPointer(handle!).assumingMemoryBound(to: uv_tcp_t.self).deallocate() }
    private static let freeAsyncCallback: uv_close_cb = { handle in UnsafeMutableRawPointer(handle!).assumingMemoryBound(to: uv_async_t.self).deallocate() }
    private static let freeTimerCallback: uv_close_cb = { handle in UnsafeMutableRawPointer(handle!).assumingMemoryBound(to: uv_timer_t.self).deallocate() }
    private static let freeCheckCallback: uv_close_cb = { handle in UnsafeMutableRawPointer(handle!).assumingMemoryBound(to: uv_check_t.self).deallocate() }
}

/// A handle "subclass" seen as its base `uv_stream_t`.
@inline(__always)
func streamOf<T>(_ pointer: UnsafeMutablePointer<T>) -> UnsafeMutablePointer<uv_stream_t> {
    UnsafeMutableRawPointer(pointer).assumingMemoryBound(to: uv_stream_t.self)
}

/// A handle "subclass" seen as its base `uv_handle_t`.
@inline(__always)
func handleOf<T>(_ pointer: UnsafeMutablePointer<T>) -> UnsafeMutablePointer<uv_handle_t> {
    UnsafeMutableRawPointer(pointer).assumingMemoryBound(to: uv_handle_t.self)
}

/// libuv's message for an error code.
func uvMessage(_ status: Int32) -> String { String(cString: uv_strerror(status)) }

/// `ip:port` (IPv4) or `[ip]:port` (IPv6) for a socket address.
func formatAddress(_ storage: inout sockaddr_storage) -> String {
    var name = [CChar](repeating: 0, count: 64)
    if storage.ss_family == sa_family_t(AF_INET6) {
        return withUnsafePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { address in
                _ = uv_ip6_name(address, &name, name.count)
                return "[\(cString(name))]:\(UInt16(bigEndian: address.pointee.sin6_port))"
            }
        }
    }
    return withUnsafePointer(to: &storage) { pointer in
        pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { address in
            _ = uv_ip4_name(address, &name, name.count)
            return "\(cString(name)):\(UInt16(bigEndian: address.pointee.sin_port))"
        }
    }
}

/// A NUL-terminated C character buffer as a String.
func cString(_ chars: [CChar]) -> String {
    String(decoding: chars.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
