import Glibc
import Engine
import Infrastructure
import Tensor

/// `osprey predict`: runs a model once (or `--repeat N` times) on `.npy` inputs and writes `.npy` outputs.
let predictCommand = Command(
    name: "predict",
    summary: "Run an ONNX model on .npy inputs and write .npy outputs",
    help: """
        Usage: osprey predict MODEL.onnx --input [NAME=]FILE.npy ... (--output OUT.npy | --output-dir DIR)
                              [--repeat N] [--threads N] [--row-parts N] [--profile] [--profile-steps]

        Inputs are NumPy .npy files (v1-v3, C order, little-endian; float32, float64, float16,
        int8-64, uint8-64, bool). With one model input, NAME= may be left out.

        Options:
          --input [NAME=]FILE   Bind FILE to model input NAME (repeat for each input)
          --output FILE         Write the only output to FILE (single-output models)
          --output-dir DIR      Write every output as DIR/<name>.npy (unsafe characters become _)
          --repeat N            Run N times and print the median milliseconds per run (default 1)
          --threads N           Compute threads (default and maximum: the number of cores)
          --row-parts N         Run the batch as N row ranges, each thread running the whole model on one range
                                at a time (rows must be independent, as a served batch's are; `osprey serve` picks
                                one row per range when the weights fit in half the L3 cache, else ranges of two
                                rows or more); default 1, the batch whole, each operator split across threads
          --profile             Also print time per operator type over the runs
          --profile-steps       Also print each step's fastest time over the runs, in plan order
        """
) { args in
    let arguments = try Arguments(args, valueFlags: ["input", "output", "output-dir", "repeat", "threads", "row-parts"], booleanFlags: ["profile", "profile-steps"])
    guard arguments.positionals.count == 1, let modelPath = arguments.positionals.first else {
        throw UsageError(description: "expected exactly one model path, got \(arguments.positionals.count)")
    }
    let cores = max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
    let threads = try arguments.int("threads", default: cores, minimum: 1)
    EngineThreads.configure(threads: min(threads, cores))
    let repeats = try arguments.int("repeat", default: 1, minimum: 1)
    let outputFile = arguments.string("output"), outputDir = arguments.string("output-dir")
    guard (outputFile == nil) != (outputDir == nil) else {
        throw UsageError(description: "give exactly one of --output FILE or --output-dir DIR")
    }
    let specs = arguments.all("input")
    guard !specs.isEmpty else { throw UsageError(description: "at least one --input [NAME=]FILE.npy is required") }

    let model = try CompiledModel(contentsOf: modelPath)
    let feeds = try PredictInputs.bind(specs, to: model)
    if outputFile != nil && model.outputs.count != 1 {
        throw UsageError(description: "the model has \(model.outputs.count) outputs (\(model.outputs.map(\.name).joined(separator: ", "))); use --output-dir")
    }

    let rowParts = try arguments.int("row-parts", default: 1, minimum: 1)
    var results: [String: Tensor] = [:]
    var timings: [Double] = []
    var cpuTimings: [Double] = []
    for _ in 0..<repeats {
        let start = SystemClock.seconds(), cpuStart = PredictInputs.threadCPU()
        results = try rowParts > 1 ? model.runSplittingRows(feeds, parts: rowParts) : model.run(feeds)
        timings.append(SystemClock.seconds() - start)
        cpuTimings.append(PredictInputs.threadCPU() - cpuStart)
    }
    if repeats > 1 {
        let sorted = timings.sorted()
        let median = sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
        Console.out("median \(formatMilliseconds(median)) ms per run over \(repeats) runs (min \(formatMilliseconds(sorted[0])) ms, threads \(min(threads, cores)))")
        if min(threads, cores) == 1 { Console.out("thread CPU min \(formatMilliseconds(cpuTimings.min()!)) ms per run") }
        let pool = CompiledModel.bufferPoolStatistics
        Console.out("buffer pool: \(formatMilliseconds(Double(pool.heldBytes) / 1_048_576_000)) MiB held, peak in use \(formatMilliseconds(Double(pool.peakInUseBytes) / 1_048_576_000)) MiB, \(pool.hits) reuses, \(pool.misses) allocations")
    }
    if arguments.flag("profile") {
        let profile = try model.profile(feeds, repeats: repeats)
        let total = profile.reduce(0) { $0 + $1.seconds }
        for entry in profile {
            let share = total > 0 ? Int((entry.seconds / total * 100).rounded()) : 0
            Console.out("  \(entry.opType): \(formatMilliseconds(entry.seconds / Double(repeats))) ms per run, \(entry.nodes) nodes, \(share)%")
        }
    }
    if arguments.flag("profile-steps") {
        for step in try model.profileSteps(feeds, repeats: repeats) {
            Console.out("  \(formatMicroseconds(step.seconds)) ms \(step.opType) \(step.label)")
        }
    }
    if let outputFile {
        try PredictInputs.writeOutput(results[model.outputs[0].name]!, named: model.outputs[0].name, path: outputFile)
        Console.out("\(model.outputs[0].name): \(results[model.outputs[0].name]!) -> \(outputFile)")
    } else if let outputDir {
        if access(outputDir, F_OK) != 0 && mkdir(outputDir, 0o755) != 0 {
            throw EngineError(.io, "cannot create directory '\(outputDir)'")
        }
        for spec in model.outputs {
            let path = outputDir + "/" + PredictInputs.fileName(for: spec.name)
            try PredictInputs.writeOutput(results[spec.name]!, named: spec.name, path: path)
            Console.out("\(spec.name): \(results[spec.name]!) -> \(path)")
        }
    }
    return 0
}

/// Milliseconds with two decimals.
/// Milliseconds with three decimals: one step of a small model often takes a few microseconds.
private func formatMicroseconds(_ seconds: Double) -> String {
    let micros = Int((seconds * 1_000_000).rounded())
    let fraction = String(micros % 1000)
    return "\(micros / 1000).\(String(repeating: "0", count: 3 - fraction.count))\(fraction)"
}

private func formatMilliseconds(_ seconds: Double) -> String {
    let hundredths = Int((seconds * 100_000).rounded())
    let fraction = hundredths % 100
    return "\(hundredths / 100).\(fraction < 10 ? "0" : "")\(fraction)"
}

/// Input binding and small helpers of `osprey predict`.
enum PredictInputs {
    /// Maps `[NAME=]FILE` arguments to feeds; a bare FILE binds to the model's only input.
    static func bind(_ specs: [String], to model: CompiledModel) throws -> [String: Tensor] {
        var feeds: [String: Tensor] = [:]
        for spec in specs {
            let name: String, path: String
            if let eq = spec.firstIndex(of: "="), model.inputs.contains(where: { $0.name == String(spec[..<eq]) }) {
                name = String(spec[..<eq])
                path = String(spec[spec.index(after: eq)...])
            } else {
                guard model.inputs.count == 1 else {
                    throw UsageError(description: "the model has \(model.inputs.count) inputs (\(model.inputs.map(\.name).joined(separator: ", "))); write --input NAME=FILE")
                }
                name = model.inputs[0].name
                path = spec
            }
            guard feeds[name] == nil else { throw UsageError(description: "input '\(name)' is given twice") }
            var tensor = try NumpyFormat.read(path: path)
            // numpy defaults to float64/int64; convert to the declared dtype rather than refuse, and say so.
            if let spec = model.inputs.first(where: { $0.name == name }), spec.dtype != tensor.dtype, tensor.dtype != .string {
                Console.err("note: input '\(name)' converted from \(tensor.dtype) to \(spec.dtype)")
                tensor = try tensor.converted(to: spec.dtype)
            }
            feeds[name] = tensor
        }
        return feeds
    }

    /// Writes `tensor` as .npy; bfloat16 (which .npy has no type for) widened exactly to float32, with a note.
    static func writeOutput(_ tensor: Tensor, named name: String, path: String) throws {
        guard tensor.dtype == .bfloat16 else { return try NumpyFormat.write(tensor, path: path) }
        Console.err("note: output '\(name)' is bfloat16, written as float32 (exact)")
        try NumpyFormat.write(try tensor.converted(to: .float32), path: path)
    }

    /// `<name>.npy` with characters outside [A-Za-z0-9._-] replaced by `_` (never a path, never hidden).
    static func fileName(for output: String) -> String {
        var safe = String(output.map { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == ".") ? $0 : "_" })
        if safe.isEmpty || safe.hasPrefix(".") { safe = "_" + safe }
        return safe + ".npy"
    }

    /// CPU seconds of the calling thread (with one compute thread, the run's cost regardless of other load).
    static func threadCPU() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
