import Glibc

/// A model file read into private anonymous pages, so the decoder can hand back each large `raw_data` range as soon as
/// it has copied it: the file and its decoded weights then never sit in memory side by side (peak RSS while loading
/// is about one copy of the weights, not two). The file is read, not mapped: a file truncated while it is being
/// decoded must not end the process with SIGBUS.
final class PageBuffer {
    /// The file's bytes (valid until the buffer is deinitialized; released ranges read as zeros).
    let bytes: UnsafeRawBufferPointer
    private let base: UnsafeMutableRawPointer
    private let mappedBytes: Int
    private static let pageSize = max(4096, sysconf(Int32(_SC_PAGESIZE)))
    /// Ranges shorter than this are left alone: releasing them would save little and cost a system call each.
    static let releaseThreshold = 256 * 1024

    /// Reads the regular file at `path` whole.
    init(readingFile path: String) throws {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw ONNXError(.io, "cannot open '\(path)': \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw ONNXError(.io, "cannot stat '\(path)': \(String(cString: strerror(errno)))") }
        guard (info.st_mode & S_IFMT) == S_IFREG else { throw ONNXError(.io, "'\(path)' is not a regular file") }
        let size = Int(info.st_size)
        mappedBytes = max(Self.pageSize, (size + Self.pageSize - 1) / Self.pageSize * Self.pageSize)
        guard let pages = mmap(nil, mappedBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), pages != MAP_FAILED else {
            throw ONNXError(.io, "cannot allocate \(size) bytes to read '\(path)': \(String(cString: strerror(errno)))")
        }
        base = pages
        var done = 0
        while done < size {
            let got = read(fd, pages + done, size - done)
            if got < 0 && errno == EINTR { continue }
            if got <= 0 {
                let reason = got == 0 ? "file shrank while reading" : String(cString: strerror(errno))
                munmap(pages, mappedBytes)
                throw ONNXError(.io, "reading '\(path)' failed: \(reason)")
            }
            done += got
        }
        bytes = UnsafeRawBufferPointer(start: pages, count: size)
    }

    /// Gives the whole pages inside `range` (a part of `bytes` the decoder will not read again) back to the system.
    func release(_ range: UnsafeRawBufferPointer) {
        guard range.count >= Self.releaseThreshold, let start = range.baseAddress else { return }
        let first = (Int(bitPattern: start) + Self.pageSize - 1) / Self.pageSize * Self.pageSize
        let end = (Int(bitPattern: start) + range.count) / Self.pageSize * Self.pageSize
        guard end > first, first >= Int(bitPattern: base), end <= Int(bitPattern: base) + mappedBytes else { return }
        _ = madvise(UnsafeMutableRawPointer(bitPattern: first), end - first, MADV_DONTNEED)
    }

    deinit { munmap(base, mappedBytes) }
}
