import Infrastructure
/// Everything the HTTP server can be tuned with; defaults suit a local model server.
public struct HTTPServerConfiguration: Sendable {
    /// Address to bind (IPv4 or IPv6 literal).
    public var host: String = "127.0.0.1"
    /// TCP port; 0 picks a free port (read it back from `HTTPServer.start()`).
    public var port: Int = 8080
    /// Number of libuv loops (one thread each) sharing the listening port.
    public var ioThreads: Int = 1
    /// Largest request line plus header section accepted; beyond it the answer is 431.
    public var maxHeaderBytes: Int = 16 * 1024
    /// Largest request body accepted; beyond it the answer is 413.
    public var maxBodyBytes: Int = 64 * 1024 * 1024
    /// Open connections allowed at once across all loops; further ones get 503 and are closed.
    public var maxConnections: Int = 10_000
    /// Seconds a keep-alive connection may sit idle between requests.
    public var idleTimeout: Double = 60
    /// Seconds a started request has to arrive completely (cuts off slowloris clients).
    public var readTimeout: Double = 30
    /// Listen backlog passed to listen(2).
    public var backlog: Int = 1024
    /// Access and server log format.
    public var logFormat: LogFormat = .logfmt
    /// Lowest level logged; access lines are `info`.
    public var logLevel: LogLevel = .info
    /// Where log lines go (stderr by default).
    public var logFileDescriptor: Int32 = 2
    /// Value of the `Server:` response header.
    public var serverName: String = "osprey"
    /// Pipelined requests buffered per connection before reading pauses (backpressure).
    public var maxPipelinedRequests: Int = 64
    /// Requests of one connection handed to the responder at once; later pipelined ones wait their turn, so a
    /// client's burst cannot queue ahead of every other client (they are answered in order anyway).
    public var maxConcurrentRequestsPerConnection: Int = 4
    /// SO_SNDBUF of each connection (0 keeps the kernel's autotuning, which grows to tcp_wmem's maximum, 4 MiB here):
    /// what a client that never reads can make the server compute and hold is this plus the unsent-output bound.
    public var socketSendBufferBytes: Int = 128 * 1024

    /// The defaults.
    public init() {}

    /// A configuration with the commonly changed values.
    public init(host: String = "127.0.0.1", port: Int = 8080, ioThreads: Int = 1) {
        self.host = host
        self.port = port
        self.ioThreads = ioThreads
    }

    /// The logger these settings describe.
    public var logger: Logger { Logger(level: logLevel, format: logFormat, fileDescriptor: logFileDescriptor) }
}

extension HTTPServer {
    /// The server's configuration type.
    public typealias Configuration = HTTPServerConfiguration
}
