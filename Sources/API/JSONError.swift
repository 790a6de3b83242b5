/// A malformed or unexpected JSON document, with the byte offset where reading stopped.
public struct JSONError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What went wrong, as a closed set tests can compare.
    public enum Kind: Equatable, Sendable {
        /// The text ended inside a value.
        case unexpectedEnd
        /// A byte that cannot start or continue the expected token.
        case unexpectedCharacter
        /// A number that breaks the RFC 8259 grammar.
        case invalidNumber
        /// A bad escape, control character, lone surrogate or invalid UTF-8 inside a string.
        case invalidString
        /// Arrays/objects nested deeper than the reader allows.
        case tooDeep
        /// Non-whitespace after the top-level value.
        case trailingData
        /// The same key twice in one object.
        case duplicateKey
        /// A well-formed value of the wrong kind or range for where it appears.
        case typeMismatch
    }

    /// The kind of failure.
    public var kind: Kind
    /// Byte offset into the document where the problem was found.
    public var offset: Int
    /// Human-readable detail (expected vs got).
    public var message: String

    /// An error value.
    public init(_ kind: Kind, at offset: Int, _ message: String) {
        self.kind = kind
        self.offset = offset
        self.message = message
    }

    /// `message at byte N`.
    public var description: String { "\(message) at byte \(offset)" }
}
