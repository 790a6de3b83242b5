import Glibc

/// A command-line usage error: printed with the command's help, exit status 2.
struct UsageError: Error, CustomStringConvertible {
    /// What was wrong with the arguments.
    let description: String
}

/// Parsed flags and positionals for one subcommand, with `OSPREY_*` environment fallbacks.
///
/// Accepts `--name value`, `--name=value`, repeated flags and bare boolean flags; `--` ends flags.
struct Arguments {
    private var values: [String: [String]] = [:]
    private var booleans: Set<String> = []
    /// Positional arguments in order.
    private(set) var positionals: [String] = []

    /// Parses `args`; `booleanFlags` take no value, every other flag takes exactly one.
    init(_ args: ArraySlice<String>, valueFlags: Set<String>, booleanFlags: Set<String>) throws {
        var rest = args
        while let arg = rest.popFirst() {
            if arg == "--" { positionals.append(contentsOf: rest); break }
            guard arg.hasPrefix("--"), arg.count > 2 else { positionals.append(arg); continue }
            var name = String(arg.dropFirst(2))
            var inline: String?
            if let eq = name.firstIndex(of: "=") {
                inline = String(name[name.index(after: eq)...])
                name = String(name[..<eq])
            }
            if booleanFlags.contains(name) {
                guard inline == nil || inline == "true" || inline == "false" else {
                    throw UsageError(description: "--\(name) takes no value")
                }
                if inline != "false" { booleans.insert(name) }
            } else if valueFlags.contains(name) {
                guard let value = inline ?? rest.popFirst() else { throw UsageError(description: "--\(name) needs a value") }
                values[name, default: []].append(value)
            } else {
                throw UsageError(description: "unknown flag --\(name)")
            }
        }
    }

    /// The last value of `--name`, else `OSPREY_NAME` from the environment.
    func string(_ name: String) -> String? {
        if let value = values[name]?.last { return value }
        let key = "OSPREY_" + String(name.uppercased().map { $0 == "-" ? "_" : $0 })
        guard let env = getenv(key) else { return nil }
        return String(cString: env)
    }

    /// Every value given for a repeatable flag.
    func all(_ name: String) -> [String] { values[name] ?? [] }

    /// True when the boolean flag was given (or its `OSPREY_*` variable is `1`/`true`).
    func flag(_ name: String) -> Bool {
        if booleans.contains(name) { return true }
        guard let env = string(name) else { return false }
        return env == "1" || env.lowercased() == "true"
    }

    /// An integer flag with a default; rejects non-integers and values below `minimum`.
    func int(_ name: String, default value: Int, minimum: Int = Int.min) throws -> Int {
        guard let text = string(name) else { return value }
        guard let number = Int(text), number >= minimum else {
            throw UsageError(description: "--\(name) expects an integer >= \(minimum), got '\(text)'")
        }
        return number
    }

    /// A duration flag in seconds (`30`, `1.5`, `250ms`, `2s`, `1m`, `1h`).
    func seconds(_ name: String, default value: Double) throws -> Double {
        guard let text = string(name) else { return value }
        let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600)]
        for (suffix, scale) in units where text.hasSuffix(suffix) {
            if let number = Double(text.dropLast(suffix.count)), number >= 0 { return number * scale }
        }
        guard let number = Double(text), number >= 0 else {
            throw UsageError(description: "--\(name) expects a duration like 30, 250ms or 2s, got '\(text)'")
        }
        return number
    }

    /// A byte-size flag (`65536`, `64KiB`, `16MiB`, `1GiB`, also `K`/`M`/`G`).
    func bytes(_ name: String, default value: Int) throws -> Int {
        guard let text = string(name) else { return value }
        let units: [(String, Int)] = [("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30), ("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30)]
        for (suffix, scale) in units where text.hasSuffix(suffix) {
            if let number = Int(text.dropLast(suffix.count)), number >= 0 { return number * scale }
        }
        guard let number = Int(text), number >= 0 else {
            throw UsageError(description: "--\(name) expects a size like 65536 or 16MiB, got '\(text)'")
        }
        return number
    }
}
