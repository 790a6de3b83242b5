import API
import Foundation
import Imaging
import ONNX
import Serving
import Tensor

/// The preprocessing `classify` applies to a model with one image-shaped input, as `inspect` shows it.
struct ImageInputDescription {
    /// The input images feed.
    let input: String
    /// Where the settings came from.
    let source: String
    /// The effective settings.
    let config: PreprocessConfig

    /// Nil when no single input looks like an image; a `config.json` beside the version directory
    /// (`<model>/config.json` for `<model>/<version>/model.onnx`) overrides the input-shape defaults.
    init?(model: Model, path: String) throws {
        let initialized = Set(model.graph.initializers.map(\.name))
        let candidates = model.graph.inputs.filter { !initialized.contains($0.name) }.compactMap { info -> (String, PreprocessConfig)? in
            guard let dtype = info.elementType, let shape = info.shape,
                  let defaults = PreprocessConfig.defaults(inputShape: shape, dtype: dtype) else { return nil }
            return (info.name, defaults)
        }
        guard candidates.count == 1, let (name, defaults) = candidates.first else { return nil }
        input = name
        let versionDirectory = URL(fileURLWithPath: path).deletingLastPathComponent()
        let configURL = versionDirectory.deletingLastPathComponent().appendingPathComponent("config.json")
        if Int(versionDirectory.lastPathComponent) != nil, let bytes = FileManager.default.contents(atPath: configURL.path),
           let section = try ModelConfig(json: [UInt8](bytes)).imageJSONObject {
            config = try PreprocessConfig(json: section, defaults: defaults)
            source = "\(configURL.path) over input-shape defaults"
        } else {
            config = defaults
            source = "defaults from the input shape"
        }
    }

    /// The text report's lines.
    var textLines: [String] {
        let c = config
        var lines = ["image preprocessing (\(source)):"]
        lines.append("  input \(input): \(c.width)x\(c.height) \(c.layout.rawValue) \(c.channelOrder.rawValue) \(c.dtype)")
        let resize = c.resizeMode == .centerCrop ? "center_crop from shorter side \(c.resizeShorterSide ?? min(c.width, c.height))" : c.resizeMode.rawValue
        lines.append("  resize: \(resize), \(c.interpolation.rawValue)\(c.antialias ? " (antialiased)" : "")")
        lines.append("  normalize: (pixel * \(c.scale) - mean \(c.mean)) / std \(c.std)")
        lines.append("  background: \(c.background)")
        return lines
    }

    /// The JSON report's `image_preprocessing` object: the config keys plus where they came from.
    var json: JSONValue {
        guard case .object(let object) = config.jsonValue(input: input) else { return .null }
        var members = Dictionary(uniqueKeysWithValues: object.members.map { ($0.key, $0.value) })
        members["source"] = .string(source)
        return InspectFormat.sortedObject(members)
    }
}
