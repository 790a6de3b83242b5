import Tensor

/// Decodes one JSON scalar straight into a tensor element, no intermediate values.
protocol JSONTensorElement {
    associatedtype Stored
    static var datatype: V2Datatype { get }
    static func read(_ reader: inout JSONReader) throws -> Stored
}

extension JSONReader {
    /// Reads a flat or nested array of `datatype` elements (row-major) into a new tensor of `shape`.
    ///
    /// Numbers are converted as they are scanned and written into the tensor's storage; the element
    /// count must equal the shape's, and extra elements fail before anything is written out of bounds.
    mutating func readTensorData(_ datatype: V2Datatype, shape: [Int], count: Int) throws -> Tensor {
        switch datatype {
        case .fp32: return try readNumeric(FP32Element.self, shape: shape, count: count)
        case .fp64: return try readNumeric(FP64Element.self, shape: shape, count: count)
        case .fp16: return try readNumeric(FP16Element.self, shape: shape, count: count)
        case .bf16: return try readNumeric(BF16Element.self, shape: shape, count: count)
        case .int8: return try readNumeric(IntegerElement<Int8>.self, shape: shape, count: count)
        case .int16: return try readNumeric(IntegerElement<Int16>.self, shape: shape, count: count)
        case .int32: return try readNumeric(IntegerElement<Int32>.self, shape: shape, count: count)
        case .int64: return try readNumeric(IntegerElement<Int64>.self, shape: shape, count: count)
        case .uint8: return try readNumeric(IntegerElement<UInt8>.self, shape: shape, count: count)
        case .uint16: return try readNumeric(IntegerElement<UInt16>.self, shape: shape, count: count)
        case .uint32: return try readNumeric(IntegerElement<UInt32>.self, shape: shape, count: count)
        case .uint64: return try readNumeric(IntegerElement<UInt64>.self, shape: shape, count: count)
        case .bool: return try readNumeric(BoolElement.self, shape: shape, count: count)
        case .bytes:
            var strings: [[UInt8]] = []
            strings.reserveCapacity(count)
            let start = index
            try readNestedStrings(into: &strings, capacity: count)
            guard strings.count == count else { throw countMismatch(got: strings.count, expected: count, shape: shape, at: start) }
            return Tensor(shape: shape, strings: strings)
        }
    }

    private mutating func readNumeric<E: JSONTensorElement>(_ element: E.Type, shape: [Int], count: Int) throws -> Tensor {
        var tensor = Tensor(uninitialized: E.datatype.dtype, shape: shape)
        let start = index
        var written = 0
        try tensor.withUnsafeMutableBytes { raw in
            let base = raw.baseAddress!.assumingMemoryBound(to: E.Stored.self)
            try readNested(E.self, into: base, capacity: count, written: &written)
        }
        guard written == count else { throw countMismatch(got: written, expected: count, shape: shape, at: start) }
        return tensor
    }

    private func countMismatch(got: Int, expected: Int, shape: [Int], at offset: Int) -> JSONError {
        JSONError(.typeMismatch, at: offset, "data has \(got) elements, shape \(shape) needs \(expected)")
    }

    private mutating func readNested<E: JSONTensorElement>(_ element: E.Type, into base: UnsafeMutablePointer<E.Stored>,
                                                           capacity: Int, written: inout Int) throws {
        try beginArray("an array of \(E.datatype.rawValue) data")
        while try nextElement() {
            if bytes[index] == UInt8(ascii: "[") {
                try readNested(E.self, into: base, capacity: capacity, written: &written)
                continue
            }
            guard written < capacity else {
                throw JSONError(.typeMismatch, at: index, "data has more than the \(capacity) elements the shape allows")
            }
            do {
                (base + written).initialize(to: try E.read(&self))
            } catch var error as JSONError {
                error.message = "element \(written): " + error.message
                throw error
            }
            written += 1
        }
    }

    private mutating func readNestedStrings(into strings: inout [[UInt8]], capacity: Int) throws {
        try beginArray("an array of BYTES data")
        while try nextElement() {
            let b = bytes[index]
            if b == UInt8(ascii: "[") {
                try readNestedStrings(into: &strings, capacity: capacity)
                continue
            }
            guard strings.count < capacity else {
                throw JSONError(.typeMismatch, at: index, "data has more than the \(capacity) elements the shape allows")
            }
            guard b == UInt8(ascii: "\"") else {
                throw JSONError(.typeMismatch, at: index, "element \(strings.count): expected a BYTES string, got \(describe(b))")
            }
            strings.append(try readStringBytes())
        }
    }

    /// Scans a number for a tensor element, naming the datatype when something else is there.
    @inline(__always)
    mutating func scanElementNumber(_ datatype: V2Datatype) throws -> JSONNumberToken {
        let b = bytes[index]
        guard b == UInt8(ascii: "-") || (b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9")) else {
            throw JSONError(.typeMismatch, at: index, "expected a \(datatype.rawValue) number, got \(describe(b))")
        }
        return try scanNumber()
    }
}

extension JSONReader {
    /// Scans one floating-point element and converts it with `convert`, which returns nil when out of range.
    @inline(__always)
    mutating func readFloatingElement<T>(_ datatype: V2Datatype, _ convert: (JSONNumberToken, UnsafeBufferPointer<UInt8>) -> T?) throws -> T {
        let token = try scanElementNumber(datatype)
        guard let value = convert(token, bytes) else {
            throw JSONError(.typeMismatch, at: token.start, "\(text(of: token)) is out of range for \(datatype.rawValue)")
        }
        return value
    }
}

struct FP32Element: JSONTensorElement {
    static var datatype: V2Datatype { .fp32 }
    @inline(__always)
    static func read(_ reader: inout JSONReader) throws -> Float {
        try reader.readFloatingElement(.fp32) { token, bytes in token.floatValue(bytes) }
    }
}

struct FP64Element: JSONTensorElement {
    static var datatype: V2Datatype { .fp64 }
    @inline(__always)
    static func read(_ reader: inout JSONReader) throws -> Double {
        try reader.readFloatingElement(.fp64) { token, bytes in token.doubleValue(bytes) }
    }
}

struct FP16Element: JSONTensorElement {
    static var datatype: V2Datatype { .fp16 }
    static func read(_ reader: inout JSONReader) throws -> Float16 {
        try reader.readFloatingElement(.fp16) { token, bytes in token.doubleValue(bytes).map { Float16($0) }.flatMap { $0.isFinite ? $0 : nil } }
    }
}

struct BF16Element: JSONTensorElement {
    static var datatype: V2Datatype { .bf16 }
    static func read(_ reader: inout JSONReader) throws -> UInt16 {
        try reader.readFloatingElement(.bf16) { token, bytes in
            token.doubleValue(bytes).map { bfloat16Bits(Float($0)) }.flatMap { $0 & 0x7F80 != 0x7F80 ? $0 : nil }
        }
    }
}

/// Rounds a Float to bfloat16 (nearest, ties to even), returning the raw bits.
func bfloat16Bits(_ value: Float) -> UInt16 {
    if value.isNaN { return 0x7FC0 }
    let bits = value.bitPattern
    return UInt16(truncatingIfNeeded: (bits &+ 0x7FFF &+ ((bits >> 16) & 1)) >> 16)
}

struct IntegerElement<T: FixedWidthInteger>: JSONTensorElement {
    static var datatype: V2Datatype {
        switch (T.isSigned, T.bitWidth) {
        case (true, 8): return .int8
        case (true, 16): return .int16
        case (true, 32): return .int32
        case (true, _): return .int64
        case (false, 8): return .uint8
        case (false, 16): return .uint16
        case (false, 32): return .uint32
        default: return .uint64
        }
    }

    @inline(__always)
    static func read(_ reader: inout JSONReader) throws -> T {
        let token = try reader.scanElementNumber(datatype)
        guard token.isInteger else {
            throw JSONError(.typeMismatch, at: token.start, "expected an integer for \(datatype.rawValue), got \(reader.text(of: token))")
        }
        let value: T? = T.isSigned ? token.int64Value.flatMap { T(exactly: $0) } : token.uint64Value.flatMap { T(exactly: $0) }
        guard let value else {
            throw JSONError(.typeMismatch, at: token.start, "\(reader.text(of: token)) is out of range for \(datatype.rawValue)")
        }
        return value
    }
}

struct BoolElement: JSONTensorElement {
    static var datatype: V2Datatype { .bool }
    static func read(_ reader: inout JSONReader) throws -> UInt8 {
        let b = reader.bytes[reader.index]
        guard b == UInt8(ascii: "t") || b == UInt8(ascii: "f") else {
            throw JSONError(.typeMismatch, at: reader.index, "expected true or false for BOOL, got \(reader.describe(b))")
        }
        return try reader.readBool() ? 1 : 0
    }
}
