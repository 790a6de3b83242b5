import Glibc
import CLibUV
import Infrastructure

/// One accepted TCP connection: the libuv driver of a `ConnectionStateMachine`; touched only on its loop's thread.
///
/// The machine decides (order of answers, pipelining window, backpressure, half-close, drain, timeouts); this class
/// performs its actions (read, parse, start responder tasks, serialize, write, shut down, close) and reports back.
final class Connection: ParserEventSink {
    private typealias Machine = ConnectionStateMachine

    /// Id unique within the loop; responses are addressed by it.
    let id: UInt64
    private unowned(unsafe) let loop: EventLoop
    private let handle: UnsafeMutablePointer<uv_tcp_t>
    private let parser: RequestParser
    /// Peer as `ip:port`.
    let remote: String
    /// Accepted over the connection budget: answers one request, health probes only, then closes.
    let overflow: Bool

    // Loop-thread confined and never re-entered, so runtime exclusivity checks only cost time here.
    @exclusivity(unchecked) private var machine: ConnectionStateMachine
    /// Responder tasks by request sequence, cancelled when the machine abandons their requests.
    @exclusivity(unchecked) private var tasks: [UInt64: Task<Void, Never>] = [:]
    /// Actions not yet performed, in the order the machine decided them (events raised while performing queue here).
    @exclusivity(unchecked) private var actions: [Machine.Action] = []
    @exclusivity(unchecked) private var performing = false
    @exclusivity(unchecked) private var closing = false
    /// Output not yet handed to the socket: `queued` chunks first, then `out`.
    @exclusivity(unchecked) private var queued: [[UInt8]] = []
    @exclusivity(unchecked) private var out = ByteWriter(capacity: 1024)
    @exclusivity(unchecked) private var writeInFlight = false
    /// Bytes of the uv_write in flight (the socket would not take them at once).
    @exclusivity(unchecked) private var inFlightBytes = 0
    /// Bytes read but not parsed yet: parsing stopped at a request boundary (backpressure) and resumes from here.
    @exclusivity(unchecked) private var heldBack: [UInt8] = []

    /// Bodies above this size are written from their own array instead of being copied behind the headers.
    private static let detachThreshold = 64 * 1024
    /// Unsent output (with a write waiting on a full socket) above which no more requests are read or parsed:
    /// a client that does not read its answers stops getting new ones computed.
    static let maxUnsentOutputBytes = 64 * 1024

    init(id: UInt64, loop: EventLoop, handle: UnsafeMutablePointer<uv_tcp_t>, remote: String, overflow: Bool = false) {
        self.id = id
        self.loop = loop
        self.handle = handle
        self.remote = remote
        self.overflow = overflow
        let configuration = loop.context.configuration
        parser = RequestParser(maxHeaderBytes: overflow ? min(4096, configuration.maxHeaderBytes) : configuration.maxHeaderBytes,
                               maxBodyBytes: overflow ? 0 : configuration.maxBodyBytes)
        machine = ConnectionStateMachine(
            limits: .init(maxPipelinedRequests: configuration.maxPipelinedRequests,
                          maxConcurrentRequests: configuration.maxConcurrentRequestsPerConnection,
                          maxUnsentOutputBytes: Connection.maxUnsentOutputBytes, overflow: overflow,
                          maxConnections: configuration.maxConnections, policy: loop.context.policy),
            now: SystemClock.nanoseconds())
        handle.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        parser.sink = self
        parser.shouldSuspend = { [unowned(unsafe) self] in self.machine.inputMustWait }
        if let admission = loop.context.admission {
            parser.admit = { [remote] head in
                var head = head
                head.remoteAddress = remote
                return admission(head)
            }
        }
    }

    deinit { out.free() }

    private var stream: UnsafeMutablePointer<uv_stream_t> {
        UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_stream_t.self)
    }

    // MARK: - Events into the machine

    /// Begins reading.
    func start() { perform(machine.start(now: SystemClock.nanoseconds())) }

    /// Stores the response for `sequence` and writes whatever is now in order.
    func complete(sequence: UInt64, response: HTTPResponse) {
        tasks.removeValue(forKey: sequence)
        perform(machine.responseReady(sequence: sequence, response: response, now: SystemClock.nanoseconds()))
    }

    /// Server shutdown: close if idle, otherwise make the request in progress the last one.
    func beginDrain() { perform(machine.beginDrain(now: SystemClock.nanoseconds())) }

    /// The timeout sweep ran.
    func timerFired(now: UInt64) { perform(machine.timerFired(now: now)) }

    /// Closes the socket now; unanswered requests are logged as aborted (499) and cancelled.
    func close() { perform(machine.closeNow(.forced, now: SystemClock.nanoseconds())) }

    fileprivate func onRead(_ nread: Int, _ base: UnsafeMutablePointer<CChar>?) {
        let now = SystemClock.nanoseconds()
        if nread < 0 {
            perform(nread == Int(UV_EOF.rawValue) ? machine.peerClosed(now: now) : machine.closeNow(.peerReset, now: now))
            return
        }
        guard nread > 0, machine.acceptsInput, !closing else { return }
        let consumed = parser.feed(UnsafeRawBufferPointer(start: base, count: nread))
        if consumed < nread {
            // Suspended at a request boundary: keep the rest (the read buffer is shared).
            heldBack = Array(UnsafeRawBufferPointer(start: base.map { UnsafeRawPointer($0) + consumed }, count: nread - consumed))
        }
        perform(machine.parsed(parserStatus, heldBack: !heldBack.isEmpty, now: now))
    }

    private var parserStatus: Machine.ParserStatus {
        Machine.ParserStatus(inMessage: parser.inMessage, messageStartedAt: parser.messageStartedAt, stopped: parser.stopped)
    }

    /// Called by the parser during `feed`, in wire order.
    func parserEmitted(_ event: ParserEvent) {
        guard machine.acceptsInput else { return }
        let input: Machine.Input
        switch event {
        case .expectContinue:
            input = .expectContinue
        case .request(let parsed):
            var request = parsed.request
            if request.requestID.isEmpty { request.requestID = RequestID.generate() }
            request.remoteAddress = remote
            request.trace = TraceContext(continuingFrom: request.headers)
            input = .request(request, keepAlive: parsed.keepAlive, startedAt: parsed.startedAt,
                             inline: loop.context.inlineResponder?(request))
        case .error(let error):
            input = .rejected(ResponseSerializer.errorResponse(status: error.status, message: error.message), startedAt: parser.messageStartedAt)
        case .refused(let response):
            input = .rejected(response, startedAt: parser.messageStartedAt)
        }
        perform(machine.received(input, now: SystemClock.nanoseconds()))
    }

    // MARK: - Performing actions

    /// Performs `new` after any actions still queued, first to last; reports raised while performing queue behind.
    private func perform(_ new: [Machine.Action]) {
        guard !new.isEmpty else { return }
        if performing {
            actions.append(contentsOf: new)
            return
        }
        performing = true
        // The common case: these actions directly, then whatever they raised.
        for action in new { execute(action) }
        var index = 0
        while index < actions.count {
            let action = actions[index]
            index += 1
            execute(action)
        }
        actions.removeAll(keepingCapacity: true)
        performing = false
    }

    private func execute(_ action: Machine.Action) {
        switch action {
        case .startReading:
            if !closing { _ = uv_read_start(stream, Connection.allocCallback, Connection.readCallback) }
        case .stopReading:
            if !closing { uv_read_stop(stream) }
        case .dispatch(let sequence, let request):
            let mailbox = loop.mailbox
            let responder = loop.context.responder
            let connection = id
            tasks[sequence] = Task {
                let response = await responder(request)
                mailbox.post(.completion(connection: connection, sequence: sequence, response: response))
            }
        case .send(let record, let response):
            serialize(response, record: record)
        case .sendContinue:
            out.append(ResponseSerializer.continueResponse)
        case .flush:
            let result = flush()
            perform(machine.flushed(result, now: SystemClock.nanoseconds()))
        case .feedHeldBackInput:
            let input = heldBack
            heldBack = []
            let consumed = input.withUnsafeBytes { parser.feed($0) }
            if consumed < input.count { heldBack = Array(input[consumed...]) }
            perform(machine.parsed(parserStatus, heldBack: !heldBack.isEmpty, now: SystemClock.nanoseconds()))
        case .discardHeldBackInput:
            heldBack = []
        case .abandon(let records, let cancel):
            for record in records { logAccess(record, status: 499, bytes: 0, route: nil) }
            for sequence in cancel { tasks.removeValue(forKey: sequence)?.cancel() }
        case .shutdownWrite:
            let request = UnsafeMutablePointer<uv_shutdown_t>.allocate(capacity: 1)
            if uv_shutdown(request, stream, Connection.shutdownCallback) != 0 {
                request.deallocate()
                perform(machine.closeNow(.shutdownFailed, now: SystemClock.nanoseconds()))
            }
        case .close:
            guard !closing else { return }
            closing = true
            heldBack = []
            for task in tasks.values { task.cancel() }
            tasks.removeAll()
            uv_close(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_handle_t.self), Connection.closeCallback)
        }
    }

    /// Serializes one answer behind earlier output and logs it.
    private func serialize(_ response: HTTPResponse, record: Machine.Record) {
        loop.refreshDate()
        let requestID = record.requestID.isEmpty ? RequestID.generate() : record.requestID
        let trace = record.trace ?? TraceContext(continuing: nil)
        let context = ResponseSerializer.Context(date: loop.dateCache.httpDate, serverLine: loop.context.serverLine,
                                                 requestID: requestID, trace: trace, keepAlive: record.keepAlive,
                                                 http10: record.http10, isHead: record.isHead)
        let result = ResponseSerializer.append(response, context: context, to: &out, detachLargeBody: Connection.detachThreshold)
        if result.bodyDetached {
            queued.append(out.array)
            queued.append(response.body)
            out.removeAll()
        }
        var logged = record
        logged.requestID = requestID
        logged.trace = trace
        logAccess(logged, status: response.status, bytes: record.isHead ? 0 : response.body.count, route: response.route)
    }

    private func logAccess(_ record: Machine.Record, status: Int, bytes: Int, route: String?) {
        loop.logAccess(method: record.method, path: record.path, route: route, status: status, bytes: bytes, startedAt: record.startedAt,
                       requestID: record.requestID.isEmpty ? "-" : record.requestID, traceID: record.trace?.traceID ?? "-", remote: remote)
    }

    // MARK: - Writing

    /// Hands queued output to the socket: uv_try_write first, one uv_write of a copied remainder otherwise.
    private func flush() -> Machine.FlushResult {
        guard !closing else { return .failed }
        guard !writeInFlight else { return .pending(unsentBytes: unsentBytes, started: false) }
        var index = 0
        while index < queued.count {
            let written = queued[index].withUnsafeBytes { tryWrite($0) }
            if written < 0 { return .failed }
            if written < queued[index].count {
                var rest = [UnsafeRawBufferPointer]()
                // Gather the unwritten pieces; startWrite copies them before the arrays go away.
                let tail = Array(queued[(index + 1)...])
                let started = queued[index].withUnsafeBytes { first in
                    rest.append(UnsafeRawBufferPointer(rebasing: first[written...]))
                    return startWrite(pieces: rest, then: tail, then: out.buffer)
                }
                queued.removeAll()
                out.removeAll()
                return started ? .pending(unsentBytes: unsentBytes, started: true) : .failed
            }
            index += 1
        }
        queued.removeAll()
        if !out.isEmpty {
            let written = tryWrite(out.buffer)
            if written < 0 { return .failed }
            if written < out.count {
                let started = startWrite(pieces: [UnsafeRawBufferPointer(rebasing: out.buffer[written...])], then: [],
                                         then: UnsafeRawBufferPointer(start: nil, count: 0))
                out.removeAll()
                return started ? .pending(unsentBytes: unsentBytes, started: true) : .failed
            }
            out.removeAll()
        }
        return .drained
    }

    /// Output not on the socket yet: the write in flight plus what queued behind it.
    private var unsentBytes: Int { inFlightBytes + out.count + queued.reduce(0, { $0 + $1.count }) }

    /// Bytes written now (0 when the socket is full), or -1 on a write error.
    private func tryWrite(_ bytes: UnsafeRawBufferPointer) -> Int {
        guard let start = bytes.baseAddress, bytes.count > 0 else { return 0 }
        var buf = uv_buf_init(UnsafeMutableRawPointer(mutating: start).assumingMemoryBound(to: CChar.self), UInt32(bytes.count))
        let result = uv_try_write(stream, &buf, 1)
        if result >= 0 { return Int(result) }
        return result == UV_EAGAIN.rawValue ? 0 : -1
    }

    /// Copies the pieces into one malloc'd block that lives until the write callback, and writes it; false on failure.
    private func startWrite(pieces: [UnsafeRawBufferPointer], then arrays: [[UInt8]], then last: UnsafeRawBufferPointer) -> Bool {
        let total = pieces.reduce(0) { $0 + $1.count } + arrays.reduce(0) { $0 + $1.count } + last.count
        let block = UnsafeMutableRawPointer.allocate(byteCount: max(total, 1), alignment: 1)
        var offset = 0
        func copy(_ piece: UnsafeRawBufferPointer) {
            guard let source = piece.baseAddress, piece.count > 0 else { return }
            (block + offset).copyMemory(from: source, byteCount: piece.count)
            offset += piece.count
        }
        for piece in pieces { copy(piece) }
        for array in arrays { array.withUnsafeBytes { copy($0) } }
        copy(last)
        let request = UnsafeMutablePointer<uv_write_t>.allocate(capacity: 1)
        request.pointee.data = block
        var buf = uv_buf_init(block.assumingMemoryBound(to: CChar.self), UInt32(total))
        writeInFlight = true
        inFlightBytes = total
        if uv_write(request, stream, &buf, 1, Connection.writeCallback) != 0 {
            block.deallocate()
            request.deallocate()
            writeInFlight = false
            inFlightBytes = 0
            return false
        }
        return true
    }

    fileprivate func onWriteComplete(_ status: Int32) {
        writeInFlight = false
        inFlightBytes = 0
        perform(machine.writeCompleted(ok: status >= 0 && !closing, now: SystemClock.nanoseconds()))
    }

    // MARK: - C callbacks (capture nothing; find the connection through handle.data)

    @inline(__always)
    private static func from(_ handle: UnsafeMutableRawPointer) -> Connection {
        Unmanaged<Connection>.fromOpaque(handle.assumingMemoryBound(to: uv_handle_t.self).pointee.data).takeUnretainedValue()
    }

    private static let allocCallback: uv_alloc_cb = { handle, _, buf in
        let loop = from(UnsafeMutableRawPointer(handle!)).loop
        buf!.pointee = uv_buf_init(loop.readBuffer.assumingMemoryBound(to: CChar.self), UInt32(EventLoop.readBufferSize))
    }

    private static let readCallback: uv_read_cb = { stream, nread, buf in
        from(UnsafeMutableRawPointer(stream!)).onRead(nread, buf?.pointee.base)
    }

    private static let writeCallback: uv_write_cb = { request, status in
        guard let request else { return }
        request.pointee.data.deallocate()
        let connection = from(UnsafeMutableRawPointer(request.pointee.handle!))
        request.deallocate()
        connection.onWriteComplete(status)
    }

    private static let shutdownCallback: uv_shutdown_cb = { request, status in
        guard let request else { return }
        let connection = from(UnsafeMutableRawPointer(request.pointee.handle!))
        request.deallocate()
        if status < 0 { connection.perform(connection.machine.closeNow(.shutdownFailed, now: SystemClock.nanoseconds())) }
    }

    private static let closeCallback: uv_close_cb = { handle in
        guard let handle else { return }
        let connection = from(UnsafeMutableRawPointer(handle))
        connection.loop.connectionClosed(connection)
        UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_tcp_t.self).deallocate()
    }
}
