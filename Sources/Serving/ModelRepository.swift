import Foundation
import Glibc

/// Size and modification time of a model file, to notice when it was replaced.
struct FileFingerprint: Sendable, Equatable {
    /// A rename-into-place gives a new inode even when size and time match.
    var inode: UInt64
    var size: Int64
    var modified: Double
}

/// What a model directory holds: config, labels and version files.
struct ModelScan: Sendable {
    /// Bytes of config.json, nil when absent.
    var configBytes: [UInt8]?
    /// Lines of labels.txt (empty when absent).
    var labels: [String]
    /// Version directories that contain model.onnx.
    var versions: [Int: FileFingerprint]
}

/// The on-disk layout `<root>/<model>/{config.json,labels.txt,<version>/model.onnx}`; all calls block (run them on a worker).
///
/// In the single-model layout (KServe's `/mnt/models`, `--model-name`) the root itself is the one model's folder:
/// its `model.onnx` (or its only `.onnx` file) is version 1, beside `config.json` and `labels.txt`; integer
/// folders under it are further versions, as in a model folder.
struct ModelRepository: Sendable {
    /// The model file name inside a version directory.
    static let modelFileName = "model.onnx"

    let root: String
    /// The one model served from the root in the single-model layout; nil for a repository of model folders.
    var singleModel: String? = nil

    /// True for names matching `[A-Za-z0-9_.-]{1,64}` other than `.` and `..` (so a name can never leave the repository).
    static func isValidModelName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard (1...64).contains(bytes.count), name != ".", name != ".." else { return false }
        return bytes.allSatisfy { c in
            (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c == 95 || c == 46 || c == 45
        }
    }

    /// Throws `.invalidName` unless `name` is a valid model name.
    static func checkModelName(_ name: String) throws {
        guard isValidModelName(name) else {
            throw ServingError.invalidName("invalid model name '\(name.prefix(80))': expected 1-64 characters of [A-Za-z0-9_.-], not '.' or '..'")
        }
    }

    /// A version directory name is a positive decimal integer in canonical form ("7", not "07").
    static func version(fromDirectoryName name: String) -> Int? {
        guard let value = Int(name), value > 0, String(value) == name else { return nil }
        return value
    }

    func modelDirectory(_ model: String) -> String { model == singleModel ? root : root + "/" + model }

    func modelFile(_ model: String, version: Int) -> String {
        let file = modelDirectory(model) + "/" + String(version) + "/" + Self.modelFileName
        if model == singleModel, version == 1, fingerprint(file) == nil, let flat = singleModelFile() { return flat }
        return file
    }

    /// The single-model layout's version-1 file at the root: `model.onnx`, else the root's only `.onnx` file
    /// (a storage initializer keeps the name the object had).
    func singleModelFile() -> String? {
        let preferred = root + "/" + Self.modelFileName
        if fingerprint(preferred) != nil { return preferred }
        let onnx = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? [])
            .filter { $0.hasSuffix(".onnx") && !$0.hasPrefix(".") && fingerprint(root + "/" + $0) != nil }
        return onnx.count == 1 ? root + "/" + onnx[0] : nil
    }

    /// Directory names under the root, split into valid model names and rejected ones.
    func listModels() throws -> (valid: [String], invalid: [String]) {
        if let single = singleModel { return ([single], []) }
        let entries: [String]
        do {
            entries = try FileManager.default.contentsOfDirectory(atPath: root)
        } catch {
            throw ServingError.io("cannot read the model repository: \(error.localizedDescription)")
        }
        var valid: [String] = []
        var invalid: [String] = []
        for entry in entries.sorted() where !entry.hasPrefix(".") && isDirectory(root + "/" + entry) {
            if Self.isValidModelName(entry) { valid.append(entry) } else { invalid.append(entry) }
        }
        return (valid, invalid)
    }

    /// The model directory's contents, or nil when it does not exist.
    func scan(model: String) throws -> ModelScan? {
        let directory = modelDirectory(model)
        guard isDirectory(directory) else { return nil }
        let fm = FileManager.default
        var scan = ModelScan(configBytes: nil, labels: [], versions: [:])
        if let data = fm.contents(atPath: directory + "/config.json") { scan.configBytes = [UInt8](data) }
        if let data = fm.contents(atPath: directory + "/labels.txt") {
            // Split bytes, not Characters: Swift treats "\r\n" as one Character.
            var lines = [UInt8](data).split(separator: 10, omittingEmptySubsequences: false)
                .map { String(decoding: $0.last == 13 ? $0.dropLast() : $0, as: UTF8.self) }
            while lines.last?.isEmpty == true { lines.removeLast() }
            scan.labels = lines
        }
        let entries = (try? fm.contentsOfDirectory(atPath: directory)) ?? []
        for entry in entries {
            guard let version = Self.version(fromDirectoryName: entry),
                  let fingerprint = fingerprint(modelFile(model, version: version)) else { continue }
            scan.versions[version] = fingerprint
        }
        if model == singleModel, scan.versions[1] == nil, let flat = singleModelFile(), let print = fingerprint(flat) {
            scan.versions[1] = print
        }
        return scan
    }

    /// Replaces `<model>/config.json` atomically (temp file, fsync, rename).
    func writeConfig(model: String, bytes: [UInt8]) throws {
        try writeAtomically(directory: modelDirectory(model), name: "config.json", bytes: bytes, what: "config.json of '\(model)'")
    }

    /// Writes `bytes` to `directory/name` so readers see the old file or the whole new one, never a partial write.
    private func writeAtomically(directory: String, name: String, bytes: [UInt8], what: String) throws {
        if mkdir(directory, 0o755) != 0 && errno != EEXIST {
            throw Self.fileError(errno, "create the directory for the \(what)")
        }
        let temporary = directory + "/.\(name).\(getpid()).\(UInt32.random(in: 0...UInt32.max)).tmp"
        try Self.writeFile(temporary, bytes: bytes, what: what)
        if rename(temporary, directory + "/" + name) != 0 {
            let failure = errno
            unlink(temporary)
            throw Self.fileError(failure, "store the \(what)")
        }
    }

    /// Creates `path` (which must not exist) holding `bytes`, flushed to disk; on failure nothing is left behind.
    static func writeFile(_ path: String, bytes: [UInt8], what: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw fileError(errno, "create the \(what)") }
        var written = 0
        var failure: Int32 = 0
        bytes.withUnsafeBytes { buffer in
            while written < buffer.count {
                let n = write(fd, buffer.baseAddress! + written, buffer.count - written)
                if n < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    return
                }
                written += n
            }
        }
        if failure == 0 && fsync(fd) != 0 { failure = errno }
        if close(fd) != 0 && failure == 0 { failure = errno }
        if failure != 0 {
            unlink(path)
            throw fileError(failure, "write the \(what) (\(bytes.count) bytes)")
        }
    }

    /// The typed error for a failed file operation; messages name the file by its role, never by its absolute path.
    static func fileError(_ code: Int32, _ action: String) -> ServingError {
        let reason = String(cString: strerror(code))
        switch code {
        case EROFS, EACCES, EPERM:
            return .repositoryReadOnly("the model repository is not writable (\(reason)): cannot \(action); serving continues unchanged")
        case ENOSPC, EDQUOT:
            return .insufficientStorage("no space left in the model repository (\(reason)): cannot \(action); nothing was stored")
        default:
            return .io("cannot \(action): \(reason)")
        }
    }

    private func isDirectory(_ path: String) -> Bool {
        var isDir: ObjCBool = false
        return FileManager.default.fileExists(atPath: path, isDirectory: &isDir) && isDir.boolValue
    }

    private func fingerprint(_ path: String) -> FileFingerprint? {
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        return FileFingerprint(inode: UInt64(info.st_ino), size: Int64(info.st_size),
                               modified: Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9)
    }
}
