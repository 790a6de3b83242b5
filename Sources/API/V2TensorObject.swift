import Tensor

/// The fields of one `{"name","shape","datatype","parameters","data"}` object (request input or response output).
struct V2TensorObject {
    var name: String
    var datatype: V2Datatype
    var shape: [Int]
    var count: Int
    var parameters: JSONObject
    /// Present when the object carried JSON `data`.
    var tensor: Tensor?
    /// Present when the object carried `parameters.binary_data_size`.
    var binaryDataSize: Int?
}

extension JSONReader {
    /// Reads one tensor object; `role` is `input` or `output` and names it in errors. JSON `data` claims its share of
    /// `budget` from the declared shape before anything is read or allocated.
    mutating func readV2TensorObject(role: String, position: Int, jsonEnd: Int, budget: inout V2DecodeBudget) throws -> V2TensorObject {
        guard try peek() == UInt8(ascii: "{") else {
            throw V2CodecError(.invalidField, "\(role) #\(position): expected an object, got \(describe(bytes[index]))")
        }
        try beginObject()
        var name: String?
        var datatype: V2Datatype?
        var shape: [Int]?
        var count = 0
        var parameters = JSONObject()
        var tensor: Tensor?
        var deferredData: Range<Int>?
        var label: String { name.map { "\(role) '\($0)'" } ?? "\(role) #\(position)" }

        func checkCount(_ available: Int) throws {
            // Every JSON element takes at least one byte: refuse to allocate for shapes the text cannot fill.
            if count > available {
                throw V2CodecError(.shapeMismatch, "\(label): shape \(shape!) needs \(count) elements, but its data holds at most \(available)")
            }
        }

        var seenKeys = Set<String>()
        while let key = try nextKey() {
            guard seenKeys.insert(key).inserted else {
                throw V2CodecError(.invalidJSON, "\(label): duplicate key \"\(key)\"")
            }
            switch key {
            case "name":
                guard try peek() == UInt8(ascii: "\"") else { throw fieldType(label, "name", "a string") }
                name = try readString()
            case "datatype":
                guard try peek() == UInt8(ascii: "\"") else { throw fieldType(label, "datatype", "a string") }
                let text = try readString()
                guard let dt = V2Datatype(rawValue: text) else {
                    throw V2CodecError(.datatypeMismatch, "\(label): unknown datatype '\(text)', expected one of \(V2Datatype.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                datatype = dt
            case "shape":
                let (s, n) = try readShape(label)
                shape = s
                count = n
            case "parameters":
                guard try peek() == UInt8(ascii: "{") else { throw fieldType(label, "parameters", "an object") }
                guard case .object(let object) = try readValue() else { fatalError("object expected after '{'") }
                parameters = object
            case "data":
                if let datatype, let shape {
                    let start = index
                    try checkCount(jsonEnd - start)
                    try budget.claim(datatype, count: count, shape: shape, label: label)
                    do {
                        tensor = try readTensorData(datatype, shape: shape, count: count)
                    } catch let error as JSONError {
                        throw V2CodecError(error.kind == .typeMismatch ? .shapeMismatch : .invalidJSON, "\(label): data: \(error)")
                    }
                    if datatype == .bytes, let tensor { try budget.claimStrings(tensor, label: label) }
                } else {
                    _ = try peek()
                    let start = index
                    try skipValue()
                    deferredData = start..<index
                }
            default:
                try skipValue()
            }
        }
        guard let name else { throw V2CodecError(.missingField, "\(label): missing 'name'") }
        guard let datatype else { throw V2CodecError(.missingField, "\(label): missing 'datatype'") }
        guard let shape else { throw V2CodecError(.missingField, "\(label): missing 'shape'") }
        if let range = deferredData {
            // `data` came before `shape`/`datatype`: parse the remembered span now that both are known.
            try checkCount(range.count)
            try budget.claim(datatype, count: count, shape: shape, label: label)
            var sub = JSONReader(UnsafeBufferPointer(rebasing: bytes[..<range.upperBound]), startingAt: range.lowerBound, maxDepth: maxDepth)
            do {
                tensor = try sub.readTensorData(datatype, shape: shape, count: count)
            } catch let error as JSONError {
                throw V2CodecError(error.kind == .typeMismatch ? .shapeMismatch : .invalidJSON, "\(label): data: \(error)")
            }
            if datatype == .bytes, let tensor { try budget.claimStrings(tensor, label: label) }
        }
        let binaryDataSize = try parameters.integer("binary_data_size", in: 0...Int64(Int.max), expected: "a non-negative integer",
                                                    label: label)
        if parameters["shared_memory_region"] != nil {
            throw V2CodecError(.unsupported, "\(label): shared memory is not supported; send the data in the body")
        }
        if tensor != nil && binaryDataSize != nil {
            throw V2CodecError(.invalidField, "\(label): has both 'data' and binary_data_size")
        }
        return V2TensorObject(name: name, datatype: datatype, shape: shape, count: count, parameters: parameters,
                              tensor: tensor, binaryDataSize: binaryDataSize)
    }

    /// Reads a shape: non-negative integers whose product fits in Int.
    private mutating func readShape(_ label: String) throws -> ([Int], Int) {
        guard try peek() == UInt8(ascii: "[") else { throw fieldType(label, "shape", "an array of integers") }
        try beginArray()
        var shape: [Int] = []
        var count = 1
        while try nextElement() {
            let b = bytes[index]
            guard b == UInt8(ascii: "-") || (b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9")) else {
                throw fieldType(label, "shape", "an array of integers")
            }
            let token = try scanNumber()
            guard token.isInteger, let v = token.int64Value else {
                throw V2CodecError(.invalidField, "\(label): shape dimension \(text(of: token)) is not an integer")
            }
            guard v >= 0 else {
                throw V2CodecError(.invalidField, "\(label): shape dimension \(v) is negative")
            }
            guard shape.count < 32 else { throw V2CodecError(.invalidField, "\(label): shape has more than 32 dimensions") }
            let (product, overflow) = count.multipliedReportingOverflow(by: Int(v))
            guard !overflow else { throw V2CodecError(.invalidField, "\(label): shape overflows the element count") }
            count = product
            shape.append(Int(v))
        }
        return (shape, count)
    }

    private func fieldType(_ label: String, _ field: String, _ expected: String) -> V2CodecError {
        V2CodecError(.invalidField, "\(label): '\(field)' must be \(expected)")
    }
}

/// Keeps a request body's array, hence its buffer, alive for the tensors that view it. The array is a `let` of a
/// class and never mutated, so its buffer does not move.
private final class BodyOwner: @unchecked Sendable {
    let bytes: [UInt8]
    init(_ bytes: [UInt8]) { self.bytes = bytes }
}

/// `bytes` (shared, not copied) as tensor storage that decoded tensors may view instead of copying; nil when empty.
func borrowedStorage(of bytes: [UInt8]) -> TensorStorage? {
    let owner = BodyOwner(bytes)
    return owner.bytes.withUnsafeBytes { $0.baseAddress }.map {
        TensorStorage(borrowing: UnsafeMutableRawPointer(mutating: $0), byteCount: bytes.count, owner: owner)
    }
}

/// Reads one tensor's binary extension bytes (little-endian, BYTES length-prefixed) into a new tensor; when `bytes`
/// lie in `body` and are aligned for their elements, a numeric tensor is a view of the body instead of a copy.
func decodeBinaryTensor(_ bytes: UnsafeBufferPointer<UInt8>, datatype: V2Datatype, shape: [Int], count: Int, label: String,
                        within body: TensorStorage? = nil) throws -> Tensor {
    if datatype == .bytes {
        var strings: [[UInt8]] = []
        strings.reserveCapacity(min(count, bytes.count / 4))
        var i = 0
        while i < bytes.count {
            guard bytes.count - i >= 4 else {
                throw V2CodecError(.binaryData, "\(label): BYTES element \(strings.count) has a truncated 4-byte length")
            }
            let length = Int(UInt32(bytes[i]) | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2]) << 16 | UInt32(bytes[i + 3]) << 24)
            i += 4
            guard length <= bytes.count - i else {
                throw V2CodecError(.binaryData, "\(label): BYTES element \(strings.count) declares \(length) bytes, only \(bytes.count - i) remain")
            }
            guard strings.count < count else {
                throw V2CodecError(.shapeMismatch, "\(label): binary data has more than the \(count) BYTES elements shape \(shape) needs")
            }
            strings.append(Array(UnsafeBufferPointer(rebasing: bytes[i..<(i + length)])))
            i += length
        }
        guard strings.count == count else {
            throw V2CodecError(.shapeMismatch, "\(label): binary data has \(strings.count) BYTES elements, shape \(shape) needs \(count)")
        }
        return Tensor(shape: shape, strings: strings)
    }
    let (expected, overflow) = count.multipliedReportingOverflow(by: datatype.byteSize)
    guard !overflow, bytes.count == expected else {
        throw V2CodecError(.shapeMismatch, "\(label): binary_data_size is \(bytes.count) bytes, shape \(shape) of \(datatype.rawValue) needs \(overflow ? "more" : String(expected))")
    }
    if datatype == .bool, bytes.contains(where: { $0 > 1 }) {
        throw V2CodecError(.invalidField, "\(label): BOOL binary data must be bytes 0 or 1")
    }
    if expected > 0, let body, let start = bytes.baseAddress, Int(bitPattern: start) % datatype.byteSize == 0 {
        let offset = UnsafeRawPointer(start) - UnsafeRawPointer(body.pointer)
        if offset >= 0, offset + expected <= body.byteCount {
            // A view at an offset: a writer copies it first (copy-on-write), so the body is never written.
            return Tensor(dtype: datatype.dtype, shape: shape, storage: body, byteOffset: offset)
        }
    }
    var tensor = Tensor(uninitialized: datatype.dtype, shape: shape)
    if expected > 0 {
        tensor.withUnsafeMutableBytes { $0.baseAddress!.copyMemory(from: bytes.baseAddress!, byteCount: expected) }
    }
    return tensor
}

#if _endian(big)
#error("the V2 binary extension is little-endian; Osprey copies tensor bytes without swapping")
#endif
