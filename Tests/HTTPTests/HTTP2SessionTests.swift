import CNGHTTP2
import Testing
@testable import HTTP

/// Builds client-side HTTP/2 bytes by hand (HPACK literals without indexing, so every split is meaningful).
private enum ClientFrames {
    static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + frame(type: 4, flags: 0, stream: 0, [])

    static func frame(type: UInt8, flags: UInt8, stream: UInt32, _ payload: [UInt8]) -> [UInt8] {
        let n = payload.count
        return [UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF), type, flags,
                UInt8(stream >> 24 & 0x7F), UInt8(stream >> 16 & 0xFF), UInt8(stream >> 8 & 0xFF), UInt8(stream & 0xFF)] + payload
    }

    static func headers(stream: UInt32, _ fields: [(String, String)], endStream: Bool = false) -> [UInt8] {
        var block: [UInt8] = []
        for (name, value) in fields {
            block.append(0x00)
            block.append(UInt8(name.utf8.count)); block += Array(name.utf8)
            block.append(UInt8(value.utf8.count)); block += Array(value.utf8)
        }
        return frame(type: 1, flags: 0x04 | (endStream ? 0x01 : 0), stream: stream, block)
    }

    static func data(stream: UInt32, _ bytes: [UInt8], endStream: Bool) -> [UInt8] {
        frame(type: 0, flags: endStream ? 0x01 : 0, stream: stream, bytes)
    }

    static func call(stream: UInt32 = 1, path: String = "/inference.GRPCInferenceService/ModelInfer", extra: [(String, String)] = []) -> [(String, String)] {
        [(":method", "POST"), (":scheme", "http"), (":path", path), (":authority", "localhost"),
         ("content-type", "application/grpc"), ("te", "trailers")] + extra
    }
}

/// What the server sent, per stream: header blocks (decoded with nghttp2's HPACK inflater), DATA bytes, END_STREAM.
private struct ServerOutput {
    var headerBlocks: [Int32: [[(String, String)]]] = [:]
    var data: [Int32: [UInt8]] = [:]
    var ended: Set<Int32> = []
    var frameTypes: [UInt8] = []
    var goAwayError: UInt32?

    init(_ bytes: [UInt8]) {
        var inflater: OpaquePointer?
        nghttp2_hd_inflate_new(&inflater)
        defer { nghttp2_hd_inflate_del(inflater) }
        var i = 0
        while bytes.count - i >= 9 {
            let length = Int(bytes[i]) << 16 | Int(bytes[i + 1]) << 8 | Int(bytes[i + 2])
            let type = bytes[i + 3], flags = bytes[i + 4]
            let stream = Int32(bytes[i + 5] & 0x7F) << 24 | Int32(bytes[i + 6]) << 16 | Int32(bytes[i + 7]) << 8 | Int32(bytes[i + 8])
            let payload = Array(bytes[(i + 9)..<min(bytes.count, i + 9 + length)])
            i += 9 + length
            frameTypes.append(type)
            if flags & 0x01 != 0 && (type == 0 || type == 1) { ended.insert(stream) }
            switch type {
            case 0: data[stream, default: []] += payload
            case 1: headerBlocks[stream, default: []].append(Self.inflate(inflater, payload))
            case 7: goAwayError = payload.count >= 8 ? UInt32(payload[4]) << 24 | UInt32(payload[5]) << 16 | UInt32(payload[6]) << 8 | UInt32(payload[7]) : nil
            default: break
            }
        }
    }

    private static func inflate(_ inflater: OpaquePointer?, _ block: [UInt8]) -> [(String, String)] {
        var fields: [(String, String)] = []
        block.withUnsafeBufferPointer { input in
            var offset = 0
            while true {
                var nv = nghttp2_nv()
                var flags: Int32 = 0
                let used = nghttp2_hd_inflate_hd2(inflater, &nv, &flags, input.baseAddress! + offset, input.count - offset, 1)
                guard used >= 0 else { return }
                offset += used
                if flags & Int32(NGHTTP2_HD_INFLATE_EMIT.rawValue) != 0 {
                    fields.append((String(decoding: UnsafeBufferPointer(start: nv.name, count: nv.namelen), as: UTF8.self),
                                   String(decoding: UnsafeBufferPointer(start: nv.value, count: nv.valuelen), as: UTF8.self)))
                }
                if flags & Int32(NGHTTP2_HD_INFLATE_FINAL.rawValue) != 0 {
                    nghttp2_hd_inflate_end_headers(inflater)
                    return
                }
                if used == 0 && flags & Int32(NGHTTP2_HD_INFLATE_EMIT.rawValue) == 0 { return }
            }
        }
        return fields
    }

    func header(_ stream: Int32, block: Int, _ name: String) -> String? {
        guard let blocks = headerBlocks[stream], block < blocks.count else { return nil }
        return blocks[block].first { $0.0 == name }?.1
    }
}

/// A session with its calls collected, fed from test bytes.
private final class Harness {
    let session: HTTP2Session
    var calls: [HTTP2Session.Call] = []
    var finished: [(String, GRPCStatusCode?)] = []

    init(maxMessageBytes: Int = 1 << 20) {
        session = HTTP2Session(endpoint: GRPCEndpoint(port: 0, maxMessageBytes: maxMessageBytes) { _ in .ok([]) },
                               maxHeaderBytes: 16 * 1024, remoteAddress: "127.0.0.1:5")
        session.onCall = { [unowned self] in calls.append($0) }
        session.onStreamFinished = { [unowned self] _, path, status, _, _, _ in finished.append((path, status)) }
    }

    /// Feeds `chunks` in order; false when the session rejected the bytes.
    @discardableResult
    func feed(_ chunks: [ArraySlice<UInt8>]) -> Bool {
        for chunk in chunks {
            let ok = Array(chunk).withUnsafeBytes { session.receive($0) }
            if !ok { return false }
        }
        return true
    }

    func output() -> ServerOutput {
        var bytes: [UInt8] = []
        _ = session.takeOutput(into: &bytes, limit: .max)
        return ServerOutput(bytes)
    }
}

@Suite struct HTTP2SessionTests {
    private let message = Array("a request message long enough to split".utf8)

    /// Preface, SETTINGS, HEADERS and the message split across two DATA frames.
    private var request: [UInt8] {
        let framed = GRPCMessageFramer.frame(message)
        return ClientFrames.preface
            + ClientFrames.headers(stream: 1, ClientFrames.call(extra: [("grpc-timeout", "5S"), ("x-custom", "v1")]))
            + ClientFrames.data(stream: 1, Array(framed[..<7]), endStream: false)
            + ClientFrames.data(stream: 1, Array(framed[7...]), endStream: true)
    }

    private func expectOneCall(_ harness: Harness, _ label: String) {
        #expect(harness.calls.count == 1, "\(label)")
        guard let call = harness.calls.first else { return }
        #expect(call.stream == 1)
        #expect(call.request.path == "/inference.GRPCInferenceService/ModelInfer")
        #expect(call.request.message == message, "\(label)")
        #expect(call.request.timeout == .seconds(5))
        #expect(call.request.metadata["x-custom"] == "v1")
        #expect(call.request.metadata["content-type"] == nil, "transport headers are not metadata")
        #expect(call.request.remoteAddress == "127.0.0.1:5")
    }

    @Test func wholeByteByByteAndEverySplitGiveOneCall() {
        let bytes = request
        let whole = Harness()
        #expect(whole.feed([bytes[...]]))
        expectOneCall(whole, "whole")
        let single = Harness()
        #expect(single.feed(bytes.indices.map { bytes[$0...$0] }))
        expectOneCall(single, "byte by byte")
        for split in 0...bytes.count {
            let harness = Harness()
            #expect(harness.feed([bytes[..<split], bytes[split...]]))
            expectOneCall(harness, "split at \(split)")
        }
    }

    @Test func okResponseHasHeadersFramedMessageAndTrailers() {
        let harness = Harness()
        harness.feed([request[...]])
        _ = harness.output()  // SETTINGS and the ACK
        harness.session.respond(stream: 1, .ok([9, 8, 7]))
        let out = harness.output()
        #expect(out.headerBlocks[1]?.count == 2)
        #expect(out.header(1, block: 0, ":status") == "200")
        #expect(out.header(1, block: 0, "content-type") == "application/grpc")
        #expect(out.data[1] == [0, 0, 0, 0, 3, 9, 8, 7])
        #expect(out.header(1, block: 1, "grpc-status") == "0")
        #expect(out.ended.contains(1))
    }

    @Test func errorIsTrailersOnlyWithAPercentEncodedMessage() {
        let harness = Harness()
        harness.feed([request[...]])
        _ = harness.output()
        harness.session.respond(stream: 1, .error(GRPCStatus(.notFound, "model 'x' not found: 100%\n")))
        let out = harness.output()
        #expect(out.headerBlocks[1]?.count == 1)
        #expect(out.data[1] == nil)
        #expect(out.header(1, block: 0, ":status") == "200")
        #expect(out.header(1, block: 0, "grpc-status") == "5")
        #expect(out.header(1, block: 0, "grpc-message") == "model 'x' not found: 100%25%0A")
        #expect(out.ended.contains(1))
    }

    @Test func compressedRequestIsUnimplementedWithAcceptEncoding() {
        let harness = Harness()
        harness.feed([(ClientFrames.preface + ClientFrames.headers(stream: 1, ClientFrames.call(extra: [("grpc-encoding", "gzip")]))
                       + ClientFrames.data(stream: 1, [1, 0, 0, 0, 1, 0], endStream: true))[...]])
        let out = harness.output()
        #expect(harness.calls.isEmpty)
        #expect(out.header(1, block: 0, "grpc-status") == String(GRPCStatusCode.unimplemented.rawValue))
        #expect(out.header(1, block: 0, "grpc-accept-encoding") == "identity")
    }

    @Test func oversizedMessageIsResourceExhaustedBeforeTheBodyEnds() {
        let harness = Harness(maxMessageBytes: 10)
        let framed = GRPCMessageFramer.frame([UInt8](repeating: 1, count: 100))
        harness.feed([(ClientFrames.preface + ClientFrames.headers(stream: 1, ClientFrames.call())
                       + ClientFrames.data(stream: 1, Array(framed[..<20]), endStream: false))[...]])
        let out = harness.output()
        #expect(harness.calls.isEmpty)
        #expect(out.header(1, block: 0, "grpc-status") == String(GRPCStatusCode.resourceExhausted.rawValue))
        // The rest of the body is discarded, not buffered, and produces no call.
        harness.feed([ClientFrames.data(stream: 1, Array(framed[20...]), endStream: true)[...]])
        #expect(harness.calls.isEmpty)
    }

    @Test func garbagePrefaceIsRejected() {
        let harness = Harness()
        #expect(!harness.feed([Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8)[...]]))
    }

    @Test func frameLargerThanTheMaximumEndsTheConnection() {
        let harness = Harness()
        var bytes = ClientFrames.preface + ClientFrames.headers(stream: 1, ClientFrames.call())
        bytes += [0x10, 0x00, 0x00, 0, 0, 0, 0, 0, 1] + [UInt8](repeating: 0, count: 1024)  // declares 1 MiB > 16 KiB
        harness.feed([bytes[...]])
        let out = harness.output()
        #expect(out.goAwayError == UInt32(NGHTTP2_FRAME_SIZE_ERROR.rawValue))
        #expect(!harness.session.isAlive)
        #expect(harness.calls.isEmpty)
    }

    @Test func resetMidRequestDropsTheStream() {
        let harness = Harness()
        harness.feed([(ClientFrames.preface + ClientFrames.headers(stream: 1, ClientFrames.call())
                       + ClientFrames.data(stream: 1, [0, 0, 0, 0, 9, 1, 2], endStream: false)
                       + ClientFrames.frame(type: 3, flags: 0, stream: 1, [0, 0, 0, 8]))[...]])
        #expect(harness.calls.isEmpty)
        #expect(harness.session.openStreams == 0)
        #expect(harness.finished.count == 1 && harness.finished[0].1 == nil)
        // Answering a reset stream is a no-op.
        harness.session.respond(stream: 1, .ok([1]))
        #expect(harness.output().data[1] == nil)
    }

    @Test func streamFloodIsCappedAtTheConcurrencyLimit() {
        let harness = Harness()
        var bytes = ClientFrames.preface
        for i in 0..<300 { bytes += ClientFrames.headers(stream: UInt32(2 * i + 1), ClientFrames.call()) }
        harness.feed([bytes[...]])
        _ = harness.output()
        #expect(harness.session.openStreams <= 100)
        #expect(harness.calls.isEmpty)
    }

    @Test func goAwayLetsOpenStreamsFinish() {
        let harness = Harness()
        harness.feed([request[...]])
        _ = harness.output()
        harness.session.goAway()
        #expect(harness.output().goAwayError == 0)
        #expect(harness.session.isAlive, "stream 1 still awaits its answer")
        harness.session.respond(stream: 1, .ok([]))
        _ = harness.output()
        #expect(harness.finished.count == 1 && harness.finished[0].1 == .ok)
    }

    @Test func serverStreamSendsMessagesAsTheyComeThenTrailers() {
        let harness = Harness()
        harness.feed([request[...]])
        _ = harness.output()
        harness.session.send(stream: 1, message: [1])
        let first = harness.output()
        #expect(first.header(1, block: 0, ":status") == "200")
        #expect(first.data[1] == [0, 0, 0, 0, 1, 1])
        #expect(!first.ended.contains(1), "the stream stays open for more messages")
        harness.session.send(stream: 1, message: [2, 3])
        #expect(harness.output().data[1] == [0, 0, 0, 0, 2, 2, 3])
        harness.session.finish(stream: 1, .ok)
        let last = harness.output()
        #expect(last.header(1, block: 0, "grpc-status") == "0")
        #expect(last.ended.contains(1))
        #expect(harness.finished.count == 1 && harness.finished[0].1 == .ok)
    }
}
