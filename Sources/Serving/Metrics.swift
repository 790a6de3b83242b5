import Infrastructure
import Foundation

import Synchronization

/// A Prometheus metric registry: any thread records synchronously (atomics for counters and gauges, a lock per
/// histogram) without awaiting; each series renders its label set once, when created; export writes text format 0.0.4.
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
        /// `# HELP` and `# TYPE` lines, rendered once.
        let header: String
        let kind: Kind
        /// Series by label key, plus the keys in export order (kept sorted on insert, not per scrape).
        var children: [String: any MetricSample] = [:]
        var order: [String] = []
    }

    private struct Registry {
        var families: [String: Family] = [:]
        var order: [String] = []
        /// Values read at export time (e.g. readiness), by family name.
        var computed: [String: @Sendable () -> Double] = [:]
    }

    /// Label values of one HTTP series.
    private struct HTTPSeriesKey: Hashable {
        var route: String
        var method: String
        var status: Int
    }

    private let registry = Locked(Registry())
    /// The HTTP request series by their label values, so recording a request does not rebuild a label key.
    private let httpSeries = Locked([HTTPSeriesKey: (Counter, Histogram)]())
    private let includeProcessMetrics: Bool

    /// An empty registry; `includeProcessMetrics` adds `process_*` series read from /proc at export time.
    public init(includeProcessMetrics: Bool = true) {
        self.includeProcessMetrics = includeProcessMetrics
    }

    /// The counter `name{labels}`, created on first use.
    public func counter(_ name: String, help: String, labels: [String: String] = [:]) -> Counter {
        child(name, help: help, kind: .counter, labels: labels) { Counter(name: name, labels: $0) } as! Counter
    }

    /// The gauge `name{labels}`, created on first use.
    public func gauge(_ name: String, help: String, labels: [String: String] = [:]) -> Gauge {
        child(name, help: help, kind: .gauge, labels: labels) { Gauge(name: name, labels: $0) } as! Gauge
    }

    /// The histogram `name{labels}` with upper bounds `buckets` (`+Inf` is implicit), created on first use.
    public func histogram(_ name: String, help: String, labels: [String: String] = [:], buckets: [Double] = Metrics.latencyBuckets) -> Histogram {
        let bounds = Array(Set(buckets.filter { $0.isFinite })).sorted()
        return child(name, help: help, kind: .histogram, labels: labels) { Histogram(name: name, labels: $0, bounds: bounds) } as! Histogram
    }

    /// A gauge without labels whose value `read` returns at export time (for state owned elsewhere, like readiness).
    public func computedGauge(_ name: String, help: String, read: @escaping @Sendable () -> Double) {
        precondition(Self.isValidName(name), "invalid metric name \(name)")
        registry.withLock { registry in
            if registry.families[name] == nil {
                registry.families[name] = Family(name: name, header: Self.header(name, help, .gauge), kind: .gauge)
                registry.order.append(name)
            }
            registry.computed[name] = read
        }
    }

    /// Removes one labelled series (e.g. of a model deleted from the repository).
    public func remove(_ name: String, labels: [String: String]) {
        let key = Self.key(of: Self.sortedLabels(labels))
        registry.withLock { registry in
            guard registry.families[name]?.children.removeValue(forKey: key) != nil else { return }
            registry.families[name]?.order.removeAll { $0 == key }
        }
    }

    /// Records a classification request's top-1 score (0...1) for the model version.
    public func recordTopScore(model: String, version: Int, score: Double) {
        histogram("osprey_classification_top_score", help: "Top-1 score of classification responses.",
                  labels: ["model": model, "version": String(version)],
                  buckets: [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1]).observe(score)
    }

    /// Counts one HTTP request by route template, method and status, and observes its duration.
    public func recordHTTPRequest(route: String, method: String, status: Int, seconds: Double) {
        let key = HTTPSeriesKey(route: route, method: method, status: status)
        let series = httpSeries.withLock { $0[key] } ?? httpSeries.withLock { cache in
            if let existing = cache[key] { return existing }
            let labels = ["route": route, "method": method, "status": String(status)]
            let made = (counter("osprey_http_requests_total", help: "HTTP requests by route, method and status.", labels: labels),
                        histogram("osprey_http_request_duration_seconds",
                                  help: "HTTP request handling time by route, method and status, in seconds.", labels: labels))
            cache[key] = made
            return made
        }
        series.0.increment()
        series.1.observe(seconds)
    }

    /// The gauge of open HTTP connections (increment on accept, decrement on close).
    public var openConnections: Gauge {
        gauge("osprey_http_open_connections", help: "Open HTTP connections.")
    }

    /// All series in Prometheus text format 0.0.4.
    public func exposition() -> String {
        var out = ""
        out.reserveCapacity(8192)
        let (families, computed) = registry.withLock { registry in
            (registry.order.compactMap { name -> (String, String, [any MetricSample])? in
                guard let family = registry.families[name] else { return nil }
                return (name, family.header, family.order.compactMap { family.children[$0] })
            }, registry.computed)
        }
        for (name, header, children) in families {
            out += header
            if let read = computed[name] { out += "\(name) \(Self.format(read()))\n" }
            for child in children { child.write(into: &out) }
        }
        if includeProcessMetrics { ProcessMetrics.write(into: &out) }
        return out
    }

    private func child(_ name: String, help: String, kind: Kind, labels: [String: String],
                       make: ([(String, String)]) -> any MetricSample) -> any MetricSample {
        let sorted = Self.sortedLabels(labels)
        let key = Self.key(of: sorted)
        if let existing = registry.withLock({ $0.families[name]?.children[key] }) { return existing }
        precondition(Self.isValidName(name), "invalid metric name \(name)")
        precondition(sorted.allSatisfy { Self.isValidName($0.0) && !$0.0.hasPrefix("__") && ($0.0 != "le" || kind != .histogram) },
                     "invalid label name in \(labels)")
        return registry.withLock { registry in
            if registry.families[name] == nil {
                registry.families[name] = Family(name: name, header: Self.header(name, help, kind), kind: kind)
                registry.order.append(name)
            }
            precondition(registry.families[name]!.kind == kind, "metric \(name) registered as \(registry.families[name]!.kind), used as \(kind)")
            if let existing = registry.families[name]!.children[key] { return existing }
            let metric = make(sorted)
            registry.families[name]!.children[key] = metric
            let order = registry.families[name]!.order
            let position = order.firstIndex { $0 > key } ?? order.count
            registry.families[name]!.order.insert(key, at: position)
            return metric
        }
    }

    private static func header(_ name: String, _ help: String, _ kind: Kind) -> String {
        "# HELP \(name) \(escapeHelp(help))\n# TYPE \(name) \(kind.rawValue)\n"
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

    // MARK: - Confidence cascade

    /// Counts `count` rows of a cascading model by outcome (`kept`, `escalated`, `unavailable`): the fallback rate.
    public func recordCascadeRows(model: String, outcome: String, count: Int) {
        counter("osprey_cascade_requests_total", help: "Rows of cascading models by outcome (kept, escalated to the target, target unavailable).",
                labels: ["model": model, "outcome": outcome]).increment(by: Double(count))
    }
}

/// One labelled series that can write its sample lines.
protocol MetricSample: AnyObject, Sendable {
    /// Appends the series' sample lines (its name and labels were rendered when it was created).
    func write(into out: inout String)
}

/// A Double updated with compare-and-swap on its bit pattern: lock-free recording from any thread.
struct AtomicDouble: ~Copyable, Sendable {
    private let bits = Atomic<UInt64>(0)

    /// Adds `amount`.
    func add(_ amount: Double) {
        var current = bits.load(ordering: .relaxed)
        while true {
            let next = (Double(bitPattern: current) + amount).bitPattern
            let (exchanged, original) = bits.compareExchange(expected: current, desired: next, ordering: .relaxed)
            if exchanged { return }
            current = original
        }
    }

    /// Replaces the value.
    func store(_ value: Double) { bits.store(value.bitPattern, ordering: .relaxed) }

    /// The current value.
    func load() -> Double { Double(bitPattern: bits.load(ordering: .relaxed)) }
}

/// One series holding one value, and its sample line: what a counter and a gauge share.
struct ValueSeries: ~Copyable, Sendable {
    /// The value.
    let state = AtomicDouble()
    /// `name{labels} `, rendered once.
    private let prefix: String

    init(name: String, labels: [(String, String)]) { prefix = name + Metrics.labelText(labels) + " " }

    /// Appends `name{labels} value`.
    func write(into out: inout String) {
        out += prefix
        out += Metrics.format(state.load())
        out += "\n"
    }
}

/// A monotonically increasing value.
public final class Counter: MetricSample {
    private let series: ValueSeries

    init(name: String, labels: [(String, String)]) { series = ValueSeries(name: name, labels: labels) }

    /// Adds `amount` (must be >= 0).
    public func increment(by amount: Double = 1) {
        precondition(amount >= 0, "counters only go up")
        series.state.add(amount)
    }

    /// The current value.
    public var value: Double { series.state.load() }

    func write(into out: inout String) { series.write(into: &out) }
}

/// A value that can go up and down.
public final class Gauge: MetricSample {
    private let series: ValueSeries

    init(name: String, labels: [(String, String)]) { series = ValueSeries(name: name, labels: labels) }

    /// Replaces the value.
    public func set(_ value: Double) { series.state.store(value) }
    /// Adds `amount` (may be negative).
    public func increment(by amount: Double = 1) { series.state.add(amount) }
    /// Subtracts `amount`.
    public func decrement(by amount: Double = 1) { series.state.add(-amount) }
    /// The current value.
    public var value: Double { series.state.load() }

    func write(into out: inout String) { series.write(into: &out) }
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
    /// `name_bucket{labels,le="x"} ` per bucket (with +Inf), `name_sum{labels} ` and `name_count{labels} `, rendered once.
    private let bucketPrefixes: [String]
    private let sumPrefix: String
    private let countPrefix: String

    init(name: String, labels: [(String, String)], bounds: [Double]) {
        self.bounds = bounds
        state = Locked(Snapshot(bounds: bounds, counts: Array(repeating: 0, count: bounds.count + 1), sum: 0, count: 0))
        bucketPrefixes = (bounds + [Double.infinity]).map { "\(name)_bucket\(Metrics.labelText(labels + [("le", Metrics.format($0))])) " }
        sumPrefix = "\(name)_sum\(Metrics.labelText(labels)) "
        countPrefix = "\(name)_count\(Metrics.labelText(labels)) "
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

    func write(into out: inout String) {
        let s = snapshot
        var cumulative: UInt64 = 0
        for (i, prefix) in bucketPrefixes.enumerated() {
            cumulative += s.counts[i]
            out += prefix
            out += String(cumulative)
            out += "\n"
        }
        out += sumPrefix + Metrics.format(s.sum) + "\n"
        out += countPrefix + String(s.count) + "\n"
    }
}
