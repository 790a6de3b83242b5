import Glibc

/// Unbuffered writes to stdout and stderr, so lines reach a pipe at once (stdio would block-buffer them).
enum Console {
    /// Writes `text` and a newline to stdout.
    static func out(_ text: String) { write(fd: 1, text + "\n") }
    /// Writes `text` and a newline to stderr.
    static func err(_ text: String) { write(fd: 2, text + "\n") }

    private static func write(fd: Int32, _ text: String) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno == EINTR { continue }
                return
            }
            bytes = bytes.dropFirst(written)
        }
    }
}
