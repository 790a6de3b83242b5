import Infrastructure
import Foundation

/// A Prometheus metric registry: lock-guarded, so any thread records without awaiting; exports text format 0.0.4.
public final class Metrics: Sendable {
    /// The Content-Type of `exposition()`.
    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"
    /// Default latency buckets in seconds (0.5 ms to 10 s).
    public static let latencyBuckets: [Double] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

    /// Metric type as written on the `# TYPE` line.
    public enum Kind: String, Sendable {
        /// Monotonic count.
        case counter
        /// Value that goes up and down.
        case gauge
        /// Bucketed observations.
        case histogram
    }

    private struct Family {
        let name: String
        let help: String
        let kind: Kind
        let buckets: [Double]
        var children: [String: (labels: [(String, String)], metric: any MetricSample)] = [:]
    }

    private struct Registry {
        var families: [String: Family] = [:]
        var order: [String] = []
    }

    private let registry = Locked(Registry())
    private let includeProcessMetrics: Bool

    /// An empty registry; `includeProcessMetrics` adds `process_*` series read from /proc at export time.
    public init(includeProcessMetrics: Bool = true) {
        self.includeProcessMetrics = includeProcessMetrics
    }

    /// The counter `name{labels}`, created on first use.
    public func counter(_ name: String, help: String, labels: [String: String] = [:]) -> Counter {
        child(name, help: help, kind: .counter, buckets: [], labels: labels) { Counter() } as! Counter
    }

    /// The gauge `name{labels}`, created on first use.
    public func gauge(_ name: String, help: String, labels: [String: String] = [:]) -> Gauge {
        child(name, help: help, kind: .gauge, buckets: [], labels: labels) { Gauge() } as! Gauge
    }

    /// The histogram `name{labels}` with upper bounds `buckets` (`+Inf` is implicit), created on first use.
    public func histogram(_ name: String, help: String, labels: [String: String] = [:], buckets: [Double] = Metrics.latencyBuckets) -> Histogram {
        let bounds = Array(Set(buckets.filter { $0.isFinite })).sorted()
        return child(name, help: help, kind: .histogram, buckets: bounds, labels: labels) { Histogram(bounds: bounds) } as! Histogram
    }

    /// Removes one labelled series (e.g. of a model deleted from the repository).
    public func remove(_ name: String, labels: [String: String]) {
        let key = Self.key(of: Self.sortedLabels(labels))
        registry.withLock { _ = $0.families[name]?.children.removeValue(forKey: key) }
    }

    /// Records a classification request's top-1 score (0...1) for the model version.
    public func recordTopScore(model: String, version: Int, score: Double) {
        histogram("osprey_classification_top_score", help: "Top-1 score of classification responses.",
                  labels: ["model": model, "version": String(version)],
                  buckets: [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1]).observe(score)
    }

    /// Counts one HTTP request by route template and status, and observes its duration.
    public func recordHTTPRequest(route: String, method: String, status: Int, seconds: Double) {
        counter("osprey_http_requests_total", help: "HTTP requests by route, method and status.",
                labels: ["route": route, "method": method, "status": String(status)]).increment()
        histogram("osprey_http_request_duration_seconds", help: "HTTP request handling time by route, in seconds.",
                  labels: ["route": route]).observe(seconds)
    }

    /// The gauge of open HTTP connections (increment on accept, decrement on close).
    public var openConnections: Gauge {
        gauge("osprey_http_open_connections", help: "Open HTTP connections.")
    }

    /// All series in Prometheus text format 0.0.4.
    public func exposition() -> String {
        var out = ""
        out.reserveCapacity(8192)
        let families = registry.withLock { registry in registry.order.compactMap { registry.families[$0] } }
        for family in families {
            out += "# HELP \(family.name) \(Self.escapeHelp(family.help))\n# TYPE \(family.name) \(family.kind.rawValue)\n"
            for key in family.children.keys.sorted() {
                let (labels, metric) = family.children[key]!
                metric.write(name: family.name, labels: labels, into: &out)
            }
        }
        if includeProcessMetrics { ProcessMetrics.write(into: &out) }
        return out
    }

    private func child(_ name: String, help: String, kind: Kind, buckets: [Double], labels: [String: String],
                       make: () -> any MetricSample) -> any MetricSample {
        precondition(Self.isValidName(name), "invalid metric name \(name)")
        let sorted = Self.sortedLabels(labels)
        precondition(sorted.allSatisfy { Self.isValidName($0.0) && !$0.0.hasPrefix("__") && ($0.0 != "le" || kind != .histogram) },
                     "invalid label name in \(labels)")
        let key = Self.key(of: sorted)
        return registry.withLock { registry in
            if registry.families[name] == nil {
                registry.families[name] = Family(name: name, help: help, kind: kind, buckets: buckets)
                registry.order.append(name)
            }
            precondition(registry.families[name]!.kind == kind, "metric \(name) registered as \(registry.families[name]!.kind), used as \(kind)")
            if let existing = registry.families[name]!.children[key] { return existing.metric }
            let metric = make()
            registry.families[name]!.children[key] = (sorted, metric)
            return metric
        }
    }

    private static func sortedLabels(_ labels: [String: String]) -> [(String, String)] {
        labels.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    private static func key(of labels: [(String, String)]) -> String {
        labels.map { "\($0.0)\u{1}\($0.1)" }.joined(separator: "\u{0}")
    }

    private static func isValidName(_ name: String) -> Bool {
        guard let first = name.utf8.first, !name.isEmpty else { return false }
        func letter(_ c: UInt8) -> Bool { (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c == 95 || c == 58 }
        return letter(first) && name.utf8.allSatisfy { letter($0) || ($0 >= 48 && $0 <= 57) }
    }

    /// Escapes a HELP text: backslash and newline.
    static func escapeHelp(_ text: String) -> String {
        text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\n", with: "\\n")
    }

    /// Escapes a label value: backslash, double quote and newline.
    static func escapeLabelValue(_ text: String) -> String {
        text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n")
    }

    /// `{a="x",b="y"}` or nothing when there are no labels.
    static func labelText(_ labels: [(String, String)]) -> String {
        if labels.isEmpty { return "" }
        return "{" + labels.map { "\($0.0)=\"\(escapeLabelValue($0.1))\"" }.joined(separator: ",") + "}"
    }

    /// A sample value as Prometheus spells it.
    static func format(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return String(value)
    }
}

/// One labelled series that can write its sample lines.
protocol MetricSample: AnyObject, Sendable {
    func write(name: String, labels: [(String, String)], into out: inout String)
}

/// A monotonically increasing value.
public final class Counter: MetricSample {
    private let state = Locked(0.0)

    /// Adds `amount` (must be >= 0).
    public func increment(by amount: Double = 1) {
        precondition(amount >= 0, "counters only go up")
        state.withLock { $0 += amount }
    }

    /// The current value.
    public var value: Double { state.withLock { $0 } }

    func write(name: String, labels: [(String, String)], into out: inout String) {
        out += "\(name)\(Metrics.labelText(labels)) \(Metrics.format(value))\n"
    }
}

/// A value that can go up and down.
public final class Gauge: MetricSample {
    private let state = Locked(0.0)

    /// Replaces the value.
    public func set(_ value: Double) { state.withLock { $0 = value } }
    /// Adds `amount` (may be negative).
    public func increment(by amount: Double = 1) { state.withLock { $0 += amount } }
    /// Subtracts `amount`.
    public func decrement(by amount: Double = 1) { state.withLock { $0 -= amount } }
    /// The current value.
    public var value: Double { state.withLock { $0 } }

    func write(name: String, labels: [(String, String)], into out: inout String) {
        out += "\(name)\(Metrics.labelText(labels)) \(Metrics.format(value))\n"
    }
}

/// Observations counted into fixed buckets, with their sum and count.
public final class Histogram: MetricSample {
    /// A consistent copy of a histogram's state.
    public struct Snapshot: Sendable {
        /// Upper bounds, ascending (without +Inf).
        public var bounds: [Double]
        /// Observations per bucket, not cumulative; one extra slot for +Inf.
        public var counts: [UInt64]
        /// Sum of observations.
        public var sum: Double
        /// Number of observations.
        public var count: UInt64
    }

    private let bounds: [Double]
    private let state: Locked<Snapshot>

    init(bounds: [Double]) {
        self.bounds = bounds
        state = Locked(Snapshot(bounds: bounds, counts: Array(repeating: 0, count: bounds.count + 1), sum: 0, count: 0))
    }

    /// Records one observation.
    public func observe(_ value: Double) {
        var index = bounds.count
        for (i, bound) in bounds.enumerated() where value <= bound {
            index = i
            break
        }
        state.withLock {
            $0.counts[index] += 1
            $0.sum += value
            $0.count += 1
        }
    }

    /// The current state.
    public var snapshot: Snapshot { state.withLock { $0 } }

    func write(name: String, labels: [(String, String)], into out: inout String) {
        let s = snapshot
        var cumulative: UInt64 = 0
        for (i, bound) in (s.bounds + [Double.infinity]).enumerated() {
            cumulative += s.counts[i]
            out += "\(name)_bucket\(Metrics.labelText(labels + [("le", Metrics.format(bound))])) \(cumulative)\n"
        }
        out += "\(name)_sum\(Metrics.labelText(labels)) \(Metrics.format(s.sum))\n"
        out += "\(name)_count\(Metrics.labelText(labels)) \(s.count)\n"
    }
}
