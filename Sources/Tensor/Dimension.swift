/// One dimension of a declared tensor shape: a fixed size or a named (dynamic) one.
public enum Dimension: Sendable, Hashable, CustomStringConvertible {
    /// A known size.
    case fixed(Int)
    /// A dynamic size, by its symbolic name (empty when the model gave none).
    case symbolic(String)

    /// The size when fixed, else nil.
    public var value: Int? {
        if case .fixed(let n) = self { return n }
        return nil
    }

    /// The size, or -1 when dynamic (the KServe V2 convention).
    public var sizeOrMinusOne: Int { value ?? -1 }

    /// `224` or the symbolic name (`?` when unnamed).
    public var description: String {
        switch self {
        case .fixed(let n): return String(n)
        case .symbolic(let name): return name.isEmpty ? "?" : name
        }
    }
}
