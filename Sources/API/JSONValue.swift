/// A parsed JSON value, for small metadata and control bodies (tensor data never goes through here).
public enum JSONValue: Sendable, Equatable {
    /// `null`.
    case null
    /// `true` / `false`.
    case bool(Bool)
    /// A number written without fraction or exponent that fits in Int64.
    case integer(Int64)
    /// Any other number.
    case double(Double)
    /// A string (escapes resolved).
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object, keys in document order.
    case object(JSONObject)

    /// Parses a whole document; `maxDepth` bounds nesting.
    public static func parse(_ bytes: [UInt8], maxDepth: Int = 64) throws -> JSONValue {
        try bytes.withUnsafeBufferPointer { buffer in
            var reader = JSONReader(buffer, maxDepth: maxDepth)
            let value = try reader.readValue()
            try reader.expectEnd()
            return value
        }
    }

    /// Parses a whole document given as text.
    public static func parse(_ text: String, maxDepth: Int = 64) throws -> JSONValue {
        try parse(Array(text.utf8), maxDepth: maxDepth)
    }

    /// The integer value of `.integer`, or of a `.double` that is integral and in range.
    public var intValue: Int64? {
        switch self {
        case .integer(let v): return v
        case .double(let d) where d.rounded() == d && abs(d) < 9.2e18: return Int64(d)
        default: return nil
        }
    }

    /// The numeric value of `.integer` or `.double`.
    public var doubleValue: Double? {
        switch self {
        case .integer(let v): return Double(v)
        case .double(let d): return d
        default: return nil
        }
    }

    /// The value of `.bool`.
    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    /// The value of `.string`.
    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    /// The elements of `.array`.
    public var arrayValue: [JSONValue]? {
        if case .array(let a) = self { return a }
        return nil
    }

    /// The members of `.object`.
    public var objectValue: JSONObject? {
        if case .object(let o) = self { return o }
        return nil
    }

    /// Member lookup on an object; nil for other kinds or a missing key.
    public subscript(key: String) -> JSONValue? {
        objectValue?[key]
    }

    /// Short kind name for error messages (`string`, `object`, ...).
    public var kindName: String {
        switch self {
        case .null: return "null"
        case .bool: return "boolean"
        case .integer, .double: return "number"
        case .string: return "string"
        case .array: return "array"
        case .object: return "object"
        }
    }

    /// Compact JSON text of this value.
    public var serialized: [UInt8] {
        var writer = JSONWriter()
        writer.value(self)
        return writer.bytes
    }
}

/// JSON object members in document order; lookups are linear because these objects are small.
public struct JSONObject: Sendable, Equatable, Sequence, ExpressibleByDictionaryLiteral {
    /// The members, in order, keys unique.
    public private(set) var members: [(key: String, value: JSONValue)]

    /// An empty object.
    public init() { members = [] }

    /// An object from a literal; later duplicates replace earlier ones.
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        members = []
        for (k, v) in elements { self[k] = v }
    }

    /// Value for `key`; setting nil removes it, setting a value replaces in place or appends.
    public subscript(key: String) -> JSONValue? {
        get { members.first { $0.key == key }?.value }
        set {
            if let i = members.firstIndex(where: { $0.key == key }) {
                if let newValue { members[i].value = newValue } else { members.remove(at: i) }
            } else if let newValue {
                members.append((key: key, value: newValue))
            }
        }
    }

    /// Number of members.
    public var count: Int { members.count }
    /// True when there are no members.
    public var isEmpty: Bool { members.isEmpty }
    /// Keys in order.
    public var keys: [String] { members.map(\.key) }

    /// Appends without checking for an existing key (the reader checks duplicates itself).
    mutating func appendUnchecked(_ key: String, _ value: JSONValue) { members.append((key: key, value: value)) }

    /// Iterates members in order.
    public func makeIterator() -> IndexingIterator<[(key: String, value: JSONValue)]> { members.makeIterator() }

    /// Order-sensitive equality of members.
    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        lhs.members.count == rhs.members.count
            && zip(lhs.members, rhs.members).allSatisfy { $0.key == $1.key && $0.value == $1.value }
    }
}
