import Glibc
import Infrastructure
import CLibUV
import Synchronization

/// A synchronous responder for cheap routes, run on the loop thread; nil defers to the async responder.
public typealias HTTPInlineResponder = @Sendable (HTTPRequest) -> HTTPResponse?

/// Decides from a request's headers (body still unread, `body` empty) whether it may send its body; a response refuses
/// it (e.g. 401 before a large upload is buffered). Runs on the loop thread for requests that have a body.
public typealias HTTPAdmission = @Sendable (HTTPRequest) -> HTTPResponse?

/// Told +1 when a connection within the budget opens and -1 when it closes (on a loop thread; keep it cheap).
public typealias HTTPConnectionObserver = @Sendable (_ change: Int) -> Void

/// Why the server could not start.
public enum HTTPServerError: Error, Equatable, CustomStringConvertible {
    /// `host` is not an IPv4 or IPv6 literal.
    case invalidAddress(String)
    /// socket/bind/listen failed (address in use, permission, ...).
    case bindFailed(address: String, reason: String)
    /// A libuv loop could not be set up.
    case loopFailed(String)
    /// `start()` was called on a server that already started.
    case alreadyStarted

    /// A sentence naming what failed.
    public var description: String {
        switch self {
        case .invalidAddress(let host): "invalid listen address '\(host)': expected an IPv4 or IPv6 literal"
        case .bindFailed(let address, let reason): "cannot listen on \(address): \(reason)"
        case .loopFailed(let reason): "cannot start the event loop: \(reason)"
        case .alreadyStarted: "the server was already started"
        }
    }
}

/// HTTP/1.1 server on libuv: `ioThreads` loops share the port; requests go to the responder off the loop.
public final class HTTPServer: Sendable {
    private enum Phase { case idle, running, shuttingDown, stopped }

    private struct State {
        var phase = Phase.idle
        var mailboxes: [Mailbox] = []
        var port: Int?
        var grpcPort: Int?
    }

    /// The settings the server runs with.
    public let configuration: HTTPServerConfiguration
    private let context: ServerContext
    private let state = Locked(State())
    private let stoppedLatch = Latch()
    private let runningLoops = Atomic<Int>(0)
    private let grpc: GRPCEndpoint?

    /// A server that will answer with `responder`; `inlineResponder` (if any) is tried first, on the loop thread;
    /// `admission` (if any) may refuse a request with a body from its headers, before the body is read;
    /// `connectionObserver` (if any) follows the open connections as they open and close.
    public init(configuration: HTTPServerConfiguration = HTTPServerConfiguration(), responder: @escaping HTTPResponder,
                inlineResponder: HTTPInlineResponder? = nil, admission: HTTPAdmission? = nil,
                connectionObserver: HTTPConnectionObserver? = nil, grpc: GRPCEndpoint? = nil) {
        self.configuration = configuration
        self.grpc = grpc
        context = ServerContext(configuration: configuration, responder: responder, inlineResponder: inlineResponder,
                                admission: admission, connectionObserver: connectionObserver)
    }

    /// Binds, starts the loop threads and returns the bound port once listening (useful with port 0).
    @discardableResult
    public func start() throws -> Int {
        try state.withLock { state in
            guard state.phase == .idle else { throw HTTPServerError.alreadyStarted }
            // libuv writes with write(2): a peer that vanished mid-response must cost an EPIPE, not the process.
            signal(SIGPIPE, SIG_IGN)
            let count = max(1, configuration.ioThreads)
            let (fds, port) = try ListenSockets.open(host: configuration.host, port: configuration.port,
                                                     count: count, backlog: configuration.backlog)
            var grpcFDs: [Int32] = [], grpcPort: Int?
            if let grpc {
                do {
                    (grpcFDs, grpcPort) = try ListenSockets.open(host: configuration.host, port: grpc.port, count: count, backlog: configuration.backlog)
                } catch {
                    for fd in fds { Glibc.close(fd) }
                    throw error
                }
            }
            var loops: [EventLoop] = []
            do {
                for (index, fd) in fds.enumerated() {
                    let second = grpc.map { (endpoint: $0, fd: grpcFDs[index]) }
                    loops.append(try EventLoop(index: index, context: context, listenFD: fd, grpc: second))
                }
            } catch {
                for loop in loops { loop.abandon() }
                for fd in fds.dropFirst(loops.count) { Glibc.close(fd) }
                for fd in grpcFDs.dropFirst(loops.count) { Glibc.close(fd) }
                throw error
            }
            runningLoops.store(loops.count, ordering: .sequentiallyConsistent)
            for loop in loops { spawnThread(for: loop) }
            state.mailboxes = loops.map(\.mailbox)
            state.port = port
            state.grpcPort = grpcPort
            state.phase = .running
            return port
        }
    }

    /// The bound port once started (the real one when configured with 0).
    public var port: Int? { state.withLock { $0.port } }

    /// The bound gRPC port once started, nil when no gRPC endpoint is configured.
    public var grpcPort: Int? { state.withLock { $0.grpcPort } }

    /// Open client connections across all loops.
    public var openConnections: Int { context.openConnections.load(ordering: .relaxed) }

    /// True from the moment shutdown began.
    public var isShuttingDown: Bool { state.withLock { $0.phase == .shuttingDown || $0.phase == .stopped } }

    /// Starts a graceful shutdown and returns at once: the listener closes, idle keep-alive connections close,
    /// in-flight requests get up to `gracePeriod` seconds to be answered, then everything left is closed.
    public func beginShutdown(gracePeriod: Double) {
        let mailboxes: [Mailbox] = state.withLock { state in
            switch state.phase {
            case .idle:
                state.phase = .stopped
                stoppedLatch.open()
                return []
            case .running:
                state.phase = .shuttingDown
                return state.mailboxes
            case .shuttingDown, .stopped:
                return []
            }
        }
        for mailbox in mailboxes { mailbox.post(.shutdown(grace: gracePeriod)) }
    }

    /// Graceful shutdown (see `beginShutdown`), blocking until every loop stopped.
    public func shutdown(gracePeriod: Double) {
        beginShutdown(gracePeriod: gracePeriod)
        waitUntilStopped()
    }

    /// Graceful shutdown (see `beginShutdown`), suspending until every loop stopped.
    public func shutdown(gracePeriod: Double) async {
        beginShutdown(gracePeriod: gracePeriod)
        await stoppedLatch.wait()
    }

    /// Blocks the calling thread until the server has stopped.
    public func waitUntilStopped() { stoppedLatch.wait() }

    /// Suspends until the server has stopped.
    public func stopped() async { await stoppedLatch.wait() }

    private func spawnThread(for loop: EventLoop) {
        // The loop is confined to the thread started here; nothing else touches it from now on.
        nonisolated(unsafe) let loop = loop
        DedicatedThread.start(name: "osprey-io-\(loop.index)") { [self] in
            loop.run()
            if runningLoops.subtract(1, ordering: .sequentiallyConsistent).newValue == 0 {
                state.withLock { $0.phase = .stopped }
                stoppedLatch.open()
            }
        }
    }
}

/// Creates the listening sockets, one per loop.
///
/// With several loops each gets its own socket bound with SO_REUSEPORT: the kernel spreads new connections
/// across them, with no hand-off hop between threads and no thundering herd on one accept queue.
enum ListenSockets {
    static func open(host: String, port: Int, count: Int, backlog: Int) throws -> (fds: [Int32], port: Int) {
        var storage = sockaddr_storage()
        var length: socklen_t
        let display = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        guard (0...65535).contains(port) else { throw HTTPServerError.bindFailed(address: display, reason: "port out of range") }
        if host.contains(":") {
            length = socklen_t(MemoryLayout<sockaddr_in6>.size)
            let status = withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { uv_ip6_addr(host, Int32(port), $0) }
            }
            guard status == 0 else { throw HTTPServerError.invalidAddress(host) }
        } else {
            length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let status = withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { uv_ip4_addr(host, Int32(port), $0) }
            }
            guard status == 0 else { throw HTTPServerError.invalidAddress(host) }
        }
        let family = Int32(storage.ss_family)
        if count > 1 && port != 0 {
            // SO_REUSEPORT would let a second server silently share the port: prove it is free first.
            let probe = try socketBound(family: family, address: &storage, length: length, reusePort: false, display: display)
            Glibc.close(probe)
        }
        var fds: [Int32] = []
        do {
            for _ in 0..<count {
                let fd = try socketBound(family: family, address: &storage, length: length, reusePort: count > 1, display: display)
                fds.append(fd)
                if fds.count == 1 { setPort(&storage, boundPort(fd)) }
                guard listen(fd, Int32(backlog)) == 0 else {
                    throw HTTPServerError.bindFailed(address: display, reason: "listen: \(String(cString: strerror(errno)))")
                }
            }
        } catch {
            for fd in fds { Glibc.close(fd) }
            throw error
        }
        return (fds, boundPort(fds[0]))
    }

    private static func socketBound(family: Int32, address: inout sockaddr_storage, length: socklen_t, reusePort: Bool, display: String) throws -> Int32 {
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HTTPServerError.bindFailed(address: display, reason: "socket: \(String(cString: strerror(errno)))") }
        var on: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
        if reusePort { setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, socklen_t(MemoryLayout<Int32>.size)) }
        let status = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        guard status == 0 else {
            let reason = String(cString: strerror(errno))
            Glibc.close(fd)
            throw HTTPServerError.bindFailed(address: display, reason: reason)
        }
        return fd
    }

    private static func boundPort(_ fd: Int32) -> Int {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        let family = storage.ss_family
        return withUnsafePointer(to: &storage) { pointer in
            if family == sa_family_t(AF_INET6) {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin6_port)) }
            }
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
        }
    }

    private static func setPort(_ storage: inout sockaddr_storage, _ port: Int) {
        let family = storage.ss_family
        withUnsafeMutablePointer(to: &storage) { pointer in
            if family == sa_family_t(AF_INET6) {
                pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_port = UInt16(port).bigEndian }
            } else {
                pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_port = UInt16(port).bigEndian }
            }
        }
    }
}
