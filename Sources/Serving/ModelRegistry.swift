import Infrastructure
import Foundation
import Engine
import Tensor

/// The model repository at run time: which versions are loaded, which one serves each model, and their lifecycle.
///
/// Loads run on a dedicated loader thread; the actor only swaps which `ServedVersion` new requests get, so a swap is
/// atomic and never touches requests already admitted. Each version's slot holds one `VersionPhase`; state is
/// re-checked after every await.
///
/// Three pieces beside the actor's own state, each for a reason:
/// - the lock-guarded routing table (`routes`, published after every change): `resolve`, `index` and `isReady` run
///   on every request and probe, synchronously and from any thread, so they never hop onto the actor or await it;
/// - the per-model lock (`lock`/`unlock`): a reconcile awaits the loader thread, and actor reentrancy would otherwise
///   let a second reconcile, upload or pin of the same model interleave with it;
/// - loading tokens: `unload` deliberately does not wait for that lock (it must act at once), so a load that
///   finishes after an unload finds its token replaced and discards what it loaded.
public actor ModelRegistry {
    /// Root of the model repository.
    public nonisolated let repositoryPath: String
    /// Where per-version series are recorded (nil: none).
    public nonisolated let metrics: Metrics?

    /// Where one version is in its lifecycle; exactly one of these at a time.
    private enum VersionPhase {
        /// On disk (or just unloaded), nothing loaded; `note` says why when there is a reason beyond "not loaded".
        case unavailable(note: String?)
        /// A first load (or a retry after a failure) runs under `token`; nothing serves meanwhile.
        case loading(token: UInt64)
        /// `served` takes requests. `reloading` is the token of a load replacing it (it keeps serving until that
        /// is READY); `removedFromDisk` means its file left the repository and it serves until another version is READY.
        case ready(ServedVersion, reloading: UInt64?, removedFromDisk: Bool)
        /// The last load failed and nothing serves.
        case failed(reason: String)
    }

    private struct VersionSlot {
        var phase: VersionPhase = .unavailable(note: nil)
        /// The file the served (or last loaded) runtime came from.
        var fingerprint: FileFingerprint?
        /// What the last failed load tried (file, config, labels): polling does not retry the same attempt.
        var failedAttempt: (FileFingerprint, ModelConfig, [String])?

        /// The serving version, if any.
        var served: ServedVersion? {
            if case .ready(let served, _, _) = phase { return served }
            return nil
        }

        /// The token of the load running for this version, if any.
        var loadingToken: UInt64? {
            switch phase {
            case .loading(let token): return token
            case .ready(_, let token, _): return token
            default: return nil
            }
        }

        /// True when a READY version's file is gone from the repository.
        var removedFromDisk: Bool {
            if case .ready(_, _, true) = phase { return true }
            return false
        }

        /// True when the last load failed and nothing serves.
        var isFailed: Bool {
            if case .failed = phase { return true }
            return false
        }

        /// Starts a load under `token`: a READY version keeps serving while it runs.
        mutating func beginLoading(_ token: UInt64) {
            if case .ready(let served, _, let removed) = phase {
                phase = .ready(served, reloading: token, removedFromDisk: removed)
            } else {
                phase = .loading(token: token)
            }
        }

        /// Marks (or clears) that a READY version's file left the repository; other phases have nothing to mark.
        mutating func setRemovedFromDisk(_ removed: Bool) {
            if case .ready(let served, let token, _) = phase { phase = .ready(served, reloading: token, removedFromDisk: removed) }
        }

        var state: ModelState {
            switch phase {
            case .ready: return .ready
            case .loading: return .loading
            case .failed: return .failed
            case .unavailable: return .unavailable
            }
        }

        var reason: String? {
            switch phase {
            case .ready(_, _, let removed): return removed ? "removed from the repository; serves until another version is ready" : nil
            case .loading: return nil
            case .failed(let reason): return reason
            case .unavailable(let note): return note ?? "not loaded"
            }
        }
    }

    private struct ModelRecord {
        var config = ModelConfig()
        var labels: [String] = []
        var configError: String?
        var versions: [Int: VersionSlot] = [:]
        var pinned: Int?
        var unloaded = false
        /// The run-time split (`setTraffic`), over config.json's; never written to disk.
        var trafficOverride: TrafficSplit?
    }

    /// What lookups see: published after every change.
    private struct Route {
        var defaultVersion: ServedVersion?
        var versions: [Int: (state: ModelState, reason: String?, served: ServedVersion?)]
        var reason: String
        var entries: [ModelIndexEntry]
        var unloaded: Bool
        var traffic: TrafficState
    }

    private let repository: ModelRepository
    private let loader: ModelLoader
    private let options: RegistryOptions
    let logger: Logger
    private let worker = BlockingExecutor(name: "osprey-loader")
    private let gate: ComputeGate
    private var models: [String: ModelRecord] = [:]
    private var nextToken: UInt64 = 0
    private var busyModels: Set<String> = []
    private var lockWaiters: [String: [CheckedContinuation<Void, Never>]] = [:]
    private var publishedVersions: [String: Set<Int>] = [:]
    private nonisolated let routes = Locked<[String: Route]>([:])
    /// Bumped after every write of `routes`, so an answer that depended on other models' routes (a cascade's) can tell
    /// that it may be stale.
    private nonisolated let routesWritten = Locked<UInt64>(0)
    /// Models readiness waits for; nil until the first `loadAll` has scanned the repository.
    private nonisolated let required = Locked<Set<String>?>(nil)
    private var scannedOnce = false
    /// Bytes set aside for loads in progress, so two concurrent loads cannot both count on the same free budget.
    private var reservedMemoryBytes = 0

    /// A registry over `repositoryPath`; call `loadAll()` to load the models, `run()` to poll for changes.
    public init(repositoryPath: String, loader: @escaping ModelLoader, options: RegistryOptions = RegistryOptions(),
                metrics: Metrics? = nil, logger: Logger = .disabled) {
        self.repositoryPath = repositoryPath
        repository = ModelRepository(root: repositoryPath, singleModel: options.singleModel)
        self.loader = loader
        self.options = options
        self.metrics = metrics
        self.logger = logger
        gate = options.computeGate
    }

    /// True for names a model directory may have: 1-64 characters of `[A-Za-z0-9_.-]`, not `.` or `..`.
    public nonisolated static func isValidModelName(_ name: String) -> Bool { ModelRepository.isValidModelName(name) }

    // MARK: - Lookups (no await)

    /// The version a request should run on: `version`, or the default (pinned, else highest READY) when nil.
    ///
    /// Throws `.modelNotFound`, `.versionNotFound` or `.notReady`.
    public nonisolated func resolve(model: String, version: Int? = nil) throws -> ServedVersion {
        guard let route = routes.withLock({ $0[model] }) else { throw ServingError.modelNotFound(model: model) }
        guard let version else {
            guard let served = route.defaultVersion else { throw ServingError.notReady(model: model, version: nil, reason: route.reason) }
            return served
        }
        guard let entry = route.versions[version] else { throw ServingError.versionNotFound(model: model, version: version) }
        guard let served = entry.served else {
            throw ServingError.notReady(model: model, version: version, reason: entry.reason ?? entry.state.rawValue.lowercased())
        }
        return served
    }

    /// A count of routing-table changes (any model's versions, states, pin or traffic); read it before resolving and an
    /// unchanged count later means every resolution would still give the same versions.
    public nonisolated var routingGeneration: UInt64 { routesWritten.withLock { $0 } }

    /// Every model version known to the repository with its state, sorted by name then version.
    public nonisolated func index() -> [ModelIndexEntry] {
        let snapshot = routes.withLock { $0 }
        return snapshot.sorted { $0.key < $1.key }.flatMap(\.value.entries)
    }

    /// The index rows of one model (its versions and states); throws `.modelNotFound`.
    public nonisolated func versions(of model: String) throws -> [ModelIndexEntry] {
        guard let route = routes.withLock({ $0[model] }) else { throw ServingError.modelNotFound(model: model) }
        return route.entries
    }

    /// The pin, split and READY versions `route(model:version:routingKey:)` chooses among; nil for an unknown model.
    nonisolated func trafficState(of model: String) -> TrafficState? {
        routes.withLock { $0[model]?.traffic }
    }

    /// True when `resolve(model:version:)` would succeed (KServe model readiness).
    public nonisolated func isModelReady(model: String, version: Int? = nil) -> Bool {
        (try? resolve(model: model, version: version)) != nil
    }

    /// True when every required model (except ones explicitly unloaded) has a READY version.
    ///
    /// Required means `options.requiredModels` when given, else every model whose directory held a version when
    /// `loadAll` first scanned the repository; models added later never make the server not ready by failing.
    public nonisolated var isReady: Bool {
        let names = required.withLock { $0 } ?? []
        return routes.withLock { table in names.allSatisfy { table[$0].map { $0.unloaded || $0.defaultVersion != nil } ?? false } }
    }

    /// The models readiness waits for, sorted (empty before the first `loadAll`).
    public nonisolated var requiredModels: [String] { (required.withLock { $0 } ?? []).sorted() }

    /// Triton-style statistics of the READY versions of `model` (only `version` when given).
    public nonisolated func statistics(model: String, version: Int? = nil) throws -> [ModelStatistics] {
        guard let route = routes.withLock({ $0[model] }) else { throw ServingError.modelNotFound(model: model) }
        if let version {
            guard let entry = route.versions[version] else { throw ServingError.versionNotFound(model: model, version: version) }
            return entry.served.map { [$0.statistics] } ?? []
        }
        return route.versions.keys.sorted().compactMap { route.versions[$0]?.served?.statistics }
    }

    // MARK: - Lifecycle

    /// Scans the repository and loads every model per its version policy (retrying earlier failures); failures are logged, not thrown.
    ///
    /// The first call also removes what interrupted uploads left (older than `options.staleUploadAge`) and fixes the
    /// set of required models.
    public func loadAll() async {
        guard !scannedOnce else { return await synchronize(retryFailures: true) }
        scannedOnce = true
        let repository = self.repository
        let age = options.staleUploadAge
        let removed = (try? await worker.run { repository.removeStaleUploads(olderThan: age) }) ?? []
        for path in removed { logger(.info, "removed '\(path)' left by an interrupted upload") }
        await synchronize(retryFailures: true)
        let names = Set(options.requiredModels ?? models.filter { !$0.value.versions.isEmpty }.map(\.key))
        for name in names.sorted() where models[name] == nil {
            logger(.warning, "required model '\(name)' is not in the repository: the server stays not ready until it is loaded")
        }
        required.withLock { $0 = names }
    }

    /// One polling pass: picks up added, removed or replaced models, versions, configs and labels.
    public func poll() async {
        await synchronize(retryFailures: false)
    }

    /// Polls every `options.pollInterval` until the task is cancelled (returns at once when polling is off).
    public func run() async {
        guard let interval = options.pollInterval else { return }
        while !Task.isCancelled {
            do { try await Task.sleep(for: interval) } catch { return }
            await poll()
        }
    }

    /// (Re)loads `model` per its version policy, re-reading config.json and labels.txt; throws the first version's load failure.
    ///
    /// With `config` (Triton's load-with-config), the bytes must parse as a config.json; they replace the model's
    /// config.json atomically before the load, so versions that still fit keep serving if the new config breaks one.
    public func load(model: String, config: [UInt8]? = nil) async throws {
        try ModelRepository.checkModelName(model)
        if let config { _ = try ModelConfig(json: config) }
        await lock(model)
        defer { unlock(model) }
        if let config {
            let repository = self.repository
            try await worker.run { try repository.writeConfig(model: model, bytes: config) }
            logger(.info, "model '\(model)': config.json replaced by a load request")
        }
        models[model]?.unloaded = false
        let failures = try await reconcile(model, retryFailures: true, keepServingWhenGone: true)
        guard let record = models[model] else { throw ServingError.modelNotFound(model: model) }
        if let first = failures.keys.max(), let error = failures[first] { throw error }
        if !record.versions.values.contains(where: { !$0.removedFromDisk }) {
            throw ServingError.noVersionOnDisk(model: model, serving: routes.withLock { $0[model]?.defaultVersion?.version })
        }
    }

    /// Unloads every version of `model`; requests already admitted finish, then the versions are freed. Polling leaves it unloaded.
    public func unload(model: String) throws {
        guard var record = models[model] else { throw ServingError.modelNotFound(model: model) }
        record.unloaded = true
        record.pinned = nil
        // Replacing the slots also voids the tokens of loads in progress: they find their token gone and discard.
        record.trafficOverride = nil
        for version in record.versions.keys { record.versions[version] = VersionSlot(phase: .unavailable(note: "unloaded")) }
        models[model] = record
        logger(.info, "unloaded model '\(model)'")
        publish(model)
    }

    /// Unloads every model (for shutdown).
    public func unloadAll() {
        for model in models.keys { try? unload(model: model) }
    }

    /// Unloads every model, then waits at most `seconds` for every batcher to drain what it holds and stop; returns
    /// how many still run (a version still referenced by a request that outlived the HTTP drain keeps its batcher).
    public func unloadAll(waitingAtMost seconds: Double) async -> Int {
        unloadAll()
        let gate = self.gate
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await gate.batchersFinished() }
            group.addTask { try? await Task.sleep(for: .milliseconds(Int(seconds * 1000))) }
            await group.next()
            group.cancelAll()
        }
        return gate.runningBatchers
    }

    /// Uploads `bytes` as `model`/`version` in one transaction: staged under `.staging/`, compiled and warmed up there,
    /// and only then renamed into place and published (per the version policy).
    ///
    /// A version already on disk is refused (`.versionExists`) unless `replace`, which keeps the old file serving until
    /// the new one is READY. What fails to load is removed and never reaches the repository; the served versions keep
    /// serving and this throws `.loadFailed` or `.memoryBudgetExceeded`. Throws `.invalidName`, `.digestMismatch`,
    /// `.invalidConfig` before writing, and `.repositoryReadOnly`, `.insufficientStorage`, `.io` when writing fails.
    public func putVersion(model: String, version: Int, bytes: [UInt8], sha256: String? = nil, replace: Bool = false) async throws {
        try ModelRepository.checkModelName(model)
        guard version > 0 else { throw ServingError.invalidName("invalid version \(version): expected a positive integer") }
        if let expected = sha256.map({ $0.lowercased().trimmingPrefix("sha256:") }) {
            let got = try await worker.run { SHA256.hexDigest(bytes) }
            guard got == expected else { throw ServingError.digestMismatch(expected: String(expected), got: got) }
        }
        await lock(model)
        defer { unlock(model) }
        let repository = self.repository
        // The version loads with the model's current config and labels; a broken config.json refuses the upload first.
        let scan = try await worker.run { try repository.scan(model: model) }
        let config = try scan?.configBytes.map { try ModelConfig(json: $0) } ?? ModelConfig()
        let labels = scan?.labels ?? []
        let exists = scan?.versions[version] != nil
        if exists && !replace { throw ServingError.versionExists(model: model, version: version) }
        let staged = try await worker.run { try repository.stage(model: model, version: version, bytes: bytes) }
        let outcome = await loadVersion(model: model, version: version, path: staged.modelFile, config: config, labels: labels, reusing: nil)
        let served: ServedVersion
        switch outcome {
        case .failure(let error):
            _ = try? await worker.run { repository.discard(staged) }
            logger(.error, "upload of model '\(model)' version \(version) refused, nothing stored: \(error)")
            throw error
        case .success(let loaded):
            served = loaded
        }
        do {
            try await worker.run { try repository.install(staged, replacing: exists) }
        } catch {
            _ = try? await worker.run { repository.discard(staged) }
            throw error
        }
        let fingerprint = try? await worker.run { try repository.scan(model: model)?.versions[version] }
        logger(.info, "stored model '\(model)' version \(version) (\(bytes.count) bytes)" + (exists ? ", replacing the previous file" : ""))
        var record = models[model] ?? ModelRecord()
        record.unloaded = false
        record.config = config
        record.labels = labels
        record.versions[version] = VersionSlot(phase: .ready(served, reloading: nil, removedFromDisk: false), fingerprint: fingerprint)
        models[model] = record
        publish(model)
        // The policy decides what serves now (the upload is not reloaded: its fingerprint, config and labels match).
        let failures = try await reconcile(model, retryFailures: false)
        if let error = failures[version] { throw error }
    }

    /// Makes `version` the default of `model` (loading it if needed), e.g. to roll back; throws if it cannot be made READY.
    public func pin(model: String, version: Int) async throws {
        await lock(model)
        defer { unlock(model) }
        guard var record = models[model] else { throw ServingError.modelNotFound(model: model) }
        let previous = record.pinned
        record.pinned = version
        record.unloaded = false
        models[model] = record
        // Reconciling rescans the disk, so a version added since the last scan can be pinned too.
        let failures = try await reconcile(model, retryFailures: true)
        if models[model]?.versions[version] == nil {
            models[model]?.pinned = previous
            publish(model)
            throw ServingError.versionNotFound(model: model, version: version)
        }
        if models[model]?.versions[version]?.served == nil {
            models[model]?.pinned = previous
            publish(model)
            throw failures[version] ?? ServingError.notReady(model: model, version: version,
                                                             reason: models[model]?.versions[version]?.reason ?? "not loaded")
        }
        logger(.info, "model '\(model)' pinned to version \(version)")
    }

    /// Returns `model` to serving its highest READY version and applies the version policy again.
    public func unpin(model: String) async throws {
        await lock(model)
        defer { unlock(model) }
        guard models[model] != nil else { throw ServingError.modelNotFound(model: model) }
        models[model]?.pinned = nil
        _ = try await reconcile(model, retryFailures: false)
        logger(.info, "model '\(model)' unpinned")
    }

    /// The pinned version of `model`, if any.
    public func pinnedVersion(model: String) -> Int? { models[model]?.pinned }

    /// Replaces config.json's `traffic` of `model` with `split` until `clearTraffic`, an unload or a restart (never
    /// written to disk: config.json is the durable form); returns the split now in effect. Throws `.modelNotFound`.
    @discardableResult
    public func setTraffic(model: String, split: TrafficSplit) throws -> ModelTraffic {
        guard models[model] != nil else { throw ServingError.modelNotFound(model: model) }
        models[model]?.trafficOverride = split
        publish(model)
        logger(.info, "model '\(model)': traffic split set to \(split) until cleared (config.json unchanged)")
        return ModelTraffic(split: split, source: .override)
    }

    /// Drops the run-time split of `model`: config.json's `traffic` (if any) applies again; returns it. Throws `.modelNotFound`.
    @discardableResult
    public func clearTraffic(model: String) throws -> ModelTraffic? {
        guard let record = models[model] else { throw ServingError.modelNotFound(model: model) }
        if record.trafficOverride != nil {
            models[model]?.trafficOverride = nil
            publish(model)
            logger(.info, "model '\(model)': run-time traffic split cleared; " + (record.config.traffic.map { "config.json's \($0) applies" } ?? "no split"))
        }
        return ModelTraffic.effective(config: record.config.traffic, override: nil)
    }

    // MARK: - Reconciliation

    private func synchronize(retryFailures: Bool) async {
        let repository = self.repository
        let listing: (valid: [String], invalid: [String])
        do {
            listing = try await worker.run { try repository.listModels() }
        } catch {
            logger(.error, "\(error)")
            return
        }
        for name in listing.invalid where !retryFailures {
            logger(.debug, "ignoring directory '\(name)': not a valid model name")
        }
        for name in listing.invalid where retryFailures {
            logger(.warning, "ignoring directory '\(name)': model names must be 1-64 characters of [A-Za-z0-9_.-]")
        }
        for model in Set(models.keys).union(listing.valid).sorted() {
            await lock(model)
            if models[model]?.unloaded != true {
                _ = try? await reconcile(model, retryFailures: retryFailures)
            } else if !listing.valid.contains(model) {
                forget(model)
            }
            unlock(model)
        }
    }

    /// Brings `model` in line with the disk and its policy; returns the load failures by version. Caller holds the model lock.
    ///
    /// Three steps: scan (the disk, on the loader thread), plan (which versions the policy wants and which of those
    /// need a load) and apply (load them one by one, newest first, re-planning after each failure), then retire what
    /// the policy no longer wants. A READY version whose file left the repository keeps serving until another version
    /// is READY; with `keepServingWhenGone` (explicit loads) that holds even when the whole model directory is gone.
    private func reconcile(_ model: String, retryFailures: Bool, keepServingWhenGone: Bool = false) async throws -> [Int: ServingError] {
        let repository = self.repository
        guard let scan = try await worker.run({ try repository.scan(model: model) }) else {
            if keepServingWhenGone, var record = models[model], record.versions.values.contains(where: { $0.served != nil }) {
                markRemoved(&record, model, onDisk: [:])
                models[model] = record
                publish(model)
            } else {
                forget(model)
            }
            return [:]
        }
        let config = try absorb(scan, model: model)
        guard models[model]?.unloaded == false else { return [:] }

        var failures: [Int: ServingError] = [:]
        var attempted: Set<Int> = []
        var desired: Set<Int> = []
        while true {
            let plan = plannedLoads(model, scan: scan, config: config, retryFailures: retryFailures, failures: failures, attempted: attempted)
            desired = plan.desired
            if plan.todo.isEmpty { break }
            for version in plan.todo {
                attempted.insert(version)
                // An unload (which does not wait for the model lock) may have happened during the previous load.
                guard models[model]?.unloaded == false else { break }
                if let error = await applyLoad(model, version: version, scan: scan, config: config, retryFailures: retryFailures) {
                    failures[version] = error
                }
            }
        }
        retire(model, desired: desired)
        return failures
    }

    /// Takes a scan into the model's record: config and labels, versions gone from disk, new versions as slots; returns
    /// the parsed config, or records and throws why config.json is invalid (versions not serving then read as failed).
    private func absorb(_ scan: ModelScan, model: String) throws -> ModelConfig {
        var record = models[model] ?? ModelRecord()
        defer {
            models[model] = record
            publish(model)
        }
        let config: ModelConfig
        do {
            config = try scan.configBytes.map { try ModelConfig(json: $0) } ?? ModelConfig()
            record.configError = nil
        } catch {
            let reason = "invalid config.json: \(error)"
            if record.configError != reason { logger(.error, "model '\(model)': \(reason)") }
            record.configError = reason
            for version in scan.versions.keys where record.versions[version]?.served == nil {
                record.versions[version] = VersionSlot(phase: .failed(reason: reason))
            }
            markRemoved(&record, model, onDisk: scan.versions)
            throw error
        }
        record.config = config
        record.labels = scan.labels
        markRemoved(&record, model, onDisk: scan.versions)
        for version in scan.versions.keys where record.versions[version] == nil {
            record.versions[version] = VersionSlot()
        }
        return config
    }

    /// The versions the policy (and a pin) wants, and those of them not yet attempted in this pass, newest first.
    ///
    /// A version that failed to load drops out of the policy's choice, so "latest 1" falls back to the newest version
    /// that works instead of leaving an older pinned or fallback version serving.
    private func plannedLoads(_ model: String, scan: ModelScan, config: ModelConfig, retryFailures: Bool,
                              failures: [Int: ServingError], attempted: Set<Int>) -> (desired: Set<Int>, todo: [Int]) {
        func isKnownBad(_ version: Int) -> Bool {
            // A version whose older file still serves is not bad: its working runtime stays.
            guard let slot = models[model]?.versions[version], slot.served == nil else { return false }
            if failures[version] != nil { return true }
            if retryFailures && !attempted.contains(version) { return false }
            guard let attempt = slot.failedAttempt, let fingerprint = scan.versions[version] else { return false }
            return attempt.0 == fingerprint && attempt.1 == config && attempt.2 == scan.labels
        }
        var desired = Set(config.versionPolicy.select(from: scan.versions.keys.filter { !isKnownBad($0) }))
        if let pinned = models[model]?.pinned, scan.versions[pinned] != nil { desired.insert(pinned) }
        return (desired, desired.subtracting(attempted).sorted(by: >))
    }

    /// Loads `version` when its slot needs it (a new file, config or labels, or a failure to retry) and publishes the
    /// outcome; returns the load failure. A load superseded meanwhile (its token replaced by an unload) is discarded.
    private func applyLoad(_ model: String, version: Int, scan: ModelScan, config: ModelConfig, retryFailures: Bool) async -> ServingError? {
        guard let slot = models[model]?.versions[version], slot.loadingToken == nil,
              let fingerprint = scan.versions[version] else { return nil }
        if let served = slot.served, slot.fingerprint == fingerprint, served.config == config, served.labels == scan.labels { return nil }
        if !retryFailures, slot.served == nil, let attempt = slot.failedAttempt,
           attempt.0 == fingerprint, attempt.1 == config, attempt.2 == scan.labels { return nil }
        nextToken += 1
        let token = nextToken
        models[model]?.versions[version]?.beginLoading(token)
        publish(model)
        // Same file, new config or labels: rewrap the loaded runtime instead of loading and warming up again.
        let reusable = slot.fingerprint == fingerprint ? slot.served : nil
        let outcome = await loadVersion(model: model, version: version, config: config, labels: scan.labels, reusing: reusable)
        // The model may have been unloaded, removed or reloaded while we waited.
        guard let current = models[model]?.versions[version], current.loadingToken == token else { return nil }
        switch outcome {
        case .success(let served):
            let previousDefault = routes.withLock { $0[model]?.defaultVersion?.version }
            models[model]?.versions[version] = VersionSlot(phase: .ready(served, reloading: nil, removedFromDisk: false), fingerprint: fingerprint)
            metrics?.gauge("osprey_model_load_duration_seconds", help: "Time the last load and warm-up of a version took, in seconds.",
                           labels: ["model": model, "version": String(version)]).set(served.loadSeconds)
            let batching = served.batchingEnabled ? " (batches up to \(served.maxBatchSize))" : ""
            if reusable != nil {
                logger(.info, "model '\(model)' version \(version) now uses the changed config.json/labels.txt" + batching)
            } else {
                logger(.info, "loaded model '\(model)' version \(version) in \(String(format: "%.3f", served.loadSeconds)) s" + batching)
            }
            publish(model)
            let newDefault = routes.withLock { $0[model]?.defaultVersion?.version }
            if newDefault != previousDefault, let newDefault {
                logger(.info, "model '\(model)' now serves version \(newDefault)")
            }
            return nil
        case .failure(let error):
            var failed = current
            failed.failedAttempt = (fingerprint, config, scan.labels)
            // A failed reload keeps the old runtime serving; a failed first load (or retry) records why.
            if case .ready(let served, _, let removed) = failed.phase {
                failed.phase = .ready(served, reloading: nil, removedFromDisk: removed)
            } else {
                failed.phase = .failed(reason: "\(error)")
            }
            models[model]?.versions[version] = failed
            let serving = routes.withLock { $0[model]?.defaultVersion?.version }
            logger(.error, "\(error)" + (serving.map { "; still serving version \($0)" } ?? ""))
            publish(model)
            return error
        }
    }

    /// Forgets versions no longer on disk, except READY ones: those are marked removed and keep serving until
    /// `retire` finds another version READY (so deleting the serving version's directory never opens a gap).
    private func markRemoved(_ record: inout ModelRecord, _ model: String, onDisk: [Int: FileFingerprint]) {
        for (version, var slot) in record.versions {
            if onDisk[version] != nil {
                slot.setRemovedFromDisk(false)
            } else if slot.served == nil {
                record.versions[version] = nil
                continue
            } else {
                if !slot.removedFromDisk {
                    logger(.warning, "model '\(model)' version \(version) was removed from the repository; it serves until another version is ready")
                }
                slot.setRemovedFromDisk(true)
            }
            record.versions[version] = slot
        }
    }

    /// Unloads versions outside `desired`, except the one serving when no desired version is READY (a failed new version never disturbs the old).
    private func retire(_ model: String, desired: Set<Int>) {
        guard var record = models[model], !record.unloaded else { return }
        let desiredReady = desired.contains { record.versions[$0]?.served != nil }
        let fallback = desiredReady ? nil : record.versions.filter { $0.value.served != nil }.keys.max()
        for version in record.versions.keys.sorted() where !desired.contains(version) && version != fallback {
            guard let slot = record.versions[version], slot.loadingToken == nil else { continue }
            if slot.removedFromDisk {
                logger(.info, "model '\(model)' version \(version) (removed from the repository) is unloaded: another version is ready")
                record.versions[version] = nil
                continue
            }
            // A failed version keeps its reason in the index rather than reading "not selected".
            if slot.isFailed { continue }
            if slot.served != nil { logger(.info, "unloading model '\(model)' version \(version) (not selected by the version policy)") }
            record.versions[version] = VersionSlot(phase: .unavailable(note: "not selected by the version policy"))
        }
        if let fallback {
            logger(.warning, "model '\(model)': no version selected by the policy is ready; version \(fallback) keeps serving")
        }
        models[model] = record
        publish(model)
    }

    /// Reads, loads and warms up one version on the loader thread (from `path`, else its place in the repository),
    /// measuring its memory; refused before and after compiling when it would not fit `options.maxModelMemory`.
    private func loadVersion(model: String, version: Int, path: String? = nil, config: ModelConfig, labels: [String],
                             reusing previous: ServedVersion?) async -> Result<ServedVersion, ServingError> {
        if let refusal = cascadeCycleRefusal(model: model, version: version, config: config, others: cascadeTargets(excluding: model)) {
            return .failure(refusal)
        }
        if let previous {
            do {
                return .success(try ServedVersion(name: model, version: version, config: config, labels: labels, runtime: previous.runtime,
                                                  gate: gate, metrics: metrics, loadSeconds: previous.loadSeconds,
                                                  memoryBytes: previous.memoryBytes))
            } catch {
                return .failure(.loadFailed(model: model, version: version, reason: "config does not fit the model: \(Self.describe(error))"))
            }
        }
        let path = path ?? repository.modelFile(model, version: version)
        let budget = options.maxModelMemory
        var reservation = 0
        if let budget {
            // The file's size is a floor for the weights: refuse before compiling what cannot fit.
            var info = stat()
            let fileBytes = stat(path, &info) == 0 ? Int(info.st_size) : 0
            let loaded = loadedBytesInRegistry() + reservedMemoryBytes
            if loaded + fileBytes > budget {
                return .failure(.memoryBudgetExceeded(model: model, version: version, needed: fileBytes, loaded: loaded, budget: budget))
            }
            reservation = fileBytes
            reservedMemoryBytes += reservation
        }
        defer { reservedMemoryBytes -= reservation }
        let loader = self.loader
        let gate = self.gate
        let metrics = self.metrics
        let warmUp = options.warmUp
        let result: Result<ServedVersion, ServingError>
        do {
            let served = try await worker.run { () throws -> ServedVersion in
                let started = SystemClock.nanoseconds()
                let runtime: any ModelRuntime
                do {
                    runtime = try loader(path)
                } catch {
                    throw ServingError.loadFailed(model: model, version: version, reason: Self.describe(error))
                }
                var activationBytes = 0
                if warmUp {
                    activationBytes = try Self.warmUp(runtime, model: model, version: version,
                                                      rows: ServedVersion.executionRows(config: config, runtime: runtime), gate: gate)
                }
                let seconds = Double(SystemClock.nanoseconds() - started) / 1e9
                do {
                    return try ServedVersion(name: model, version: version, config: config, labels: labels, runtime: runtime,
                                             gate: gate, metrics: metrics, loadSeconds: seconds,
                                             memoryBytes: runtime.constantBytes + activationBytes)
                } catch {
                    throw ServingError.loadFailed(model: model, version: version, reason: "config does not fit the model: \(Self.describe(error))")
                }
            }
            result = .success(served)
        } catch let error as ServingError {
            result = .failure(error)
        } catch {
            result = .failure(.loadFailed(model: model, version: version, reason: Self.describe(error)))
        }
        if let budget, case .success(let served) = result {
            let loaded = loadedBytesInRegistry() + reservedMemoryBytes - reservation
            if loaded + served.memoryBytes > budget {
                return .failure(.memoryBudgetExceeded(model: model, version: version, needed: served.memoryBytes, loaded: loaded, budget: budget))
            }
        }
        // Clients see paths relative to the repository, never where it lives on the server.
        if case .failure(.loadFailed(let model, let version, let reason)) = result {
            let relative = reason.replacingOccurrences(of: repositoryPath + "/", with: "").replacingOccurrences(of: repositoryPath, with: ".")
            return .failure(.loadFailed(model: model, version: version, reason: relative))
        }
        return result
    }

    /// Runs `runtime` once on zeros at batch 1 (and, when executions may hold more rows, once at batch 2) and returns
    /// its activation bytes at `rows` rows, extrapolated linearly from the two measurements.
    private static func warmUp(_ runtime: any ModelRuntime, model: String, version: Int, rows: Int, gate: ComputeGate) throws -> Int {
        gate.acquire()
        defer { gate.release() }
        do {
            let one = try runtime.peakActivationBytes(warmUpFeeds(runtime.inputs))
            guard rows > 1 else { return one }
            let two = try runtime.peakActivationBytes(warmUpFeeds(runtime.inputs, batchRows: 2))
            return one + (rows - 1) * max(0, two - one)
        } catch {
            throw ServingError.loadFailed(model: model, version: version, reason: "warm-up run failed: \(describe(error))")
        }
    }

    /// Each other model's cascade target: from the config it is loading with, else from its highest READY version's.
    private func cascadeTargets(excluding model: String) -> [String: String] {
        var targets: [String: String] = [:]
        for (name, record) in models where name != model {
            let loading = record.versions.values.contains { $0.loadingToken != nil }
            let live = loading ? record.config : record.versions.values.compactMap(\.served).max { $0.version < $1.version }?.config
            if let target = live?.cascade?.model { targets[name] = target }
        }
        return targets
    }

    /// Bytes held by every loaded version in the registry.
    private func loadedBytesInRegistry() -> Int {
        models.values.reduce(0) { $0 + $1.versions.values.reduce(0) { $0 + ($1.served?.memoryBytes ?? 0) } }
    }

    /// Zero tensors of each input's declared shape, dynamic dimensions set to 1 (a dynamic batch dimension to `batchRows`).
    static func warmUpFeeds(_ inputs: [TensorSpec], batchRows: Int = 1) -> [String: Tensor] {
        var feeds: [String: Tensor] = [:]
        for spec in inputs {
            let shape = spec.shape.enumerated().map { axis, dimension in dimension.value ?? (axis == 0 ? batchRows : 1) }
            if spec.dtype == .string {
                feeds[spec.name] = Tensor(shape: shape, strings: Array(repeating: [], count: Tensor.elementCount(shape)))
            } else {
                feeds[spec.name] = Tensor(dtype: spec.dtype, shape: shape)
            }
        }
        return feeds
    }

    private static func describe(_ error: Error) -> String {
        if let serving = error as? ServingError { return serving.description }
        return String(describing: error)
    }

    private func forget(_ model: String) {
        if models.removeValue(forKey: model) != nil { logger(.info, "model '\(model)' removed from the repository") }
        publish(model)
    }

    // MARK: - Publishing

    private func publish(_ model: String) {
        guard let record = models[model] else {
            routes.withLock { _ = $0.removeValue(forKey: model) }
            routesWritten.withLock { $0 &+= 1 }
            for version in publishedVersions.removeValue(forKey: model) ?? [] { removeStateSeries(model, version) }
            return
        }
        var versions: [Int: (state: ModelState, reason: String?, served: ServedVersion?)] = [:]
        var entries: [ModelIndexEntry] = []
        let traffic = ModelTraffic.effective(config: record.config.traffic, override: record.trafficOverride)
        for (version, slot) in record.versions.sorted(by: { $0.key < $1.key }) {
            versions[version] = (slot.state, slot.reason, slot.served)
            entries.append(ModelIndexEntry(name: model, version: version, state: slot.state, reason: slot.reason,
                                           memoryBytes: slot.served?.memoryBytes, traffic: traffic))
        }
        var defaultVersion: ServedVersion?
        if let pinned = record.pinned, let served = record.versions[pinned]?.served {
            defaultVersion = served
        } else if let best = record.versions.filter({ $0.value.served != nil }).keys.max() {
            defaultVersion = record.versions[best]?.served
        }
        var reason = "no version is ready"
        if let configError = record.configError {
            reason = configError
        } else if record.unloaded {
            reason = "unloaded"
        } else if record.versions.isEmpty {
            reason = "no versions in the repository (expected \(model)/<version>/\(ModelRepository.modelFileName))"
        } else if let newest = record.versions.keys.max(), let slot = record.versions[newest] {
            reason = "version \(newest) is \(slot.state.rawValue)" + (slot.reason.map { ": \($0)" } ?? "")
        }
        if record.versions.isEmpty {
            entries.append(ModelIndexEntry(name: model, version: nil, state: .unavailable, reason: reason, traffic: traffic))
        }
        let pinned = record.pinned.flatMap { record.versions[$0]?.served != nil ? $0 : nil }
        let trafficState = TrafficState(pinned: pinned, traffic: traffic, ready: record.versions.compactMapValues(\.served))
        let route = Route(defaultVersion: defaultVersion, versions: versions, reason: reason, entries: entries, unloaded: record.unloaded,
                          traffic: trafficState)
        routes.withLock { $0[model] = route }
        routesWritten.withLock { $0 &+= 1 }

        if let metrics {
            let current = Set(record.versions.keys)
            for version in publishedVersions[model, default: []].subtracting(current) { removeStateSeries(model, version) }
            publishedVersions[model] = current
            for (version, slot) in record.versions {
                for state in ModelState.allCases {
                    metrics.gauge("osprey_model_state", help: "1 for the current state of each model version.",
                                  labels: ["model": model, "version": String(version), "state": state.rawValue])
                        .set(slot.state == state ? 1 : 0)
                }
                let labels = ["model": model, "version": String(version)]
                if let served = slot.served {
                    metrics.gauge("osprey_model_memory_bytes", help: "Bytes a loaded version holds (what --max-model-memory bounds).",
                                  labels: labels).set(Double(served.memoryBytes))
                } else {
                    metrics.remove("osprey_model_memory_bytes", labels: labels)
                }
            }
        }
    }

    private func removeStateSeries(_ model: String, _ version: Int) {
        for state in ModelState.allCases {
            metrics?.remove("osprey_model_state", labels: ["model": model, "version": String(version), "state": state.rawValue])
        }
        metrics?.remove("osprey_model_memory_bytes", labels: ["model": model, "version": String(version)])
    }

    // MARK: - Per-model serialization

    private func lock(_ model: String) async {
        if busyModels.contains(model) {
            // Ownership is handed over by `unlock`, so nothing to re-check here.
            await withCheckedContinuation { lockWaiters[model, default: []].append($0) }
        } else {
            busyModels.insert(model)
        }
    }

    private func unlock(_ model: String) {
        if var waiters = lockWaiters[model], !waiters.isEmpty {
            let next = waiters.removeFirst()
            lockWaiters[model] = waiters.isEmpty ? nil : waiters
            next.resume()
        } else {
            busyModels.remove(model)
        }
    }
}
