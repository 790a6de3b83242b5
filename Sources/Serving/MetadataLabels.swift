import Foundation

/// Metadata keys exporters use for class names (torchvision/timm conversions, tf2onnx, Ultralytics, custom scripts).
let labelMetadataKeys = ["labels", "classes", "class_names", "names"]

/// Class labels from model metadata: a JSON array of strings, a JSON object of index to name (Ultralytics'
/// `names`, also written with single quotes), or one label per line; empty when no key is present or it does not parse.
func metadataLabels(_ metadata: [(key: String, value: String)]) -> [String] {
    for key in labelMetadataKeys {
        guard let value = metadata.first(where: { $0.key.lowercased() == key })?.value else { continue }
        let trimmed = value.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.hasPrefix("[") || trimmed.hasPrefix("{") {
            let json = trimmed.contains("\"") ? trimmed : trimmed.replacingOccurrences(of: "'", with: "\"")
            // Python dict reprs use bare integer keys; JSON needs them quoted.
            let quotedKeys = json.replacingOccurrences(of: #"([{,]\s*)(\d+)\s*:"#, with: "$1\"$2\":", options: .regularExpression)
            guard let parsed = try? JSONSerialization.jsonObject(with: Data(quotedKeys.utf8)) else { continue }
            if let list = parsed as? [String] { return list }
            if let map = parsed as? [String: String] {
                let indexed = map.compactMap { k, v in Int(k).map { ($0, v) } }.sorted { $0.0 < $1.0 }
                guard indexed.count == map.count, indexed.enumerated().allSatisfy({ $0.offset == $0.element.0 }) else { continue }
                return indexed.map(\.1)
            }
            continue
        }
        let lines = trimmed.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
        if lines.count > 1 { return lines }
    }
    return []
}
