import Infrastructure
import Tensor

// Step 4 of a request (after the batcher, before a cache store): the confidence cascade of config.json's `cascade`.
//
// A model is a classifier on `/infer` when its first output, as produced, is float32 [rows, classes >= 2] and the
// model says it classifies: it has labels, its config sets `output.probabilities` or a `cascade`, or it runs as a
// cascade target. Its probabilities are those `/classify` returns (softmax unless the config or the values say they
// already are). Rows whose top-1 probability is below `min_confidence` run again on the target, as one batch of the
// original input rows (images still encoded, so the target preprocesses them its own way), through the same path
// (so the target may cascade too); its rows replace those rows, in order. A target that cannot answer (not loaded,
// not ready, refusing the rows) leaves the first answer, marked unavailable; so does one whose outputs do not match
// (other dtype, classes per row or labels), logged once per pair of versions.

/// Who answered each row of a cascading model's response.
public struct CascadeReport: Sendable, Equatable {
    /// What happened to one row.
    public enum Outcome: String, Sendable, CaseIterable {
        /// Sure enough: the called model's answer stands.
        case kept
        /// Unsure: the target's answer replaced it.
        case escalated
        /// Unsure, but the target could not answer: the called model's answer stands.
        case unavailable
    }

    /// Per row: `<model>/<version>` of the model whose answer the row carries (the last one, when targets cascade).
    public var answeredBy: [String]
    /// Per row: the called model's top-1 probability.
    public var firstScores: [Double]
    /// Per row: its outcome.
    public var outcomes: [Outcome]

    /// A report value.
    public init(answeredBy: [String], firstScores: [Double], outcomes: [Outcome]) {
        self.answeredBy = answeredBy
        self.firstScores = firstScores
        self.outcomes = outcomes
    }

    /// True when any row escalated.
    public var cascaded: Bool { outcomes.contains(.escalated) }
    /// True when an unsure row kept the first answer because the target could not answer.
    public var unavailable: Bool { outcomes.contains(.unavailable) }
}

/// What the cascade target answered for the escalated rows: one tensor per merged output, its labels and who answered.
struct CascadeAnswer: Sendable {
    var outputs: [Tensor]
    var labels: [String]
    var answeredBy: [String]
}

/// Cascades (`<model>/<version> -> <target>`) whose problem was logged, so a misconfigured one logs once per version
/// rather than per request.
private let loggedCascadeProblems = Locked<Set<String>>([])

extension Inference {
    /// The models a cascade runs through in this task, so a cycle the load check could not see still ends.
    @TaskLocal static var cascadePath: [String] = []

    /// The outputs to compute for `wanted` (nil: all): a cascading model's class scores (its first output) join them,
    /// since the decision needs them even when the client did not ask for them.
    func outputsComputed(for wanted: [String]?, on served: ServedVersion) -> [String]? {
        guard let wanted, served.config.cascade != nil, let first = served.outputs.first?.name, !wanted.contains(first) else { return wanted }
        return wanted + [first]
    }

    /// Records a classifier's top-1 scores and runs its cascade on `response` (`results` holds what was computed).
    func cascade(_ response: InferenceResponse, results: [String: Tensor], request: InferenceRequest,
                 on served: ServedVersion) async -> InferenceResponse {
        guard let scores = served.outputs.first.flatMap({ results[$0.name] }), scores.dtype == .float32, scores.rank == 2,
              scores.shape[1] >= 2, scores.shape[0] > 0, Self.saysItClassifies(served),
              let probabilities = try? served.probabilities(scores, rows: scores.shape[0]) else {
            if let policy = served.config.cascade {
                logOnce("\(served.name)/\(served.version)", policy, "its first output is not float32 [batch, classes], so /infer does not cascade")
            }
            return response
        }
        let rows = scores.shape[0]
        var response = response
        let firstName = served.outputs[0].name
        let first = response.outputs
        let outcome = await cascadeRows(probabilities, outputs: first.map(\.tensor), on: served) { escalated, policy in
            var sub = request
            sub.model = policy.model
            sub.version = policy.version
            sub.outputs = []
            if rows > 1, let odd = request.inputs.first(where: { $0.value.shape.first != rows }) {
                throw CascadeMismatch("input '\(odd.key)' \(odd.value) does not have one row per class-score row")
            }
            sub.inputs = request.inputs.mapValues { rows == 1 ? $0 : Self.gather($0, rows: escalated) }
            let answer = try await infer(sub)
            // The target's first output stands for the class scores; any other output must share its name.
            let produced = Dictionary(answer.outputs.map { ($0.name, $0.tensor) }, uniquingKeysWith: { a, _ in a })
            let outputs = try first.map { output in
                guard let tensor = output.name == firstName ? answer.outputs.first?.tensor : produced[output.name] else {
                    throw CascadeMismatch("it has no output '\(output.name)'")
                }
                return tensor
            }
            return CascadeAnswer(outputs: outputs, labels: answer.labels,
                                 answeredBy: answer.cascade?.answeredBy ?? Array(repeating: "\(answer.model)/\(answer.version)", count: escalated.count))
        }
        for (index, tensor) in outcome.outputs.enumerated() { response.outputs[index].tensor = tensor }
        response.cascade = outcome.report
        return response
    }

    /// Classifies `images` on `served` (probabilities as the one output), then runs its cascade.
    func cascadeClassification(_ images: [[UInt8]], probabilities: Tensor, on served: ServedVersion,
                               timeout: Duration?) async -> InferenceResponse {
        let name = served.outputs.first?.name ?? "probabilities"
        var response = InferenceResponse(model: served.name, version: served.version, id: nil,
                                         outputs: [NamedTensor(name: name, tensor: probabilities)], labels: served.labels)
        let outcome = await cascadeRows(probabilities, outputs: [probabilities], on: served) { escalated, policy in
            let target = try registry.resolve(model: policy.model, version: policy.version)
            let answer = try await classify(escalated.map { images[$0] }, on: target, timeout: timeout)
            let tensor = answer.outputs[0].tensor
            return CascadeAnswer(outputs: [tensor], labels: answer.labels,
                                 answeredBy: answer.cascade?.answeredBy ?? Array(repeating: "\(target.name)/\(target.version)", count: escalated.count))
        }
        response.outputs[0].tensor = outcome.outputs[0]
        response.cascade = outcome.report
        return response
    }

    /// The cascade itself, for either route: records the top-1 scores of `probabilities` [rows, classes], escalates the
    /// unsure rows through `ask` (given their indices and the policy) and merges its answer into `outputs` per row.
    /// The report is nil when the model has no cascade.
    private func cascadeRows(_ probabilities: Tensor, outputs: [Tensor], on served: ServedVersion,
                             ask: (_ rows: [Int], _ policy: CascadePolicy) async throws -> CascadeAnswer) async
        -> (outputs: [Tensor], report: CascadeReport?) {
        let scores = Self.topProbabilities(probabilities)
        for score in scores where !score.isNaN { registry.metrics?.recordTopScore(model: served.name, version: served.version, score: score) }
        guard let policy = served.config.cascade else { return (outputs, nil) }
        let me = "\(served.name)/\(served.version)"
        let escalated = scores.indices.filter { policy.escalates(topProbability: scores[$0]) }
        var report = CascadeReport(answeredBy: Array(repeating: me, count: scores.count), firstScores: scores,
                                   outcomes: scores.map { policy.escalates(topProbability: $0) ? .escalated : .kept })
        var merged = outputs
        if !escalated.isEmpty {
            do {
                let path = Self.cascadePath.isEmpty ? [served.name] : Self.cascadePath
                guard !path.contains(policy.model) else { throw CascadeMismatch("the cascade runs in a cycle: \((path + [policy.model]).joined(separator: " -> "))") }
                if let odd = outputs.first(where: { $0.shape.first != scores.count }) {
                    throw CascadeMismatch("output \(odd) does not have one row per class-score row")
                }
                let answer = try await Self.$cascadePath.withValue(path + [policy.model]) { try await ask(escalated, policy) }
                try Self.checkCompatible(answer, with: outputs, labels: served.labels, rows: escalated.count)
                merged = zip(outputs, answer.outputs).map { Self.mergeRows($0, $1, at: escalated) }
                for (position, row) in escalated.enumerated() { report.answeredBy[row] = answer.answeredBy[position] }
            } catch {
                for row in escalated { report.outcomes[row] = .unavailable }
                if let mismatch = error as? CascadeMismatch {
                    logOnce(me, policy, mismatch.reason)
                } else {
                    registry.logger.debug("model '\(me)': cascade target '\(policy.model)' did not answer: \(error)")
                }
            }
        }
        for outcome in CascadeReport.Outcome.allCases {
            let count = report.outcomes.count(where: { $0 == outcome })
            if count > 0 { registry.metrics?.recordCascadeRows(model: served.name, outcome: outcome.rawValue, count: count) }
        }
        return (merged, report)
    }

    /// Warns about a cascade that cannot run, once per calling version.
    private func logOnce(_ me: String, _ policy: CascadePolicy, _ reason: String) {
        let target = policy.model + (policy.version.map { "/\($0)" } ?? "")
        guard loggedCascadeProblems.withLock({ $0.insert("\(me) -> \(target)").inserted }) else { return }
        registry.logger.warn("model '\(me)': cascade to '\(target)' cannot run (\(reason)); the first answer is returned, marked cascade_unavailable")
    }

    /// True when the model says it classifies (labels, `output.probabilities`, a cascade, or it answers for one).
    static func saysItClassifies(_ served: ServedVersion) -> Bool {
        !served.labels.isEmpty || served.config.outputsAreProbabilities != nil || served.config.cascade != nil || !cascadePath.isEmpty
    }

    /// The highest probability of each row of `probabilities` [rows, classes], NaN ignored (NaN when all are: such a
    /// row escalates and is not recorded).
    static func topProbabilities(_ probabilities: Tensor) -> [Double] {
        let rows = probabilities.shape[0]
        let classes = rows == 0 ? 0 : probabilities.count / rows
        return probabilities.withUnsafeBufferPointer(of: Float.self) { values in
            (0..<rows).map { row in Double(values[(row * classes)..<((row + 1) * classes)].lazy.filter { !$0.isNaN }.max() ?? .nan) }
        }
    }

    /// Throws unless `answer` fits where it goes: per output the same dtype and per-row shape, `rows` rows each, and
    /// the same labels when both models have them.
    static func checkCompatible(_ answer: CascadeAnswer, with outputs: [Tensor], labels: [String], rows: Int) throws {
        for (mine, theirs) in zip(outputs, answer.outputs) {
            guard theirs.dtype == mine.dtype, theirs.rank == mine.rank, theirs.shape.first == rows,
                  Array(theirs.shape.dropFirst()) == Array(mine.shape.dropFirst()) else {
                throw CascadeMismatch("it answers \(theirs.dtype)\(theirs.shape) for \(rows) rows, expected \(mine.dtype)[\(rows), \(mine.shape.dropFirst().map(String.init).joined(separator: ", "))]")
            }
        }
        guard labels.isEmpty || answer.labels.isEmpty || labels == answer.labels else {
            throw CascadeMismatch("its labels differ")
        }
    }

    /// Rows `rows` of `tensor` stacked in that order.
    static func gather(_ tensor: Tensor, rows: [Int]) -> Tensor {
        Tensor.concatenatingRows(rows.map { tensor.rows($0..<($0 + 1)) })
    }

    /// `first` with its rows at `rows` (ascending) replaced by the rows of `replacement`, in order.
    static func mergeRows(_ first: Tensor, _ replacement: Tensor, at rows: [Int]) -> Tensor {
        var pieces: [Tensor] = []
        var next = 0
        for (position, row) in rows.enumerated() {
            if row > next { pieces.append(first.rows(next..<row)) }
            pieces.append(replacement.rows(position..<(position + 1)))
            next = row + 1
        }
        if next < first.shape[0] { pieces.append(first.rows(next..<first.shape[0])) }
        return Tensor.concatenatingRows(pieces)
    }
}

/// Why a cascade target's answer cannot replace the first model's rows.
struct CascadeMismatch: Error {
    let reason: String
    init(_ reason: String) { self.reason = reason }
}

extension ModelRegistry {
    /// The load failure of a version whose config's cascade would close a cycle with `others` (each loaded or loading
    /// model's target), naming the cycle; nil when the chain ends.
    nonisolated func cascadeCycleRefusal(model: String, version: Int, config: ModelConfig, others: [String: String]) -> ServingError? {
        guard let target = config.cascade?.model else { return nil }
        var targets = others
        targets[model] = target
        guard let cycle = CascadePolicy.cycle(from: model, targets: targets) else { return nil }
        return .loadFailed(model: model, version: version,
                           reason: "config.json cascade forms a cycle with the loaded models: \(cycle.joined(separator: " -> "))")
    }
}
