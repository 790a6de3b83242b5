import API
import ONNX

/// `osprey inspect MODEL.onnx [--json]`: what a model needs and contains, without compiling it.
let inspectCommand = Command(
    name: "inspect",
    summary: "Show an ONNX model's inputs, outputs, operators and parameters",
    help: """
        Usage: osprey inspect MODEL.onnx [--json]

        Prints the producer, IR version, opsets, inputs and outputs (dtype and shape; dynamic
        dimensions by name, or -1 when unnamed), an operator histogram, the parameter count and
        size, metadata_props, and for an image model the preprocessing classify applies (config.json
        beside the version directory over defaults derived from the input shape).

        Options:
          --json    Print one JSON object (sorted keys) instead of text
        """
) { args in
    let arguments = try Arguments(args, valueFlags: [], booleanFlags: ["json"])
    guard arguments.positionals.count == 1, let path = arguments.positionals.first else {
        throw UsageError(description: "expected exactly one model path, got \(arguments.positionals.count)")
    }
    let model = try Model(contentsOf: path)
    let summary = ModelSummary(model)
    let image = try ImageInputDescription(model: model, path: path)
    Console.out(arguments.flag("json") ? InspectFormat.json(summary, image: image, path: path)
                                       : InspectFormat.text(summary, image: image, path: path))
    return 0
}

/// Renders a `ModelSummary` as text or JSON.
enum InspectFormat {
    /// Human-readable report.
    static func text(_ s: ModelSummary, image: ImageInputDescription?, path: String) -> String {
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
        if let image { lines += image.textLines }
        return lines.joined(separator: "\n")
    }

    /// One JSON object with sorted keys.
    static func json(_ s: ModelSummary, image: ImageInputDescription?, path: String) -> String {
        func values(_ list: [ModelSummary.Value]) -> JSONValue {
            .array(list.map { value in
                let shape: JSONValue = value.shape.map { dims in
                    .array(dims.map { entry -> JSONValue in
                        switch entry {
                        case .size(let n): return .integer(Int64(n))
                        case .name(let name): return .string(name)
                        }
                    })
                } ?? .null
                return .object(["datatype": .string(value.type), "name": .string(value.name), "shape": shape])
            })
        }
        let root: [String: JSONValue] = [
            "model": .string(path),
            "producer": .object(["name": .string(s.producerName), "version": .string(s.producerVersion)]),
            "ir_version": .integer(s.irVersion),
            "graph": .string(s.graphName),
            "domain": .string(s.domain),
            "model_version": .integer(s.modelVersion),
            "opsets": sortedObject(Dictionary(s.opsets.map { ($0.domain, JSONValue.integer($0.version)) }, uniquingKeysWith: { a, _ in a })),
            "inputs": values(s.inputs),
            "outputs": values(s.outputs),
            "operators": .array(s.operatorCounts.map { .object(["count": .integer(Int64($0.count)), "op_type": .string($0.op)]) }),
            "parameters": .object(["bytes": .integer(Int64(s.parameterBytes)), "count": .integer(Int64(s.parameterCount))]),
            "metadata": sortedObject(Dictionary(s.metadata.map { ($0.key, JSONValue.string($0.value)) }, uniquingKeysWith: { _, b in b })),
            "image_preprocessing": image?.json ?? .null,
        ]
        return String(decoding: sortedObject(root).serialized, as: UTF8.self)
    }

    /// A JSON object whose members are in key order, so output is stable.
    static func sortedObject(_ members: [String: JSONValue]) -> JSONValue {
        var object = JSONObject()
        for key in members.keys.sorted() { object[key] = members[key]! }
        return .object(object)
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
