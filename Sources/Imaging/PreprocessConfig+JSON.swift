import Foundation
import Tensor

extension PreprocessConfig {
    /// The keys accepted in a config.json `image` section.
    public static let jsonKeys: Set<String> = [
        "width", "height", "resize_mode", "resize_size", "interpolation", "antialias", "channel_order", "layout",
        "scale", "mean", "std", "dtype", "background", "pad_value",
    ]

    /// Parses a config.json `image` section (already decoded by JSONSerialization) over `defaults`:
    /// keys present override, absent keys keep the default. Unknown keys and wrong types throw `.invalidConfig`.
    public init(json: [String: Any], defaults: PreprocessConfig) throws {
        self = defaults
        for key in json.keys.sorted() where !PreprocessConfig.jsonKeys.contains(key) {
            throw ImagingError.invalidConfig("unknown key \"\(key)\"; expected one of \(PreprocessConfig.jsonKeys.sorted().joined(separator: ", "))")
        }
        let reader = JSONFieldReader(object: json)
        if let v = try reader.int("width") { width = v }
        if let v = try reader.int("height") { height = v }
        if let v = try reader.enumeration("resize_mode", ResizeMode.self) { resizeMode = v }
        if json["resize_size"] is NSNull { resizeShorterSide = nil } else if let v = try reader.int("resize_size") { resizeShorterSide = v }
        if let v = try reader.enumeration("interpolation", Interpolation.self) { interpolation = v }
        if let v = try reader.bool("antialias") { antialias = v }
        if let v = try reader.enumeration("channel_order", ChannelOrder.self) { channelOrder = v }
        if let v = try reader.enumeration("layout", Layout.self) { layout = v }
        if let v = try reader.float("scale") { scale = v }
        if let v = try reader.floats("mean") { mean = v }
        if let v = try reader.floats("std") { std = v }
        if let name = try reader.string("dtype") {
            switch name {
            case "float32", "FP32", "fp32": dtype = .float32
            case "uint8", "UINT8": dtype = .uint8
            default: throw ImagingError.invalidConfig("dtype: expected \"float32\" or \"uint8\", got \"\(name)\"")
            }
        }
        if let v = try reader.color("background") { background = v }
        if let v = try reader.int("pad_value") {
            guard (0...255).contains(v) else { throw ImagingError.invalidConfig("pad_value: expected 0...255, got \(v)") }
            padValue = UInt8(v)
        }
        // A gray model given 3-value defaults keeps working: collapse to one value when all are equal.
        if channelOrder == .gray && json["mean"] == nil && mean.count == 3 && Set(mean).count == 1 { mean = [mean[0]] }
        if channelOrder == .gray && json["std"] == nil && std.count == 3 && Set(std).count == 1 { std = [std[0]] }
        try validate()
    }

    /// Parses a JSON object's bytes (the `image` section alone) over `defaults`.
    public init(jsonData: Data, defaults: PreprocessConfig) throws {
        let parsed: Any
        do { parsed = try JSONSerialization.jsonObject(with: jsonData) } catch {
            throw ImagingError.invalidConfig("image section is not valid JSON: \(error.localizedDescription)")
        }
        guard let object = parsed as? [String: Any] else {
            throw ImagingError.invalidConfig("image section: expected a JSON object, got \(JSONFieldReader.typeName(parsed))")
        }
        try self.init(json: object, defaults: defaults)
    }
}

/// Typed reads of JSONSerialization values with errors that name the key, the expected and the actual type.
struct JSONFieldReader {
    let object: [String: Any]

    static func typeName(_ value: Any) -> String {
        if value is NSNull { return "null" }
        if isBool(value) { return "boolean" }
        if value is NSNumber { return "number" }
        if value is String { return "string" }
        if value is [Any] { return "array" }
        if value is [String: Any] { return "object" }
        return String(describing: type(of: value))
    }

    /// JSONSerialization hands booleans back as NSNumber on some platforms; tell them apart by type identity.
    static func isBool(_ value: Any) -> Bool {
        if type(of: value) == Bool.self { return true }
        if let n = value as? NSNumber, type(of: value) != Int.self, type(of: value) != Double.self {
            return String(cString: n.objCType) == "c"
        }
        return false
    }

    private func mismatch(_ key: String, _ expected: String, _ value: Any) -> ImagingError {
        .invalidConfig("\(key): expected \(expected), got \(JSONFieldReader.typeName(value)) \(String(describing: value).prefix(40))")
    }

    static func number(_ value: Any) -> Double? {
        if isBool(value) { return nil }
        if let n = value as? NSNumber { return n.doubleValue }
        if let i = value as? Int { return Double(i) }
        if let d = value as? Double { return d }
        return nil
    }

    func int(_ key: String) throws -> Int? {
        guard let value = object[key] else { return nil }
        guard let d = JSONFieldReader.number(value), d.rounded() == d, abs(d) < 1e9 else { throw mismatch(key, "an integer", value) }
        return Int(d)
    }

    func float(_ key: String) throws -> Float? {
        guard let value = object[key] else { return nil }
        guard let d = JSONFieldReader.number(value) else { throw mismatch(key, "a number", value) }
        return Float(d)
    }

    func bool(_ key: String) throws -> Bool? {
        guard let value = object[key] else { return nil }
        guard JSONFieldReader.isBool(value), let b = value as? Bool else { throw mismatch(key, "true or false", value) }
        return b
    }

    func string(_ key: String) throws -> String? {
        guard let value = object[key] else { return nil }
        guard let s = value as? String else { throw mismatch(key, "a string", value) }
        return s
    }

    func floats(_ key: String) throws -> [Float]? {
        guard let value = object[key] else { return nil }
        if let d = JSONFieldReader.number(value) { return [Float(d)] }
        guard let array = value as? [Any], !array.isEmpty else { throw mismatch(key, "a number or a non-empty array of numbers", value) }
        return try array.map { element in
            guard let d = JSONFieldReader.number(element) else { throw mismatch(key, "an array of numbers", value) }
            return Float(d)
        }
    }

    func enumeration<E: RawRepresentable>(_ key: String, _ type: E.Type) throws -> E? where E.RawValue == String {
        guard let name = try string(key) else { return nil }
        guard let v = E(rawValue: name) else {
            throw ImagingError.invalidConfig("\(key): expected one of \(JSONFieldReader.cases(of: type)), got \"\(name)\"")
        }
        return v
    }

    static func cases<E: RawRepresentable>(of type: E.Type) -> String where E.RawValue == String {
        let names: [String]
        switch type {
        case is PreprocessConfig.ResizeMode.Type: names = ["stretch", "center_crop", "letterbox"]
        case is PreprocessConfig.Interpolation.Type: names = ["bilinear", "nearest", "area"]
        case is PreprocessConfig.ChannelOrder.Type: names = ["rgb", "bgr", "gray"]
        case is PreprocessConfig.Layout.Type: names = ["nchw", "nhwc"]
        default: names = []
        }
        return names.map { "\"\($0)\"" }.joined(separator: ", ")
    }

    /// `[r, g, b]` (0...255) or `"#rrggbb"`.
    func color(_ key: String) throws -> [UInt8]? {
        guard let value = object[key] else { return nil }
        if let s = value as? String {
            let hex = s.hasPrefix("#") ? String(s.dropFirst()) : s
            guard hex.count == 6, let v = UInt32(hex, radix: 16) else { throw mismatch(key, "\"#rrggbb\" or [r, g, b]", value) }
            return [UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)]
        }
        guard let array = value as? [Any], array.count == 3 else { throw mismatch(key, "\"#rrggbb\" or [r, g, b]", value) }
        return try array.map { element in
            guard let d = JSONFieldReader.number(element), d.rounded() == d, (0...255).contains(d) else {
                throw mismatch(key, "three integers 0...255", value)
            }
            return UInt8(d)
        }
    }
}
