import CNGHTTP2
import Infrastructure

/// One gRPC-over-HTTP/2 server connection's protocol state, wrapping an nghttp2 server session.
///
/// It knows no sockets: bytes go in through `receive`, bytes to send come out of `takeOutput`, and complete unary
/// calls come out through `onCall`; so tests can drive it byte by byte. Confined to one thread (the loop's).
final class HTTP2Session {
    /// A request stream being received; a class, so the growing body is appended in place (a struct taken out of
    /// the dictionary would copy it on every DATA frame).
    private final class Stream {
        var headers: [(name: String, value: String)] = []
        var headerBytes = 0
        var framer: GRPCMessageFramer
        /// Set when the call was refused before its body ended; later DATA is discarded.
        var answered = false
        /// Response bytes the data provider still has to hand out.
        var outgoing: [UInt8] = []
        var sent = 0
        var trailers: [(String, String)] = []
        /// False while a server-streaming call may still add messages (the data provider defers meanwhile).
        var finished = true
        /// Headers of a server-streaming response went out.
        var streaming = false
        var startedAt: UInt64
        var path = ""
        var requestID = "-"
        /// Response message bytes (with their prefixes) handed to nghttp2, for the access log.
        var bytesOut = 0

        init(framer: GRPCMessageFramer, startedAt: UInt64) {
            self.framer = framer
            self.startedAt = startedAt
        }
    }

    /// A call ready for the responder; `stream` identifies it when answering.
    struct Call {
        var stream: Int32
        var request: GRPCRequest
        var startedAt: UInt64
    }

    private let endpoint: GRPCEndpoint
    private let maxHeaderBytes: Int
    private let remoteAddress: String
    private var session: OpaquePointer?
    private var streams: [Int32: Stream] = [:]
    /// A complete call; the owner dispatches it to the responder.
    var onCall: (Call) -> Void = { _ in }
    /// A stream finished (answered, reset or cancelled): its id, path, gRPC status sent (nil when none was), response
    /// bytes, start time, request id.
    var onStreamFinished: (_ stream: Int32, _ path: String, _ status: GRPCStatusCode?, _ bytes: Int, _ startedAt: UInt64,
                           _ requestID: String) -> Void = { _, _, _, _, _, _ in }
    /// The status each stream was answered with, for the access log when it closes.
    private var answeredStatus: [Int32: GRPCStatusCode] = [:]

    /// A server session: sends SETTINGS (stream limit, windows) at once.
    init(endpoint: GRPCEndpoint, maxHeaderBytes: Int, remoteAddress: String) {
        self.endpoint = endpoint
        self.maxHeaderBytes = maxHeaderBytes
        self.remoteAddress = remoteAddress
        var callbacks: OpaquePointer?
        nghttp2_session_callbacks_new(&callbacks)
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, HTTP2Session.beginHeaders)
        nghttp2_session_callbacks_set_on_header_callback(callbacks, HTTP2Session.header)
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, HTTP2Session.dataChunk)
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, HTTP2Session.frameReceived)
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, HTTP2Session.streamClosed)
        var options: OpaquePointer?
        nghttp2_option_new(&options)
        // A header block bigger than the HTTP/1.1 limit is refused by nghttp2 before it is buffered.
        nghttp2_option_set_max_send_header_block_length(options, 64 * 1024)
        nghttp2_session_server_new2(&session, callbacks, Unmanaged.passUnretained(self).toOpaque(), options)
        nghttp2_option_del(options)
        nghttp2_session_callbacks_del(callbacks)
        var settings = [
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), value: UInt32(clamping: endpoint.maxConcurrentStreams)),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: UInt32(clamping: min(endpoint.streamWindowBytes, Int(Int32.max)))),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE.rawValue), value: UInt32(clamping: maxHeaderBytes)),
        ]
        nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, settings.count)
        nghttp2_session_set_local_window_size(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, Int32(clamping: endpoint.connectionWindowBytes))
    }

    deinit { nghttp2_session_del(session) }

    /// Feeds received bytes; false when the connection must close (protocol error, bad preface).
    func receive(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard bytes.count > 0 else { return true }
        let used = nghttp2_session_mem_recv(session, bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), bytes.count)
        return used >= 0
    }

    /// Appends up to about `limit` bytes of frames ready to send; returns false on a fatal session error.
    func takeOutput(into out: inout [UInt8], limit: Int) -> Bool {
        while out.count < limit {
            var chunk: UnsafePointer<UInt8>?
            let count = nghttp2_session_mem_send(session, &chunk)
            if count < 0 { return false }
            if count == 0 { break }
            out.append(contentsOf: UnsafeBufferPointer(start: chunk, count: count))
        }
        return true
    }

    /// True while nghttp2 wants to read or write (false after GOAWAY once every stream closed, or after a fatal error).
    var isAlive: Bool { nghttp2_session_want_read(session) != 0 || nghttp2_session_want_write(session) != 0 }

    /// Streams open (receiving or awaiting their answer).
    var openStreams: Int { streams.count }

    /// The oldest incomplete request's start, for the read timeout.
    var oldestIncompleteStart: UInt64? {
        streams.values.filter { $0.path.isEmpty && !$0.answered }.map(\.startedAt).min()
    }

    /// Resets streams whose request has not arrived completely since `cutoff` (slow clients).
    func resetIncomplete(startedBefore cutoff: UInt64) {
        for (id, stream) in streams where stream.path.isEmpty && !stream.answered && stream.startedAt < cutoff {
            nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), id, UInt32(NGHTTP2_CANCEL.rawValue))
        }
    }

    /// Graceful drain: GOAWAY naming the last stream accepted; streams already open finish.
    func goAway() {
        nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nghttp2_session_get_last_proc_stream_id(session),
                              UInt32(NGHTTP2_NO_ERROR.rawValue), nil, 0)
    }

    /// Immediate close with GOAWAY and no further streams (idle timeout, grace expired).
    func terminate() {
        nghttp2_session_terminate_session(session, UInt32(NGHTTP2_NO_ERROR.rawValue))
    }

    /// Answers `stream`: headers, the framed message and trailers, or Trailers-Only when there is no message.
    /// A stream the client already reset is ignored.
    func respond(stream id: Int32, _ response: GRPCResponse) {
        guard let stream = streams[id], !stream.streaming else { return }
        let trailers = Self.trailers(for: response.status)
        stream.answered = true
        answeredStatus[id] = response.status.code
        let base = [(":status", "200"), ("content-type", "application/grpc")]
        if response.status.code == .ok, let message = response.message {
            stream.outgoing = GRPCMessageFramer.frame(message)
            stream.bytesOut = stream.outgoing.count
            stream.trailers = trailers
            var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: HTTP2Session.readData)
            submit(base + [("grpc-accept-encoding", "identity")]) { nv in
                nghttp2_submit_response(session, id, nv.baseAddress, nv.count, &provider)
            }
        } else {
            submit(base + trailers) { nv in nghttp2_submit_response(session, id, nv.baseAddress, nv.count, nil) }
        }
    }

    /// Server streaming: the first call sends the headers; each message follows as soon as the windows allow.
    func send(stream id: Int32, message: [UInt8]) {
        guard let stream = streams[id], !stream.answered || stream.streaming else { return }
        stream.outgoing += GRPCMessageFramer.frame(message)
        stream.bytesOut += 5 + message.count
        if stream.streaming {
            nghttp2_session_resume_data(session, id)
            return
        }
        stream.answered = true
        stream.streaming = true
        stream.finished = false
        var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: HTTP2Session.readData)
        submit([(":status", "200"), ("content-type", "application/grpc"), ("grpc-accept-encoding", "identity")]) { nv in
            nghttp2_submit_response(session, id, nv.baseAddress, nv.count, &provider)
        }
    }

    /// Ends a server-streaming response with `status` in the trailers (Trailers-Only when no message was sent).
    func finish(stream id: Int32, _ status: GRPCStatus) {
        guard let stream = streams[id] else { return }
        guard stream.streaming else {
            respond(stream: id, .error(status))
            return
        }
        answeredStatus[id] = status.code
        stream.trailers = Self.trailers(for: status)
        stream.finished = true
        nghttp2_session_resume_data(session, id)
    }

    /// `grpc-status`, and `grpc-message` when there is one.
    private static func trailers(for status: GRPCStatus) -> [(String, String)] {
        var trailers = [("grpc-status", String(status.code.rawValue))]
        if !status.message.isEmpty { trailers.append(("grpc-message", GRPCStatus.percentEncode(status.message))) }
        if status.code == .unimplemented { trailers.append(("grpc-accept-encoding", "identity")) }
        return trailers
    }

    /// Calls `body` with `headers` as nghttp2_nv values (nghttp2 copies them during the call).
    private func submit(_ headers: [(String, String)], _ body: (UnsafeMutableBufferPointer<nghttp2_nv>) -> Int32) {
        var storage = headers.map { (Array($0.0.utf8), Array($0.1.utf8)) }
        let count = storage.count
        storage.withUnsafeMutableBufferPointer { pairs in
            var nv = [nghttp2_nv](repeating: nghttp2_nv(), count: count)
            for i in 0..<count {
                pairs[i].0.withUnsafeMutableBufferPointer { name in
                    pairs[i].1.withUnsafeMutableBufferPointer { value in
                        nv[i] = nghttp2_nv(name: name.baseAddress, value: value.baseAddress, namelen: name.count, valuelen: value.count,
                                           flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue))
                    }
                }
            }
            // The pointers stay valid: `storage` is neither mutated nor reallocated while `body` runs.
            _ = nv.withUnsafeMutableBufferPointer { body($0) }
        }
    }

    // MARK: - Events from nghttp2

    private func onBeginHeaders(_ id: Int32) {
        streams[id] = Stream(framer: GRPCMessageFramer(maxMessageBytes: endpoint.maxMessageBytes), startedAt: SystemClock.nanoseconds())
    }

    private func onHeader(_ id: Int32, _ name: UnsafeBufferPointer<UInt8>, _ value: UnsafeBufferPointer<UInt8>) -> Int32 {
        guard let stream = streams[id] else { return 0 }
        stream.headerBytes += name.count + value.count + 32
        guard stream.headerBytes <= maxHeaderBytes else {
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue
        }
        stream.headers.append((String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self)))
        return 0
    }

    private func onData(_ id: Int32, _ bytes: UnsafeRawBufferPointer) {
        guard let stream = streams[id], !stream.answered else { return }
        do throws(GRPCFramingError) {
            try stream.framer.append(bytes)
        } catch {
            respond(stream: id, .error(error.status))
        }
    }

    private func onRequestComplete(_ id: Int32) {
        guard let stream = streams[id], !stream.answered else { return }
        func header(_ name: String) -> String? { stream.headers.first { $0.name == name }?.value }
        let path = header(":path") ?? ""
        stream.path = path.isEmpty ? "-" : path
        if header(":method") != "POST" {
            respond(stream: id, .error(GRPCStatus(.unimplemented, "gRPC calls use POST, got \(header(":method") ?? "none")")))
            return
        }
        guard let type = header("content-type"), type.hasPrefix("application/grpc") else {
            respond(stream: id, .error(GRPCStatus(.unknown, "content-type must be application/grpc, got '\(header("content-type") ?? "")'")))
            return
        }
        if let encoding = header("grpc-encoding"), encoding != "identity" {
            respond(stream: id, .error(GRPCStatus(.unimplemented, "grpc-encoding '\(encoding)' is not supported: send messages uncompressed")))
            return
        }
        do throws(GRPCFramingError) {
            try stream.framer.finish()
        } catch {
            respond(stream: id, .error(error.status))
            return
        }
        guard stream.framer.messages.count == 1 else {
            respond(stream: id, .error(GRPCStatus(.unimplemented, "unary calls carry exactly one request message, got \(stream.framer.messages.count)")))
            return
        }
        var timeout: Duration?
        if let value = header("grpc-timeout") {
            guard let parsed = GRPCTimeout.parse(value) else {
                respond(stream: id, .error(GRPCStatus(.invalidArgument, "malformed grpc-timeout '\(value)'")))
                return
            }
            timeout = parsed
        }
        var metadata = HTTPHeaders()
        for (name, value) in stream.headers where !name.hasPrefix(":") && !Self.transportHeaders.contains(name) {
            metadata.add(name, value)
        }
        let request = GRPCRequest(path: path, metadata: metadata, message: stream.framer.messages[0], timeout: timeout,
                                  remoteAddress: remoteAddress, requestID: RequestID.generate())
        stream.framer = GRPCMessageFramer(maxMessageBytes: 0)
        stream.requestID = request.requestID
        onCall(Call(stream: id, request: request, startedAt: stream.startedAt))
    }

    private static let transportHeaders: Set<String> = ["content-type", "te", "grpc-timeout", "grpc-encoding", "grpc-accept-encoding", "user-agent"]

    private func onStreamClosed(_ id: Int32) {
        guard let stream = streams.removeValue(forKey: id) else { return }
        let status = answeredStatus.removeValue(forKey: id)
        onStreamFinished(id, stream.path.isEmpty ? "-" : stream.path, status, stream.bytesOut, stream.startedAt, stream.requestID)
    }

    private func readData(_ id: Int32, _ buffer: UnsafeMutablePointer<UInt8>, _ length: Int, _ flags: UnsafeMutablePointer<UInt32>) -> Int {
        guard let stream = streams[id] else { return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
        let count = min(length, stream.outgoing.count - stream.sent)
        if count > 0 {
            stream.outgoing.withUnsafeBytes { source in
                UnsafeMutableRawPointer(buffer).copyMemory(from: source.baseAddress! + stream.sent, byteCount: count)
            }
        }
        stream.sent += count
        if stream.sent == stream.outgoing.count && !stream.finished {
            // A streaming call with nothing queued: wait for `send` or `finish` to resume the provider.
            stream.outgoing = []
            stream.sent = 0
            return count > 0 ? count : Int(NGHTTP2_ERR_DEFERRED.rawValue)
        }
        if stream.sent == stream.outgoing.count {
            flags.pointee |= UInt32(NGHTTP2_DATA_FLAG_EOF.rawValue) | UInt32(NGHTTP2_DATA_FLAG_NO_END_STREAM.rawValue)
            stream.outgoing = []
            stream.sent = 0
            let trailers = stream.trailers
            submit(trailers) { nv in nghttp2_submit_trailer(session, id, nv.baseAddress, nv.count) }
        }
        return count
    }

    // MARK: - C callbacks (no captures; `self` comes back from the user-data pointer)

    private static func from(_ user: UnsafeMutableRawPointer?) -> HTTP2Session {
        Unmanaged<HTTP2Session>.fromOpaque(user!).takeUnretainedValue()
    }

    private static let beginHeaders: nghttp2_on_begin_headers_callback = { _, frame, user in
        guard let frame, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue),
              frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST else { return 0 }
        from(user).onBeginHeaders(frame.pointee.hd.stream_id)
        return 0
    }

    private static let header: nghttp2_on_header_callback = { _, frame, name, nameLength, value, valueLength, _, user in
        guard let frame, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue) else { return 0 }
        return from(user).onHeader(frame.pointee.hd.stream_id, UnsafeBufferPointer(start: name, count: nameLength),
                                   UnsafeBufferPointer(start: value, count: valueLength))
    }

    private static let dataChunk: nghttp2_on_data_chunk_recv_callback = { _, _, streamID, data, length, user in
        from(user).onData(streamID, UnsafeRawBufferPointer(start: data, count: length))
        return 0
    }

    private static let frameReceived: nghttp2_on_frame_recv_callback = { _, frame, user in
        guard let frame else { return 0 }
        let type = frame.pointee.hd.type
        let endStream = frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
        if endStream && (type == UInt8(NGHTTP2_HEADERS.rawValue) || type == UInt8(NGHTTP2_DATA.rawValue)) {
            from(user).onRequestComplete(frame.pointee.hd.stream_id)
        }
        return 0
    }

    private static let streamClosed: nghttp2_on_stream_close_callback = { _, streamID, _, user in
        from(user).onStreamClosed(streamID)
        return 0
    }

    private static let readData: nghttp2_data_source_read_callback = { _, streamID, buffer, length, flags, _, user in
        from(user).readData(streamID, buffer!, length, flags!)
    }
}
