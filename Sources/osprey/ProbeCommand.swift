import Glibc

/// `osprey probe`: exits 0 when the server's health endpoint answers 200, for container HEALTHCHECKs and exec probes.
///
/// Needs no curl or wget in the image. A wildcard `--host` (the server's `0.0.0.0` / `::`, as set by `OSPREY_HOST`
/// in the container) is probed on the loopback address, where the server also listens.
let probeCommand = Command(name: "probe", summary: "check a running server's health (exit 0 when it answers 200)", help: """
    osprey probe: GET a health endpoint of a running server; exit 0 on 200, 1 otherwise

    Usage: osprey probe [options]

    Options:
      --host ADDR        server address (default 127.0.0.1; 0.0.0.0 and :: mean loopback)
      --port N           server port (default 8080)
      --path PATH        endpoint (default /v2/health/live; /v2/health/ready checks readiness)
      --timeout DURATION connect and answer limit (default 2s)
      --help             show this help

    --host and --port also read OSPREY_HOST and OSPREY_PORT, as `osprey serve` does.
    """) { args in
    let arguments = try Arguments(args, valueFlags: ["host", "port", "path", "timeout"], booleanFlags: [])
    guard arguments.positionals.isEmpty else { throw UsageError(description: "unexpected argument '\(arguments.positionals[0])'") }
    var host = arguments.string("host") ?? "127.0.0.1"
    if host == "0.0.0.0" { host = "127.0.0.1" } else if host == "::" || host == "[::]" { host = "::1" }
    let port = try arguments.int("port", default: 8080, minimum: 1)
    guard port <= 65535 else { throw UsageError(description: "--port expects 1...65535, got \(port)") }
    let path = arguments.string("path") ?? "/v2/health/live"
    guard path.hasPrefix("/"), !path.contains(where: { $0 == " " || $0 == "\r" || $0 == "\n" }) else {
        throw UsageError(description: "--path expects an absolute path such as /v2/health/live, got '\(path)'")
    }
    let timeout = try arguments.seconds("timeout", default: 2)
    switch HealthProbe.status(host: host, port: port, path: path, timeout: timeout) {
    case .success(200):
        return 0
    case .success(let status):
        Console.err("osprey probe: \(path) answered \(status), expected 200")
        return 1
    case .failure(let reason):
        Console.err("osprey probe: \(host):\(port)\(path): \(reason)")
        return 1
    }
}

/// One blocking HTTP/1.1 GET over a plain socket, reading only the status line.
enum HealthProbe {
    /// Why a probe got no status.
    struct Failure: Error, CustomStringConvertible {
        /// What went wrong, with the system's words where there are any.
        let description: String
    }

    /// The HTTP status `path` answered with, or why there was none within `timeout` seconds.
    static func status(host: String, port: Int, path: String, timeout: Double) -> Result<Int, Failure> {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_NUMERICSERV
        var list: UnsafeMutablePointer<addrinfo>?
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        let rc = getaddrinfo(bare, String(port), &hints, &list)
        guard rc == 0, let first = list else { return .failure(Failure(description: "cannot resolve host: " + String(cString: gai_strerror(rc)))) }
        defer { freeaddrinfo(list) }
        let fd = socket(first.pointee.ai_family, first.pointee.ai_socktype, first.pointee.ai_protocol)
        guard fd >= 0 else { return .failure(Failure(description: "socket: " + String(cString: strerror(errno)))) }
        defer { close(fd) }
        // On Linux SO_SNDTIMEO also bounds connect(), so one pair of options bounds the whole exchange.
        var limit = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - Double(Int(timeout))) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        guard connect(fd, first.pointee.ai_addr, first.pointee.ai_addrlen) == 0 else {
            return .failure(Failure(description: "connect: " + String(cString: strerror(errno))))
        }
        let hostHeader = bare.contains(":") ? "[\(bare)]:\(port)" : "\(bare):\(port)"
        let request = Array("GET \(path) HTTP/1.1\r\nHost: \(hostHeader)\r\nUser-Agent: osprey-probe\r\nConnection: close\r\n\r\n".utf8)
        let sent = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard sent == request.count else { return .failure(Failure(description: "send: " + String(cString: strerror(errno)))) }
        var reply: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 512)
        // The status line is all a probe needs; stop at its end or after a few KiB.
        while !reply.contains(UInt8(ascii: "\n")) && reply.count < 4096 {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                return .failure(Failure(description: n == 0 ? "connection closed before a status line" : "recv: " + String(cString: strerror(errno))))
            }
            reply.append(contentsOf: chunk[0..<n])
        }
        let line = String(decoding: reply.prefix { $0 != UInt8(ascii: "\r") && $0 != UInt8(ascii: "\n") }, as: UTF8.self)
        let parts = line.split(separator: " ")
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]) else {
            return .failure(Failure(description: "not an HTTP answer: '\(line.prefix(80))'"))
        }
        return .success(status)
    }
}
