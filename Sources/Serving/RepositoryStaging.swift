import Foundation
import Glibc

/// An uploaded version written under `<root>/.staging/` and not yet in place.
struct StagedVersion: Sendable {
    /// Model name.
    let model: String
    /// Version number.
    let version: Int
    /// `<root>/.staging/<model>.<version>.<pid>.<random>`: unique per upload, so replicas sharing the repository never collide.
    let directory: String
    /// The staged model file.
    var modelFile: String { directory + "/" + ModelRepository.modelFileName }
}

/// Uploads as transactions: written and compiled under `.staging/` (same file system, so the final rename is atomic),
/// then renamed into place. Names starting with "." are never models, so the poller and other replicas ignore staging.
extension ModelRepository {
    /// The staging directory's name under the root.
    static let stagingDirectoryName = ".staging"

    /// `<root>/.staging`.
    var stagingRoot: String { root + "/" + Self.stagingDirectoryName }

    /// True when `<model>/<version>/model.onnx` exists.
    func versionExists(model: String, version: Int) -> Bool {
        var info = stat()
        return stat(modelFile(model, version: version), &info) == 0
    }

    /// Writes `bytes` as a staged version (flushed to disk); on any failure nothing is left behind.
    func stage(model: String, version: Int, bytes: [UInt8]) throws -> StagedVersion {
        let what = "upload of model '\(model)' version \(version)"
        guard singleModel == nil else {
            throw ServingError.repositoryReadOnly("the single-model layout (--model-name) takes no uploads: serve a repository of <model>/<version>/ folders to upload versions; serving continues unchanged")
        }
        if mkdir(stagingRoot, 0o755) != 0 && errno != EEXIST {
            throw Self.fileError(errno, "create the staging directory for the \(what)")
        }
        let name = "\(model).\(version).\(getpid()).\(UInt32.random(in: 0...UInt32.max))"
        let staged = StagedVersion(model: model, version: version, directory: stagingRoot + "/" + name)
        guard mkdir(staged.directory, 0o755) == 0 else { throw Self.fileError(errno, "stage the \(what)") }
        do {
            try Self.writeFile(staged.modelFile, bytes: bytes, what: "model file of the \(what)")
        } catch {
            discard(staged)
            throw error
        }
        return staged
    }

    /// Renames a staged version into place: a new version directory, or (`replacing`) the model file of an existing one,
    /// which readers see switch atomically from the old file to the new. Removes what is left of the staging entry.
    func install(_ staged: StagedVersion, replacing: Bool) throws {
        let model = staged.model, version = staged.version
        let what = "model '\(model)' version \(version)"
        if mkdir(modelDirectory(model), 0o755) != 0 && errno != EEXIST {
            throw Self.fileError(errno, "create the directory of model '\(model)'")
        }
        let versionDirectory = modelDirectory(model) + "/" + String(version)
        var info = stat()
        let directoryExists = stat(versionDirectory, &info) == 0
        if replacing || directoryExists {
            // The version directory stays (it may hold other files); only model.onnx is swapped.
            if !directoryExists && mkdir(versionDirectory, 0o755) != 0 && errno != EEXIST {
                throw Self.fileError(errno, "create the directory of \(what)")
            }
            if replacing {
                guard rename(staged.modelFile, modelFile(model, version: version)) == 0 else {
                    throw Self.fileError(errno, "move the staged \(what) into place")
                }
            } else if link(staged.modelFile, modelFile(model, version: version)) != 0 {
                // link, unlike rename, never replaces: a file that appeared meanwhile (another replica) wins.
                let code = errno
                if code == EEXIST { throw ServingError.versionExists(model: model, version: version) }
                throw Self.fileError(code, "move the staged \(what) into place")
            }
            discard(staged)
        } else if rename(staged.directory, versionDirectory) != 0 {
            let code = errno
            // Another writer (a second replica) created the version meanwhile.
            if code == EEXIST || code == ENOTEMPTY { throw ServingError.versionExists(model: model, version: version) }
            throw Self.fileError(code, "move the staged \(what) into place")
        }
        syncDirectory(modelDirectory(model))
        syncDirectory(versionDirectory)
    }

    /// Removes a staging entry and everything in it (best effort: it is debris either way).
    func discard(_ staged: StagedVersion) {
        removeTree(staged.directory)
    }

    /// Removes what interrupted uploads left: staging entries and `.model.onnx.<pid>.<rand>.tmp` / `.config.json.<pid>.<rand>.tmp`
    /// files older than `age` seconds. Nothing else is ever deleted. Returns the removed paths relative to the root.
    func removeStaleUploads(olderThan age: Double, now: Double = Date().timeIntervalSince1970) -> [String] {
        var removed: [String] = []
        func isStale(_ path: String) -> Bool {
            var info = stat()
            guard lstat(path, &info) == 0 else { return false }
            return now - (Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9) >= age
        }
        let fm = FileManager.default
        for entry in (try? fm.contentsOfDirectory(atPath: stagingRoot)) ?? [] where isStale(stagingRoot + "/" + entry) {
            removeTree(stagingRoot + "/" + entry)
            removed.append(Self.stagingDirectoryName + "/" + entry)
        }
        guard let models = try? listModels().valid else { return removed }
        for model in models {
            let directory = modelDirectory(model)
            var candidates: [String] = []
            for entry in (try? fm.contentsOfDirectory(atPath: directory)) ?? [] {
                if Self.isInterruptedWrite(entry, of: "config.json") { candidates.append(entry) }
                guard Self.version(fromDirectoryName: entry) != nil else { continue }
                for inner in (try? fm.contentsOfDirectory(atPath: directory + "/" + entry)) ?? []
                where Self.isInterruptedWrite(inner, of: Self.modelFileName) {
                    candidates.append(entry + "/" + inner)
                }
            }
            for candidate in candidates where isStale(directory + "/" + candidate) && unlink(directory + "/" + candidate) == 0 {
                removed.append(model + "/" + candidate)
            }
        }
        return removed
    }

    /// True for `.<name>.<digits>.<digits>.tmp`, the temporary name `writeAtomically` uses.
    static func isInterruptedWrite(_ entry: String, of name: String) -> Bool {
        let prefix = "." + name + ".", suffix = ".tmp"
        guard entry.hasPrefix(prefix), entry.hasSuffix(suffix), entry.count > prefix.count + suffix.count else { return false }
        let middle = entry.dropFirst(prefix.count).dropLast(suffix.count).split(separator: ".", omittingEmptySubsequences: false)
        return middle.count == 2 && middle.allSatisfy { !$0.isEmpty && $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }
    }

    /// Deletes `path` recursively without following symbolic links out of it.
    private func removeTree(_ path: String) {
        try? FileManager.default.removeItem(atPath: path)
    }

    /// Flushes a directory's entries, so a rename survives a crash.
    private func syncDirectory(_ path: String) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        fsync(fd)
        close(fd)
    }
}
