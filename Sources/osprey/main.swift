import Glibc

/// One subcommand: its name, a one-line summary, its help text and its entry point (returns the exit status).
struct Command: Sendable {
    let name: String
    let summary: String
    let help: String
    let run: @Sendable (ArraySlice<String>) async throws -> Int32
}

let commands: [Command] = [serveCommand, inspectCommand, predictCommand, probeCommand]

let topHelp = """
    osprey: serve ONNX models over HTTP (KServe V2 / Open Inference Protocol)

    Usage: osprey <command> [options]

    Commands:
    \(commands.map { "  \($0.name + String(repeating: " ", count: max(1, 10 - $0.name.count)))\($0.summary)" }.joined(separator: "\n"))

    Run 'osprey <command> --help' for a command's options.
    """

func main() async -> Int32 {
    let args = CommandLine.arguments.dropFirst()
    guard let name = args.first, name != "--help", name != "-h", name != "help" else {
        Console.out(topHelp)
        return args.isEmpty ? 2 : 0
    }
    guard let command = commands.first(where: { $0.name == name }) else {
        Console.err("osprey: unknown command '\(name)'\n\n\(topHelp)")
        return 2
    }
    let rest = args.dropFirst()
    if rest.contains("--help") || rest.contains("-h") {
        Console.out(command.help)
        return 0
    }
    do {
        return try await command.run(rest)
    } catch let error as UsageError {
        Console.err("osprey \(name): \(error.description)\n\n\(command.help)")
        return 2
    } catch {
        Console.err("osprey \(name): \(error)")
        return 1
    }
}

exit(await main())
