import Foundation
import Glibc

/// `process_*` series read from /proc (Linux); absent elsewhere.
enum ProcessMetrics {
    /// Appends resident memory, CPU time, open fds and start time, when readable.
    static func write(into out: inout String) {
        guard let stat = readFile("/proc/self/stat"), let close = stat.lastIndex(of: ")") else { return }
        // Fields after the parenthesised command name start at field 3 (state).
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 21, let utime = Double(fields[11]), let stime = Double(fields[12]),
              let startTicks = Double(fields[19]), let virtualBytes = Double(fields[20]), let rssPages = Double(fields[21]) else { return }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        let pageSize = Double(sysconf(Int32(_SC_PAGESIZE)))
        write(&out, "process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", "counter", (utime + stime) / ticks)
        write(&out, "process_resident_memory_bytes", "Resident memory size in bytes.", "gauge", rssPages * pageSize)
        write(&out, "process_virtual_memory_bytes", "Virtual memory size in bytes.", "gauge", virtualBytes)
        if let fds = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") {
            // The directory listing itself holds one descriptor while it is read.
            write(&out, "process_open_fds", "Number of open file descriptors.", "gauge", Double(max(0, fds.count - 1)))
        }
        var limit = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 {
            write(&out, "process_max_fds", "Maximum number of open file descriptors.", "gauge", Double(limit.rlim_cur))
        }
        if let bootLine = readFile("/proc/stat")?.split(separator: "\n").first(where: { $0.hasPrefix("btime ") }),
           let boot = Double(bootLine.dropFirst(6).trimmingCharacters(in: .whitespaces)) {
            write(&out, "process_start_time_seconds", "Start time of the process since unix epoch in seconds.", "gauge", boot + startTicks / ticks)
        }
    }

    private static func write(_ out: inout String, _ name: String, _ help: String, _ type: String, _ value: Double) {
        out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n\(name) \(Metrics.format(value))\n"
    }

    /// Reads a /proc file with plain read(2): their reported size is 0, so size-based readers return nothing.
    private static func readFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { return nil }
        defer { _ = Glibc.close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, 4096) }
            if n <= 0 { break }
            bytes += buffer[0..<n]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
