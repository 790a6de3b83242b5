import ONNX

/// `osprey inspect MODEL.onnx [--json]`: what a model needs and contains, without compiling it.
let inspectCommand = Command(
    name: "inspect",
    summary: "Show an ONNX model's inputs, outputs, operators and parameters",
    help: """
        Usage: osprey inspect MODEL.onnx [--json]

        Prints the producer, IR version, opsets, inputs and outputs (dtype and shape; dynamic
        dimensions by name, or -1 when unnamed), an operator histogram, the parameter count and
        size, and metadata_props.

        Options:
          --json    Print one JSON object (sorted keys) instead of text
        """
) { args in
    let arguments = try Arguments(args, valueFlags: [], booleanFlags: ["json"])
    guard arguments.positionals.count == 1, let path = arguments.positionals.first else {
        throw UsageError(description: "expected exactly one model path, got \(arguments.positionals.count)")
    }
    let summary = ModelSummary(try Model(contentsOf: path))
    Console.out(arguments.flag("json") ? InspectFormat.json(summary, path: path) : InspectFormat.text(summary, path: path))
    return 0
}

/// Renders a `ModelSummary` as text or JSON.
enum InspectFormat {
    /// Human-readable report.
    static func text(_ s: ModelSummary, path: String) -> String {
        var lines = ["model: \(path)"]
        let producer = [s.producerName, s.producerVersion].filter { !$0.isEmpty }.joined(separator: " ")
        lines.append("producer: \(producer.isEmpty ? "(unknown)" : producer)")
        lines.append("ir version: \(s.irVersion)")
        if !s.graphName.isEmpty { lines.append("graph: \(s.graphName)") }
        if !s.domain.isEmpty || s.modelVersion != 0 { lines.append("domain: \(s.domain.isEmpty ? "(none)" : s.domain), model version \(s.modelVersion)") }
        lines.append("opsets: " + s.opsets.map { "\($0.domain) \($0.version)" }.joined(separator: ", "))
        for (title, values) in [("inputs", s.inputs), ("outputs", s.outputs)] {
            lines.append("\(title):")
            let width = values.map(\.name.count).max() ?? 0
            for value in values {
                let shape = value.shape.map { "[" + $0.map(\.description).joined(separator: ", ") + "]" } ?? "(unknown rank)"
                lines.append("  \(pad(value.name, width))  \(pad(value.type, 8))  \(shape)")
            }
        }
        let nodes = s.operatorCounts.reduce(0) { $0 + $1.count }
        lines.append("operators (\(nodes) nodes):")
        let width = s.operatorCounts.map(\.op.count).max() ?? 0
        lines += s.operatorCounts.map { "  \(pad($0.op, width))  \($0.count)" }
        lines.append("parameters: \(s.parameterCount) (\(s.parameterBytes) bytes, \(humanBytes(s.parameterBytes)))")
        if !s.metadata.isEmpty {
            lines.append("metadata:")
            lines += s.metadata.map { "  \($0.key): \($0.value)" }
        }
        return lines.joined(separator: "\n")
    }

    /// One JSON object with sorted keys.
    static func json(_ s: ModelSummary, path: String) -> String {
        func values(_ list: [ModelSummary.Value]) -> JSON {
            .array(list.map { value in
                let shape: JSON = value.shape.map { dims in
                    .array(dims.map { entry -> JSON in
                        switch entry {
                        case .size(let n): return .int(n)
                        case .name(let name): return .string(name)
                        }
                    })
                } ?? .null
                return .object(["name": .string(value.name), "datatype": .string(value.type), "shape": shape])
            })
        }
        var metadata: [String: JSON] = [:]
        for (key, value) in s.metadata { metadata[key] = .string(value) }
        var opsets: [String: JSON] = [:]
        for (domain, version) in s.opsets { opsets[domain] = .int(Int(version)) }
        let root: JSON = .object([
            "model": .string(path),
            "producer": .object(["name": .string(s.producerName), "version": .string(s.producerVersion)]),
            "ir_version": .int(Int(s.irVersion)),
            "graph": .string(s.graphName),
            "domain": .string(s.domain),
            "model_version": .int(Int(s.modelVersion)),
            "opsets": .object(opsets),
            "inputs": values(s.inputs),
            "outputs": values(s.outputs),
            "operators": .array(s.operatorCounts.map { .object(["op_type": .string($0.op), "count": .int($0.count)]) }),
            "parameters": .object(["count": .int(s.parameterCount), "bytes": .int(s.parameterBytes)]),
            "metadata": .object(metadata),
        ])
        var out = ""
        root.write(to: &out)
        return out
    }

    private static func pad(_ text: String, _ width: Int) -> String {
        text + String(repeating: " ", count: max(0, width - text.count))
    }

    private static func humanBytes(_ bytes: Int) -> String {
        let units = ["B", "KiB", "MiB", "GiB"]
        var value = Double(bytes)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 { value /= 1024; unit += 1 }
        return unit == 0 ? "\(bytes) B" : "\((value * 10).rounded() / 10) \(units[unit])"
    }
}

/// The few JSON shapes `inspect --json` emits; objects print with sorted keys.
private indirect enum JSON {
    case null
    case int(Int)
    case string(String)
    case array([JSON])
    case object([String: JSON])

    func write(to out: inout String) {
        switch self {
        case .null: out += "null"
        case .int(let n): out += String(n)
        case .string(let s): JSON.writeString(s, to: &out)
        case .array(let items):
            out += "["
            for (index, item) in items.enumerated() {
                if index > 0 { out += "," }
                item.write(to: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (index, key) in members.keys.sorted().enumerated() {
                if index > 0 { out += "," }
                JSON.writeString(key, to: &out)
                out += ":"
                members[key]!.write(to: &out)
            }
            out += "}"
        }
    }

    private static func writeString(_ s: String, to out: inout String) {
        out += "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }
}
