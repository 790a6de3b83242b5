import Glibc
import Tensor

/// Tensors whose bytes live in a file beside the model (`data_location: EXTERNAL`).
enum ExternalData {
    /// Reads `byteCount` bytes described by `entries` (`location`, `offset`, `length`; `checksum` ignored).
    static func load(entries: [(key: String, value: String)], directory: String?, dtype: DType, shape: [Int], byteCount: Int) throws -> Tensor {
        var location: String?
        var offset = 0
        var length: Int?
        for (key, value) in entries {
            switch key {
            case "location": location = value
            case "offset":
                guard let number = Int(value), number >= 0 else { throw ONNXError(.externalData, "invalid external data offset '\(value)'") }
                offset = number
            case "length":
                guard let number = Int(value), number >= 0 else { throw ONNXError(.externalData, "invalid external data length '\(value)'") }
                length = number
            default: break
            }
        }
        guard let location, !location.isEmpty else { throw ONNXError(.externalData, "external data has no 'location'") }
        guard let directory else {
            throw ONNXError(.externalData, "refers to external file '\(location)' but the model was not loaded from a directory")
        }
        let path = try resolve(location, in: directory)
        if let length, length != byteCount {
            throw ONNXError(.externalData, "\(dtype)\(shape) needs \(byteCount) bytes, external data length is \(length)")
        }

        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw ONNXError(.externalData, "cannot open external file '\(location)': \(errnoText())") }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw ONNXError(.externalData, "cannot stat '\(location)': \(errnoText())") }
        let fileSize = Int(info.st_size)
        // Check against the real file size before allocating: offsets and lengths come from untrusted bytes.
        guard offset <= fileSize, byteCount <= fileSize - offset else {
            throw ONNXError(.externalData, "needs bytes \(offset)..<\(offset)+\(byteCount) of '\(location)', which has \(fileSize)")
        }
        if length == nil, fileSize - offset != byteCount {
            // Without a length the rest of the file is the tensor (as in onnx's loader); a mismatch means the wrong file.
            throw ONNXError(.externalData, "\(dtype)\(shape) needs \(byteCount) bytes, '\(location)' has \(fileSize - offset) after offset \(offset)")
        }
        var tensor = Tensor(uninitialized: dtype, shape: shape)
        try tensor.withUnsafeMutableBytes { buffer in
            var done = 0
            while done < byteCount {
                let got = pread(fd, buffer.baseAddress! + done, byteCount - done, off_t(offset + done))
                if got < 0 && errno == EINTR { continue }
                guard got > 0 else { throw ONNXError(.externalData, "reading '\(location)' failed: \(got == 0 ? "unexpected end of file" : errnoText())") }
                done += got
            }
        }
        return tensor
    }

    /// Joins `location` to `directory`, refusing absolute paths and anything that leaves the directory.
    static func resolve(_ location: String, in directory: String) throws -> String {
        guard !location.hasPrefix("/"), !location.hasPrefix("\\"), !location.contains("\0"),
              !(location.count >= 2 && location.dropFirst().first == ":") else {
            throw ONNXError(.externalData, "external data location '\(location)' must be relative to the model's directory")
        }
        var parts: [Substring] = []
        for part in location.split(separator: "/", omittingEmptySubsequences: true) where part != "." {
            if part == ".." {
                guard !parts.isEmpty else {
                    throw ONNXError(.externalData, "external data location '\(location)' escapes the model's directory")
                }
                parts.removeLast()
            } else {
                parts.append(part)
            }
        }
        guard !parts.isEmpty else { throw ONNXError(.externalData, "external data location '\(location)' names no file") }
        let base = directory.isEmpty ? "." : directory
        let path = base + "/" + parts.joined(separator: "/")
        // Symbolic links may still point outside: compare the resolved paths.
        if let realBase = realPath(base), let realFile = realPath(path), !(realFile.hasPrefix(realBase + "/") || realBase == "/") {
            throw ONNXError(.externalData, "external data location '\(location)' resolves outside the model's directory")
        }
        return path
    }

    private static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    private static func errnoText() -> String { String(cString: strerror(errno)) }
}
