/// A dense, row-major (C order) n-dimensional array with shared, copy-on-write storage.
///
/// Every tensor is contiguous; `byteOffset` lets row windows (`rows(_:)`) share their parent's bytes.
public struct Tensor: Sendable {
    /// Element type.
    public let dtype: DType
    /// Dimensions, outermost first. A scalar has an empty shape.
    public private(set) var shape: [Int]
    /// Backing bytes (shared until written).
    public private(set) var storage: TensorStorage
    /// Offset of element 0 inside `storage`, in bytes.
    public private(set) var byteOffset: Int
    /// Elements of a `.string` tensor (raw bytes each); empty for numeric tensors.
    public private(set) var strings: [[UInt8]]
    /// Set for the ONNX values that are not tensors (a sequence, an optional without an element); such a value has
    /// shape [0] and no bytes, so a kernel that wrongly receives one sees an empty tensor.
    public private(set) var container: TensorContainer? = nil

    /// A zero-filled tensor.
    public init(dtype: DType, shape: [Int]) {
        precondition(shape.allSatisfy { $0 >= 0 }, "negative dimension in \(shape)")
        self.dtype = dtype
        self.shape = shape
        let count = Tensor.elementCount(shape)
        storage = TensorStorage(byteCount: count * dtype.byteSize)
        byteOffset = 0
        strings = dtype == .string ? Array(repeating: [], count: count) : []
    }

    /// A tensor whose bytes the caller fills before reading (faster than zeroing for large outputs).
    public init(uninitialized dtype: DType, shape: [Int]) {
        precondition(dtype != .string, "string tensors hold their elements out of line")
        self.dtype = dtype
        self.shape = shape
        storage = TensorStorage(uninitializedByteCount: Tensor.elementCount(shape) * dtype.byteSize)
        byteOffset = 0
        strings = []
    }

    /// Wraps existing storage; `storage` must hold `byteOffset + count * dtype.byteSize` bytes.
    public init(dtype: DType, shape: [Int], storage: TensorStorage, byteOffset: Int = 0) {
        precondition(byteOffset + Tensor.elementCount(shape) * dtype.byteSize <= storage.byteCount,
                     "storage too small for shape \(shape)")
        self.dtype = dtype
        self.shape = shape
        self.storage = storage
        self.byteOffset = byteOffset
        strings = []
    }

    /// A tensor holding `scalars` in row-major order.
    public init<T: TensorScalar>(shape: [Int], scalars: [T]) {
        precondition(Tensor.elementCount(shape) == scalars.count,
                     "shape \(shape) needs \(Tensor.elementCount(shape)) elements, got \(scalars.count)")
        self.init(uninitialized: T.dtype, shape: shape)
        scalars.withUnsafeBytes { src in
            if src.count > 0 { storage.pointer.copyMemory(from: src.baseAddress!, byteCount: src.count) }
        }
    }

    /// A rank-0 tensor.
    public init<T: TensorScalar>(scalar: T) {
        self.init(shape: [], scalars: [scalar])
    }

    /// A `.string` tensor (ONNX STRING, KServe BYTES) whose elements are raw byte strings.
    public init(shape: [Int], strings: [[UInt8]]) {
        precondition(Tensor.elementCount(shape) == strings.count, "shape \(shape) needs \(Tensor.elementCount(shape)) strings, got \(strings.count)")
        dtype = .string
        self.shape = shape
        storage = TensorStorage(byteCount: 0)
        byteOffset = 0
        self.strings = strings
    }

    /// An ONNX sequence of tensors whose elements have type `elementType`.
    public init(sequence elements: [Tensor], elementType: DType) {
        self.init(dtype: elementType, shape: [0])
        container = .sequence(elements)
    }

    /// An ONNX optional holding no element, of element type `elementType`.
    public init(emptyOptionalOf elementType: DType) {
        self.init(dtype: elementType, shape: [0])
        container = .emptyOptional
    }

    /// The elements when this value is a sequence, else nil.
    public var sequenceElements: [Tensor]? {
        if case .sequence(let elements)? = container { return elements }
        return nil
    }

    /// Number of dimensions.
    public var rank: Int { shape.count }
    /// Number of elements (1 for a scalar).
    public var count: Int { Tensor.elementCount(shape) }
    /// Number of bytes of element data (0 for strings).
    public var byteCount: Int { count * dtype.byteSize }
    /// Row-major strides in elements.
    public var strides: [Int] { Tensor.contiguousStrides(shape) }

    /// Product of the dimensions.
    public static func elementCount(_ shape: [Int]) -> Int { shape.reduce(1, *) }

    /// Row-major strides, in elements, of a contiguous tensor of this shape.
    public static func contiguousStrides(_ shape: [Int]) -> [Int] {
        var strides = Array(repeating: 1, count: shape.count)
        var running = 1
        for axis in stride(from: shape.count - 1, through: 0, by: -1) {
            strides[axis] = running
            running *= shape[axis]
        }
        return strides
    }

    /// Read-only access to the element bytes.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(start: storage.pointer + byteOffset, count: byteCount))
    }

    /// Read-only typed access; `T` must match `dtype`.
    public func withUnsafeBufferPointer<T: TensorScalar, R>(of type: T.Type, _ body: (UnsafeBufferPointer<T>) throws -> R) rethrows -> R {
        precondition(T.dtype == dtype, "tensor is \(dtype), accessed as \(T.dtype)")
        let base = (storage.pointer + byteOffset).assumingMemoryBound(to: T.self)
        return try body(UnsafeBufferPointer(start: base, count: count))
    }

    /// Write access to the element bytes; copies first if the storage is shared.
    public mutating func withUnsafeMutableBytes<R>(_ body: (UnsafeMutableRawBufferPointer) throws -> R) rethrows -> R {
        makeUnique()
        return try body(UnsafeMutableRawBufferPointer(start: storage.pointer + byteOffset, count: byteCount))
    }

    /// Typed write access; `T` must match `dtype`. Copies first if the storage is shared.
    public mutating func withUnsafeMutableBufferPointer<T: TensorScalar, R>(of type: T.Type, _ body: (UnsafeMutableBufferPointer<T>) throws -> R) rethrows -> R {
        precondition(T.dtype == dtype, "tensor is \(dtype), accessed as \(T.dtype)")
        makeUnique()
        let base = (storage.pointer + byteOffset).assumingMemoryBound(to: T.self)
        return try body(UnsafeMutableBufferPointer(start: base, count: count))
    }

    /// The elements as a Swift array; `T` must match `dtype`.
    public func scalars<T: TensorScalar>(as type: T.Type) -> [T] {
        withUnsafeBufferPointer(of: T.self) { Array($0) }
    }

    /// Same bytes, new shape with the same element count.
    public func reshaped(_ newShape: [Int]) -> Tensor {
        precondition(Tensor.elementCount(newShape) == count, "cannot reshape \(shape) to \(newShape)")
        var copy = self
        copy.shape = newShape
        return copy
    }

    /// Rows `range` of the outermost axis, sharing this tensor's storage.
    public func rows(_ range: Range<Int>) -> Tensor {
        precondition(rank >= 1 && range.lowerBound >= 0 && range.upperBound <= shape[0], "rows \(range) out of \(shape)")
        var window = self
        window.shape[0] = range.count
        let rowElements = Tensor.elementCount(Array(shape.dropFirst()))
        if dtype == .string {
            window.strings = Array(strings[(range.lowerBound * rowElements)..<(range.upperBound * rowElements)])
        } else {
            window.byteOffset = byteOffset + range.lowerBound * rowElements * dtype.byteSize
        }
        return window
    }

    /// True when `concatenatingRows` can stack `parts`: at least one, each with a first axis, all of one dtype and one
    /// trailing shape (rows run apart may not be: an output whose size depends on its row's content).
    public static func stackableRows(_ parts: [Tensor]) -> Bool {
        guard let first = parts.first, first.rank >= 1 else { return false }
        return parts.allSatisfy { $0.rank == first.rank && $0.dtype == first.dtype && $0.shape.dropFirst() == first.shape.dropFirst() }
    }

    /// Named outputs of consecutive row parts stacked into one set, or nil unless every part has the same names and,
    /// per name, `rows[i]` rows (a first axis, no strings) of one dtype and trailing shape: parts of a batch run apart
    /// stack exactly, and a caller that gets nil runs the batch whole instead.
    public static func stackingRows(_ parts: [[String: Tensor]], rows: [Int]) -> [String: Tensor]? {
        guard let names = parts.first?.keys, parts.count == rows.count, parts.allSatisfy({ $0.count == names.count }) else { return nil }
        var merged: [String: Tensor] = [:]
        for name in names {
            let pieces = parts.compactMap { $0[name] }
            guard pieces.count == parts.count, stackableRows(pieces),
                  zip(pieces, rows).allSatisfy({ $0.dtype != .string && $0.shape[0] == $1 }) else { return nil }
            merged[name] = concatenatingRows(pieces)
        }
        return merged
    }

    /// Stacks tensors of equal dtype and trailing shape along the outermost axis (one batch); one part that starts its
    /// storage is returned as is (a batch of one request copies nothing; a row window is still copied out).
    public static func concatenatingRows(_ parts: [Tensor]) -> Tensor {
        precondition(!parts.isEmpty, "nothing to concatenate")
        let first = parts[0]
        if parts.count == 1 && first.rank >= 1 && first.byteOffset == 0 { return first }
        let tail = Array(first.shape.dropFirst())
        var rows = 0
        for part in parts {
            precondition(part.dtype == first.dtype && Array(part.shape.dropFirst()) == tail,
                         "cannot stack \(part.dtype)\(part.shape) onto \(first.dtype)\(first.shape)")
            rows += part.shape[0]
        }
        if first.dtype == .string {
            return Tensor(shape: [rows] + tail, strings: parts.flatMap(\.strings))
        }
        var result = Tensor(uninitialized: first.dtype, shape: [rows] + tail)
        var cursor = result.storage.pointer
        for part in parts {
            part.withUnsafeBytes { src in
                if src.count > 0 { cursor.copyMemory(from: src.baseAddress!, byteCount: src.count) }
                cursor += src.count
            }
        }
        result.byteOffset = 0
        return result
    }

    /// True when writing through `withUnsafeMutableBytes` would not copy: this tensor alone owns all of its storage.
    public mutating func ownsStorage() -> Bool {
        isKnownUniquelyReferenced(&storage) && byteOffset == 0 && storage.byteCount == byteCount
    }

    private mutating func makeUnique() {
        if ownsStorage() { return }
        let fresh = TensorStorage(uninitializedByteCount: byteCount)
        if byteCount > 0 { fresh.pointer.copyMemory(from: storage.pointer + byteOffset, byteCount: byteCount) }
        storage = fresh
        byteOffset = 0
    }
}

extension Tensor: CustomStringConvertible {
    /// `float32[1, 3, 224, 224]` (`sequence<float32>(3)` for a sequence).
    public var description: String {
        switch container {
        case .sequence(let elements)?: return "sequence<\(dtype)>(\(elements.count))"
        case .emptyOptional?: return "optional<\(dtype)>(empty)"
        case nil: return "\(dtype)\(shape)"
        }
    }
}

/// What a non-tensor ONNX value holds.
public enum TensorContainer: Sendable {
    /// A sequence of tensors (SequenceConstruct, SplitToSequence, ...).
    case sequence([Tensor])
    /// An optional without an element (Optional with no input).
    case emptyOptional
}
