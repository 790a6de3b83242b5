#if canImport(Glibc)
import Infrastructure
import Glibc
#endif
import Foundation
import XCTest
@testable import HTTP

/// A parsed response as the test client saw it.
struct ClientResponse {
    var status: Int
    var headers: [(String, String)]
    var body: [UInt8]

    func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name.lowercased() }?.1 }
    var text: String { String(decoding: body, as: UTF8.self) }
}

/// A blocking POSIX-socket client with a receive timeout, so a missing behaviour fails instead of hanging.
final class TestClient {
    let fd: Int32
    private var buffer: [UInt8] = []

    init(port: Int, timeout: Double = 3) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var tv = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - Double(Int(timeout))) * 1e6))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        let status = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard status == 0 else {
            Glibc.close(fd)
            throw TestError("connect failed: errno \(errno)")
        }
    }

    deinit { Glibc.close(fd) }

    func send(_ text: String) { send(Array(text.utf8)) }

    func send(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = Glibc.send(fd, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
                if n <= 0 { return }
                offset += n
            }
        }
    }

    /// Reads more bytes; false on EOF, error or timeout.
    private func fill() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { return false }
        buffer.append(contentsOf: chunk[..<n])
        return true
    }

    /// Reads one response (headers, then Content-Length body unless `head`); nil on EOF/timeout.
    func readResponse(head: Bool = false) -> ClientResponse? {
        let separator: [UInt8] = [13, 10, 13, 10]
        var end: Int?
        while end == nil {
            if buffer.count >= 4 {
                for i in 0...(buffer.count - 4) where Array(buffer[i..<(i + 4)]) == separator { end = i; break }
            }
            if end == nil && !fill() { return nil }
        }
        let headerText = String(decoding: buffer[..<end!], as: UTF8.self)
        buffer.removeFirst(end! + 4)
        var lines = headerText.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst().split(separator: " ")
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else { return nil }
        let headers = lines.compactMap { line -> (String, String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        var response = ClientResponse(status: status, headers: headers, body: [])
        let length = head || status < 200 || status == 204 ? 0 : Int(response.header("Content-Length") ?? "0") ?? 0
        while buffer.count < length { if !fill() { return nil } }
        response.body = Array(buffer[..<length])
        buffer.removeFirst(length)
        return response
    }

    /// True when the server closed the connection (EOF or reset) before `timeout`; false if still open.
    func isClosedByPeer() -> Bool {
        if !buffer.isEmpty { return false }
        var byte: UInt8 = 0
        let n = recv(fd, &byte, 1, 0)
        if n == 0 { return true }
        if n < 0 { return errno == ECONNRESET }
        buffer.append(byte)
        return false
    }

    /// Bytes left unread (to assert nothing extra arrived).
    var pending: Int { buffer.count }
}

struct TestError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Starts a server on port 0 with test-friendly defaults; the caller shuts it down.
func startServer(_ configure: (inout HTTPServerConfiguration) -> Void = { _ in },
                 inline: HTTPInlineResponder? = nil,
                 responder: @escaping HTTPResponder = echoResponder) throws -> (HTTPServer, Int) {
    var configuration = HTTPServerConfiguration(host: "127.0.0.1", port: 0)
    configuration.logLevel = .off
    configure(&configuration)
    let server = HTTPServer(configuration: configuration, responder: responder, inlineResponder: inline)
    let port = try server.start()
    return (server, port)
}

/// Answers `METHOD PATH?QUERY body-length` plus the body echoed, so tests see what the server parsed.
let echoResponder: HTTPResponder = { request in
    var body = Array("\(request.method) \(request.path)?\(request.query) \(request.body.count)\n".utf8)
    body.append(contentsOf: request.body)
    if let delay = request.headers["X-Delay-Ms"], let ms = Int(delay) {
        try? await Task.sleep(nanoseconds: UInt64(ms) * 1_000_000)
    }
    return HTTPResponse(status: 200, headers: ["Content-Type": "text/plain"], body: body)
}

/// Polls `condition` until true or `timeout` seconds pass.
func eventually(timeout: Double = 3, _ condition: () -> Bool) -> Bool {
    let deadline = SystemClock.nanoseconds() + UInt64(timeout * 1e9)
    while SystemClock.nanoseconds() < deadline {
        if condition() { return true }
        usleep(5_000)
    }
    return condition()
}
