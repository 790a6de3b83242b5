#if canImport(Glibc)
import Glibc
#endif
import Infrastructure
import CLibUV

/// One accepted TCP connection; every member is touched only on its loop's thread.
///
/// Requests are answered strictly in arrival order: each gets a slot; responses fill slots in any order and
/// are written as soon as every earlier slot has been written.
final class Connection: ParserEventSink {
    /// A request awaiting (or holding) its response, with what the access log needs.
    private struct Slot {
        var method: String
        var path: String
        var requestID: String
        var startedAt: UInt64
        var isHead: Bool
        var http10: Bool
        var keepAlive: Bool
        var response: HTTPResponse?
        /// The responder's task, cancelled when the client goes away first.
        var task: Task<Void, Never>? = nil
        /// A parsed request waiting for the connection's dispatch window (nil once dispatched or answered).
        var waiting: HTTPRequest? = nil
    }

    /// Id unique within the loop; responses are addressed by it.
    let id: UInt64
    private unowned(unsafe) let loop: EventLoop
    private let handle: UnsafeMutablePointer<uv_tcp_t>
    private let parser: RequestParser
    /// Peer as `ip:port`.
    let remote: String

    // Loop-thread confined and never re-entered, so runtime exclusivity checks only cost time here.
    @exclusivity(unchecked) private var slots: [Slot] = []
    /// Sequence number of `slots.first`; also how many requests were answered so far.
    @exclusivity(unchecked) private var headSequence: UInt64 = 0
    /// No further requests are taken: the last one said close, an error was answered, or the peer half-closed.
    @exclusivity(unchecked) private var finishing = false
    @exclusivity(unchecked) private var draining = false
    @exclusivity(unchecked) private var readEOF = false
    @exclusivity(unchecked) private var reading = false
    @exclusivity(unchecked) private var closing = false
    @exclusivity(unchecked) private var lingering = false
    @exclusivity(unchecked) private var lingerStart: UInt64 = 0
    @exclusivity(unchecked) private var continueOwed = false
    @exclusivity(unchecked) private var writeInFlight = false
    @exclusivity(unchecked) private var lastWriteProgress: UInt64 = 0
    @exclusivity(unchecked) private var idleSince: UInt64
    /// Output not yet handed to the socket: `queued` chunks first, then `out`.
    @exclusivity(unchecked) private var queued: [[UInt8]] = []
    @exclusivity(unchecked) private var out = ByteWriter(capacity: 1024)
    /// Bytes of the uv_write in flight (the socket would not take them at once).
    @exclusivity(unchecked) private var inFlightBytes = 0
    /// Bytes read but not parsed yet: parsing stopped at a request boundary (backpressure) and resumes from here.
    @exclusivity(unchecked) private var pendingInput: [UInt8] = []
    @exclusivity(unchecked) private var resuming = false
    /// Accepted over the connection budget: answers one request, health probes only, then closes.
    let overflow: Bool
    /// Responder tasks running for this connection (at most `maxConcurrentRequestsPerConnection`).
    @exclusivity(unchecked) private var running = 0

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
        idleSince = SystemClock.nanoseconds()
        handle.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        parser.sink = self
        parser.shouldSuspend = { [unowned(unsafe) self] in self.inputMustWait }
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

    // MARK: - Reading

    /// Begins reading.
    func start() { startReading() }

    private func startReading() {
        guard !reading, !closing, !readEOF, pendingInput.isEmpty, !inputMustWait else { return }
        reading = uv_read_start(stream, Connection.allocCallback, Connection.readCallback) == 0
    }

    /// True while no further request may be parsed: the pipelining limit is reached, or answers pile up unread.
    private var inputMustWait: Bool {
        slots.count >= loop.context.configuration.maxPipelinedRequests || outputBacklogged
    }

    /// A write waits on a full socket and more than `maxUnsentOutputBytes` are not on it yet.
    private var outputBacklogged: Bool {
        writeInFlight && inFlightBytes + out.count + queued.reduce(0, { $0 + $1.count }) > Connection.maxUnsentOutputBytes
    }

    /// Parses what an earlier suspension left (request by request, as the limits allow), then reads again.
    private func resumeInput() {
        guard !closing, !finishing, !resuming else { return }
        resuming = true
        defer { resuming = false }
        while !pendingInput.isEmpty, !inputMustWait, !finishing, !closing {
            let input = pendingInput
            pendingInput = []
            let consumed = input.withUnsafeBytes { parser.feed($0) }
            if consumed < input.count { pendingInput = Array(input[consumed...]) }
            processParserEvents()
        }
        if !finishing, pendingInput.isEmpty, slots.count < max(1, loop.context.configuration.maxPipelinedRequests / 2) { startReading() }
    }

    private func stopReading() {
        guard reading else { return }
        uv_read_stop(stream)
        reading = false
    }

    fileprivate func onRead(_ nread: Int, _ base: UnsafeMutablePointer<CChar>?) {
        if nread < 0 {
            if nread == Int(UV_EOF.rawValue) {
                readEOF = true
                stopReading()
                // A half-closed client may still read the answers to complete requests.
                if lingering || (slots.isEmpty && !writeInFlight && queued.isEmpty && out.isEmpty) { close(); return }
                finishing = true
            } else {
                close()
            }
            return
        }
        guard nread > 0, !finishing, !closing else { return }
        let consumed = parser.feed(UnsafeRawBufferPointer(start: base, count: nread))
        if consumed < nread {
            // Suspended at a request boundary: keep the rest (the read buffer is shared) and read no more for now.
            pendingInput = Array(UnsafeRawBufferPointer(start: base.map { UnsafeRawPointer($0) + consumed }, count: nread - consumed))
            stopReading()
        }
        processParserEvents()
    }

    private func processParserEvents() {
        if parser.stopped { finishing = true }
        writeReady()
        if inputMustWait || !pendingInput.isEmpty { stopReading() }
    }

    /// Called by the parser during `feed`, in wire order; nothing after a final request or error is taken.
    func parserEmitted(_ event: ParserEvent) {
        guard !finishing else { return }
        switch event {
        case .expectContinue:
            continueOwed = true
        case .request(let parsed):
            continueOwed = false
            enqueue(parsed)
        case .error(let error):
            continueOwed = false
            enqueueError(status: error.status, message: error.message)
        case .refused(let response):
            continueOwed = false
            slots.append(Slot(method: "-", path: "-", requestID: RequestID.generate(), startedAt: parser.messageStartedAt,
                              isHead: false, http10: false, keepAlive: false, response: response))
            finishing = true
        }
    }

    private func enqueue(_ parsed: ParsedRequest) {
        var request = parsed.request
        if request.requestID.isEmpty { request.requestID = RequestID.generate() }
        request.remoteAddress = remote
        let keepAlive = parsed.keepAlive && !draining && !overflow
        slots.append(Slot(method: request.method, path: request.path, requestID: request.requestID, startedAt: parsed.startedAt,
                          isHead: request.method == "HEAD", http10: request.version.major == 1 && request.version.minor == 0,
                          keepAlive: keepAlive, response: nil))
        if !keepAlive { finishing = true }
        let context = loop.context
        if let inline = context.inlineResponder, let response = inline(request) {
            slots[slots.count - 1].response = response
            return
        }
        if overflow {
            // Over the connection budget only probes are answered (so liveness does not fail under a flood).
            slots[slots.count - 1].response = ResponseSerializer.errorResponse(
                status: 503, message: "too many open connections (limit \(context.configuration.maxConnections)); only health probes are answered")
            return
        }
        slots[slots.count - 1].waiting = request
        dispatchWaiting()
    }

    /// Hands waiting requests to the responder, oldest first, while fewer than the window run: one connection's
    /// pipelined burst cannot fill the task pool ahead of every other client.
    private func dispatchWaiting() {
        let window = max(1, loop.context.configuration.maxConcurrentRequestsPerConnection)
        guard running < window else { return }
        let mailbox = loop.mailbox
        let responder = loop.context.responder
        let connection = id
        for index in slots.indices where running < window {
            guard let request = slots[index].waiting else { continue }
            slots[index].waiting = nil
            running += 1
            let sequence = headSequence + UInt64(index)
            slots[index].task = Task {
                let response = await responder(request)
                mailbox.post(Mailbox.Completion(connection: connection, sequence: sequence, response: response))
            }
        }
    }

    /// Queues an error answer after any earlier responses, and takes no more requests.
    private func enqueueError(status: Int, message: String) {
        slots.append(Slot(method: "-", path: "-", requestID: RequestID.generate(), startedAt: parser.messageStartedAt,
                          isHead: false, http10: false, keepAlive: false,
                          response: ResponseSerializer.errorResponse(status: status, message: message)))
        finishing = true
    }

    // MARK: - Responses

    /// Stores the response for `sequence` and writes whatever is now in order.
    func complete(sequence: UInt64, response: HTTPResponse) {
        guard !closing, sequence >= headSequence else { return }
        let index = Int(sequence - headSequence)
        guard index < slots.count else { return }
        slots[index].response = response
        running -= 1
        dispatchWaiting()
        if index == 0 { writeReady() }
    }

    /// Serializes every leading slot that has its response, then flushes.
    private func writeReady() {
        guard !closing else { return }
        if let first = slots.first, first.response != nil { loop.refreshDate() }
        while let first = slots.first, let response = first.response {
            slots.removeFirst()
            headSequence += 1
            let context = ResponseSerializer.Context(date: loop.dateCache.httpDate, serverLine: loop.context.serverLine,
                                                     requestID: first.requestID, keepAlive: first.keepAlive,
                                                     http10: first.http10, isHead: first.isHead)
            let result = ResponseSerializer.append(response, context: context, to: &out, detachLargeBody: Connection.detachThreshold)
            if result.bodyDetached {
                queued.append(out.array)
                queued.append(response.body)
                out.removeAll()
            }
            loop.logAccess(method: first.method, path: first.path, status: response.status,
                           bytes: first.isHead ? 0 : response.body.count, startedAt: first.startedAt,
                           requestID: first.requestID, remote: remote)
            if result.handlerClosed || !first.keepAlive {
                // Nothing after a closing response is answered.
                finishing = true
                for dropped in slots { logAborted(dropped); dropped.task?.cancel() }
                slots.removeAll()
                break
            }
        }
        if continueOwed, slots.isEmpty, parser.inMessage, !finishing {
            out.append(ResponseSerializer.continueResponse)
            continueOwed = false
        }
        flush()
    }

    /// Hands queued output to the socket: uv_try_write first, one uv_write of a copied remainder otherwise.
    private func flush() {
        guard !writeInFlight, !closing else { return }
        var index = 0
        while index < queued.count {
            let written = queued[index].withUnsafeBytes { tryWrite($0) }
            if written < 0 { close(); return }
            if written < queued[index].count {
                var rest = [UnsafeRawBufferPointer]()
                // Gather the unwritten pieces; startWrite copies them before the arrays go away.
                let tail = Array(queued[(index + 1)...])
                queued[index].withUnsafeBytes { first in
                    rest.append(UnsafeRawBufferPointer(rebasing: first[written...]))
                    startWrite(pieces: rest, then: tail, then: out.buffer)
                }
                queued.removeAll()
                out.removeAll()
                return
            }
            index += 1
        }
        queued.removeAll()
        if !out.isEmpty {
            let written = tryWrite(out.buffer)
            if written < 0 { close(); return }
            if written < out.count {
                startWrite(pieces: [UnsafeRawBufferPointer(rebasing: out.buffer[written...])], then: [], then: UnsafeRawBufferPointer(start: nil, count: 0))
                out.removeAll()
                return
            }
            out.removeAll()
        }
        writesDrained()
    }

    /// Bytes written now (0 when the socket is full), or -1 on a write error.
    private func tryWrite(_ bytes: UnsafeRawBufferPointer) -> Int {
        guard let start = bytes.baseAddress, bytes.count > 0 else { return 0 }
        var buf = uv_buf_init(UnsafeMutableRawPointer(mutating: start).assumingMemoryBound(to: CChar.self), UInt32(bytes.count))
        let result = uv_try_write(stream, &buf, 1)
        if result >= 0 { return Int(result) }
        return result == UV_EAGAIN.rawValue ? 0 : -1
    }

    /// Copies the pieces into one malloc'd block that lives until the write callback, and writes it.
    private func startWrite(pieces: [UnsafeRawBufferPointer], then arrays: [[UInt8]], then last: UnsafeRawBufferPointer) {
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
        lastWriteProgress = SystemClock.nanoseconds()
        if uv_write(request, stream, &buf, 1, Connection.writeCallback) != 0 {
            block.deallocate()
            request.deallocate()
            writeInFlight = false
            inFlightBytes = 0
            close()
            return
        }
        if outputBacklogged { stopReading() }
    }

    fileprivate func onWriteComplete(_ status: Int32) {
        writeInFlight = false
        inFlightBytes = 0
        guard status >= 0, !closing else { close(); return }
        lastWriteProgress = SystemClock.nanoseconds()
        flush()
    }

    /// Everything queued is on the socket: go idle, resume reading, or finish the connection.
    private func writesDrained() {
        guard slots.isEmpty else {
            if !reading, !finishing, slots.count < max(1, loop.context.configuration.maxPipelinedRequests / 2) { resumeInput() }
            return
        }
        if finishing {
            finishConnection()
        } else if draining && !parser.inMessage && pendingInput.isEmpty {
            close()
        } else {
            idleSince = SystemClock.nanoseconds()
            resumeInput()
        }
    }

    /// After the final response: shut the write side and discard input briefly, so the peer reads our answer
    /// instead of a reset caused by unread bytes.
    private func finishConnection() {
        guard !closing, !lingering else { return }
        if readEOF { close(); return }
        pendingInput = []
        lingering = true
        lingerStart = SystemClock.nanoseconds()
        let request = UnsafeMutablePointer<uv_shutdown_t>.allocate(capacity: 1)
        if uv_shutdown(request, stream, Connection.shutdownCallback) != 0 {
            request.deallocate()
            close()
            return
        }
        startReading()
    }

    // MARK: - Lifecycle

    /// Server shutdown: close if idle, otherwise make the request in progress the last one.
    func beginDrain() {
        guard !draining, !closing else { return }
        draining = true
        if parser.inMessage && !finishing { return }
        if !slots.isEmpty {
            slots[slots.count - 1].keepAlive = false
            finishing = true
        } else if writeInFlight {
            finishing = true
        } else if !lingering {
            close()
        }
    }

    /// What the connection waits for, for the timeout sweep.
    var phase: ConnectionPhase {
        if lingering { return .lingering(since: lingerStart) }
        if writeInFlight { return .writing(since: lastWriteProgress) }
        if !finishing && parser.inMessage { return .reading(since: parser.messageStartedAt) }
        if !slots.isEmpty { return .awaitingResponder }
        return headSequence == 0 ? .awaitingFirstRequest(since: idleSince) : .idle(since: idleSince)
    }

    /// Applies a timeout decided by the sweep.
    func apply(_ action: TimeoutAction) {
        switch action {
        case .none: return
        case .close: close()
        case .requestTimeout:
            let seconds = Double(loop.context.policy.read) / 1e9
            enqueueError(status: 408, message: "request not completed within \(seconds) s")
            writeReady()
        }
    }

    /// Closes the socket now; unanswered requests are logged as aborted (499).
    func close() {
        guard !closing else { return }
        closing = true
        reading = false
        // The client is gone: its unanswered requests stop (queued batch rows and worker jobs are dropped, not computed).
        for slot in slots {
            logAborted(slot)
            slot.task?.cancel()
        }
        slots.removeAll()
        pendingInput = []
        uv_close(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_handle_t.self), Connection.closeCallback)
    }

    private func logAborted(_ slot: Slot) {
        loop.logAccess(method: slot.method, path: slot.path, status: 499, bytes: 0, startedAt: slot.startedAt,
                       requestID: slot.requestID, remote: remote)
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
        if status < 0 { connection.close() }
    }

    private static let closeCallback: uv_close_cb = { handle in
        guard let handle else { return }
        let connection = from(UnsafeMutableRawPointer(handle))
        connection.loop.connectionClosed(connection)
        UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_tcp_t.self).deallocate()
    }
}
