import Foundation

/// Everything Serving can refuse or fail with; no HTTP status here (the API layer maps each case).
public enum ServingError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No model of that name in the repository.
    case modelNotFound(model: String)
    /// The model exists but has no such version.
    case versionNotFound(model: String, version: Int)
    /// The model or version exists but is not READY (loading, unloaded, failed); `version` nil means "any".
    case notReady(model: String, version: Int?, reason: String)
    /// A request's tensors do not match the model; the message says what was expected and what arrived.
    case invalidInput(String)
    /// The version's queue is at `max_queue_size`: try again later.
    case queueFull(model: String, version: Int, capacity: Int)
    /// The request waited longer than its timeout and was not executed.
    case timeout(model: String, version: Int, microseconds: Int)
    /// A config.json key is wrong.
    case invalidConfig(key: String, expected: String, got: String)
    /// A version could not be loaded or warmed up.
    case loadFailed(model: String, version: Int, reason: String)
    /// An uploaded file's SHA-256 differs from the one announced.
    case digestMismatch(expected: String, got: String)
    /// A model name or version outside the allowed syntax.
    case invalidName(String)
    /// The model ran but failed or returned outputs that do not fit the request.
    case executionFailed(model: String, version: Int, reason: String)
    /// The version is shutting down and accepts no new requests.
    case shuttingDown(model: String, version: Int)
    /// A repository file could not be read or written.
    case io(String)
    /// An upload names a version that is already on disk and did not ask to replace it.
    case versionExists(model: String, version: Int)
    /// The repository cannot be written (read-only mount, permissions); serving is unaffected.
    case repositoryReadOnly(String)
    /// The repository's file system is full (or over quota); nothing was stored.
    case insufficientStorage(String)
    /// Loading the version would take the loaded versions past `--max-model-memory`; nothing changed.
    case memoryBudgetExceeded(model: String, version: Int, needed: Int, loaded: Int, budget: Int)
    /// A load found no version of the model on disk; what serves keeps serving.
    case noVersionOnDisk(model: String, serving: Int?)

    /// A human-readable message naming what was wrong.
    public var description: String {
        switch self {
        case .modelNotFound(let model): return "model '\(model)' not found"
        case .versionNotFound(let model, let version): return "model '\(model)' has no version \(version)"
        case .notReady(let model, let version, let reason):
            let what = version.map { "model '\(model)' version \($0)" } ?? "model '\(model)'"
            return "\(what) is not ready: \(reason)"
        case .invalidInput(let message): return message
        case .queueFull(let model, let version, let capacity):
            return "model '\(model)' version \(version) queue is full (\(capacity) requests)"
        case .timeout(let model, let version, let microseconds):
            return "request to model '\(model)' version \(version) timed out after \(microseconds) us in queue"
        case .invalidConfig(let key, let expected, let got): return "config key '\(key)': expected \(expected), got \(got)"
        case .loadFailed(let model, let version, let reason): return "model '\(model)' version \(version) failed to load: \(reason)"
        case .digestMismatch(let expected, let got): return "sha256 mismatch: expected \(expected), got \(got)"
        case .invalidName(let message): return message
        case .executionFailed(let model, let version, let reason): return "model '\(model)' version \(version) failed: \(reason)"
        case .shuttingDown(let model, let version): return "model '\(model)' version \(version) is shutting down"
        case .io(let message): return message
        case .versionExists(let model, let version):
            return "model '\(model)' version \(version) already exists; PUT with ?replace=true to replace it (the current file is kept until the new one is READY)"
        case .repositoryReadOnly(let message): return message
        case .insufficientStorage(let message): return message
        case .memoryBudgetExceeded(let model, let version, let needed, let loaded, let budget):
            return "model '\(model)' version \(version) needs \(formatBytes(needed)); loaded versions hold \(formatBytes(loaded)) of the "
                + "\(formatBytes(budget)) --max-model-memory budget, so the load was refused and the served versions keep serving"
        case .noVersionOnDisk(let model, let serving):
            return "model '\(model)' has no version on disk (expected \(model)/<version>/\(ModelRepository.modelFileName))"
                + (serving.map { "; version \($0) keeps serving from memory" } ?? "")
        }
    }
}

/// `52428800 bytes (50.0 MiB)`: exact for logs and tests, readable for people.
func formatBytes(_ bytes: Int) -> String {
    let mib = Double(bytes) / 1_048_576
    return "\(bytes) bytes (\(String(format: "%.1f", mib)) MiB)"
}
