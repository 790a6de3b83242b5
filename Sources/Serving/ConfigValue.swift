import Foundation

/// A parsed config.json value kept opaque, e.g. a section another module interprets (named apart from API's JSON type).
public enum ConfigValue: Sendable, Equatable {
    /// `null`.
    case null
    /// `true` / `false`.
    case bool(Bool)
    /// Any number (JSON has one numeric type).
    case number(Double)
    /// A string.
    case string(String)
    /// An array.
    case array([ConfigValue])
    /// An object.
    case object([String: ConfigValue])

    /// Parses UTF-8 JSON text.
    public init(parsing bytes: [UInt8]) throws {
        let object = try JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed])
        self = ConfigValue(foundation: object)
    }

    /// Converts a value produced by `JSONSerialization`.
    public init(foundation value: Any) {
        switch value {
        case let number as NSNumber:
            // JSONSerialization reports booleans as char-typed NSNumbers.
            if String(cString: number.objCType) == "c" {
                self = .bool(number.boolValue)
            } else {
                self = .number(number.doubleValue)
            }
        case let string as String: self = .string(string)
        case let array as [Any]: self = .array(array.map(ConfigValue.init(foundation:)))
        case let object as [String: Any]: self = .object(object.mapValues(ConfigValue.init(foundation:)))
        default: self = .null
        }
    }

    /// The equivalent Foundation object (for `JSONSerialization` or `init(json:)`-style consumers).
    public var foundationObject: Any {
        switch self {
        case .null: return NSNull()
        case .bool(let b): return b
        case .number(let n): return n
        case .string(let s): return s
        case .array(let a): return a.map(\.foundationObject)
        case .object(let o): return o.mapValues(\.foundationObject)
        }
    }

    /// The members when this is an object.
    public var objectValue: [String: ConfigValue]? {
        if case .object(let o) = self { return o }
        return nil
    }

    /// A short name of the JSON type, for "expected vs got" messages.
    public var typeName: String {
        switch self {
        case .null: return "null"
        case .bool: return "boolean"
        case .number: return "number"
        case .string: return "string"
        case .array: return "array"
        case .object: return "object"
        }
    }

    /// The value rendered briefly for error messages.
    public var brief: String {
        switch self {
        case .null: return "null"
        case .bool(let b): return String(b)
        case .number(let n): return n == n.rounded() && abs(n) < 1e15 ? String(Int64(n)) : String(n)
        case .string(let s): return "\"\(s.prefix(40))\""
        case .array(let a): return "array of \(a.count)"
        case .object: return "object"
        }
    }
}
