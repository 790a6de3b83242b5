import HTTP
import Infrastructure

/// A request handler: the request and its validated path parameters in, a response out.
public typealias RouteHandler = @Sendable (HTTPRequest, PathParameters) async throws -> HTTPResponse

/// Path parameters captured by a route pattern, already validated.
public struct PathParameters: Sendable, Equatable {
    /// Captured values by parameter name, in pattern order.
    public private(set) var values: [String: String]

    /// Parameters from captured pairs.
    public init(_ values: [String: String] = [:]) { self.values = values }

    /// The raw value of `{name}`.
    public subscript(name: String) -> String? { values[name] }

    /// `{model}`.
    public var model: String? { values["model"] }

    /// `{version}` as a number (validated positive), nil when the route has none.
    public var version: Int? { values["version"].flatMap { Int($0) } }
}

/// Matches method + path against registered patterns and runs the handler, mapping errors to JSON.
///
/// Unknown paths answer 404; a known path with another method answers 405 with `Allow` (HEAD is served
/// by the GET handler, OPTIONS lists the methods); invalid `{model}`/`{version}` values answer 400.
public struct Router: Sendable {
    private struct Entry: Sendable {
        var method: String
        var pattern: String
        var segments: [Segment]
        /// True for literal segments: the specificity used to pick among matching patterns.
        var literalMask: [Bool]
        var operation: OperationID?
        var handler: RouteHandler?
    }

    private enum Segment: Sendable, Equatable {
        case literal(String)
        case parameter(String)
    }

    private var entries: [Entry] = []
    private let log: @Sendable (String) -> Void

    /// An empty router; `log` receives one line per unmapped (500) error.
    public init(log: @escaping @Sendable (String) -> Void = { Logger().error($0) }) {
        self.log = log
    }

    /// Adds a route; `handler` nil keeps the route known (405/404 logic) but answers 501.
    public mutating func register(method: String, path pattern: String, operation: OperationID? = nil, handler: RouteHandler?) {
        // The root pattern is one empty segment, as the path "/" splits.
        let parts = pattern == "/" ? [Substring("")] : pattern.split(separator: "/", omittingEmptySubsequences: true)
        let segments: [Segment] = parts.map { part in
            if part.hasPrefix("{") && part.hasSuffix("}") { return .parameter(String(part.dropFirst().dropLast())) }
            return .literal(String(part))
        }
        let method = method.uppercased()
        if let i = entries.firstIndex(where: { $0.method == method && $0.pattern == pattern }) {
            entries[i].handler = handler
            entries[i].operation = operation ?? entries[i].operation
        } else {
            let mask = segments.map { segment -> Bool in if case .literal = segment { return true } else { return false } }
            entries.append(Entry(method: method, pattern: pattern, segments: segments, literalMask: mask, operation: operation, handler: handler))
        }
    }

    /// Adds a route with a handler.
    public mutating func register(method: String, path pattern: String, handler: @escaping RouteHandler) {
        register(method: method, path: pattern, operation: nil, handler: Optional(handler))
    }

    /// Binds a handler to one of Osprey's operations (route taken from `Routes.all`).
    public mutating func attach(_ operation: OperationID, handler: @escaping RouteHandler) {
        let spec = Routes.spec(for: operation)
        register(method: spec.method, path: spec.pattern, operation: operation, handler: Optional(handler))
    }

    /// Registered (method, pattern) pairs in order.
    public var routes: [(method: String, pattern: String)] { entries.map { (method: $0.method, pattern: $0.pattern) } }

    /// Operations registered without a handler (they answer 501 until attached).
    public var unhandledOperations: [OperationID] { entries.filter { $0.handler == nil }.compactMap(\.operation) }

    /// This router as the server's responder.
    public var responder: HTTPResponder {
        let router = self
        return { request in await router.respond(request) }
    }

    /// Routes one request; never throws: every failure becomes a JSON error response.
    ///
    /// The route is resolved here, once; the answer carries its pattern (`HTTPResponse.route`) for metrics and logs
    /// (nil when no pattern matched the path).
    public func respond(_ request: HTTPRequest) async -> HTTPResponse {
        switch resolve(request) {
        case .answered(var response, let pattern):
            response.route = pattern
            return response
        case .matched(let entry, let parameters):
            var response = await run(entry, request, parameters)
            response.route = entry.pattern
            return response
        }
    }

    /// What matching a request against the routes decided.
    private enum Resolution {
        /// Answered without a handler (404, 405, OPTIONS, invalid parameter), with the pattern that matched if any.
        case answered(HTTPResponse, pattern: String?)
        /// This entry serves it, with its validated parameters.
        case matched(Entry, PathParameters)
    }

    private func resolve(_ request: HTTPRequest) -> Resolution {
        let pathSegments = request.path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        guard request.path.hasPrefix("/") else {
            return .answered(.jsonError(404, "no route for \(request.method) \(request.path)"), pattern: nil)
        }
        // Candidates: patterns that match the path; literal segments beat parameters, leftmost first.
        var best: [(entry: Entry, score: [Bool])] = []
        for entry in entries where entry.segments.count == pathSegments.count {
            var matched = true
            for (segment, actual) in zip(entry.segments, pathSegments) {
                switch segment {
                case .literal(let text): matched = text == actual
                case .parameter: matched = !actual.isEmpty
                }
                if !matched { break }
            }
            guard matched else { continue }
            let score = entry.literalMask
            if let current = best.first?.score {
                if lexicallyLess(score, current) { continue }
                if lexicallyLess(current, score) { best.removeAll() }
            }
            best.append((entry, score))
        }
        guard let pattern = best.first?.entry.pattern else {
            return .answered(.jsonError(404, "no route for \(request.method) \(request.path)"), pattern: nil)
        }
        // Methods are case-sensitive tokens (RFC 9110 9.1): `get` is not GET.
        let method = request.method
        let lookup = method == "HEAD" ? ["HEAD", "GET"] : [method]
        guard let chosen = lookup.lazy.compactMap({ m in best.first { $0.entry.method == m } }).first else {
            var allowed: [String] = []
            for m in best.map(\.entry.method) where !allowed.contains(m) { allowed.append(m) }
            if allowed.contains("GET") && !allowed.contains("HEAD") { allowed.append("HEAD") }
            allowed.append("OPTIONS")
            let allow = allowed.joined(separator: ", ")
            if method == "OPTIONS" { return .answered(HTTPResponse(status: 204, headers: ["Allow": allow]), pattern: pattern) }
            return .answered(.jsonError(405, "method \(request.method) is not allowed on \(request.path); allowed: \(allow)",
                                        headers: ["Allow": allow]), pattern: pattern)
        }
        var captures: [String: String] = [:]
        for (segment, actual) in zip(chosen.entry.segments, pathSegments) {
            guard case .parameter(let name) = segment else { continue }
            let value = String(actual)
            if let problem = PathParameterRules.problem(name: name, value: value) { return .answered(.jsonError(400, problem), pattern: pattern) }
            captures[name] = value
        }
        return .matched(chosen.entry, PathParameters(captures))
    }

    private func run(_ entry: Entry, _ request: HTTPRequest, _ parameters: PathParameters) async -> HTTPResponse {
        guard let handler = entry.handler else {
            return .jsonError(501, "\(entry.operation?.rawValue ?? entry.pattern) is not implemented")
        }
        // A request whose client already left (its task was cancelled while queued) is not worth starting.
        if Task.isCancelled { return .jsonError(499, "request cancelled: the client closed the connection") }
        do {
            return try await handler(request, parameters)
        } catch let error as HTTPErrorConvertible {
            return error.response
        } catch is CancellationError {
            // The client went away and its work was dropped; nobody reads this answer (499, as nginx logs it).
            return .jsonError(499, "request cancelled: the client closed the connection")
        } catch {
            let id = request.requestID.isEmpty ? "-" : request.requestID
            let trace = request.trace.map { " trace \($0.traceID)" } ?? ""
            log("request \(id)\(trace): \(request.method) \(request.path) failed with unmapped error: \(String(reflecting: error))")
            return .jsonError(500, "internal server error (request id \(id))")
        }
    }
}

/// True when `a` sorts before `b` (false < true, left to right): literal segments win over parameters.
private func lexicallyLess(_ a: [Bool], _ b: [Bool]) -> Bool {
    for (x, y) in zip(a, b) where x != y { return !x }
    return false
}

/// Validation of well-known path parameters.
public enum PathParameterRules {
    /// Longest accepted model name.
    public static let maxModelNameLength = 64

    /// Nil when `value` is acceptable for `{name}`, else the 400 message.
    public static func problem(name: String, value: String) -> String? {
        switch name {
        case "model":
            return isValidModelName(value) ? nil
                : "invalid model name '\(value.prefix(80))': expected 1-\(maxModelNameLength) characters from A-Z a-z 0-9 _ . - (not '.' or '..')"
        case "version":
            return isValidVersion(value) ? nil : "invalid version '\(value.prefix(40))': expected a positive integer"
        default:
            return nil
        }
    }

    /// `[A-Za-z0-9_.-]{1,64}`, excluding `.` and `..` (they would name directories on disk).
    public static func isValidModelName(_ name: String) -> Bool {
        let u = name.utf8
        guard (1...maxModelNameLength).contains(u.count), name != ".", name != ".." else { return false }
        return u.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A)
                || c == UInt8(ascii: "_") || c == UInt8(ascii: ".") || c == UInt8(ascii: "-")
        }
    }

    /// A positive decimal integer without sign or leading zeros, at most 18 digits.
    public static func isValidVersion(_ text: String) -> Bool {
        let u = Array(text.utf8)
        guard (1...18).contains(u.count), u[0] != UInt8(ascii: "0") else { return false }
        return u.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
    }
}
