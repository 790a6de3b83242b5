/// A fixed-size, 64-byte aligned block of bytes that tensors share.
///
/// Immutable once published: writers go through `Tensor.withUnsafeMutableBytes`, which copies
/// when the block is shared, so handing a tensor to another thread is safe.
public final class TensorStorage: @unchecked Sendable {
    /// Start of the bytes.
    public let pointer: UnsafeMutableRawPointer
    /// Number of bytes.
    public let byteCount: Int
    /// Keeps a parent allocation alive when this storage is a window into it (e.g. one weights arena).
    private let owner: AnyObject?

    /// Allocates `byteCount` zeroed bytes.
    public init(byteCount: Int) {
        self.byteCount = byteCount
        // Alignment 64 so AVX-512 loads of whole rows never straddle a cache line at the start.
        pointer = UnsafeMutableRawPointer.allocate(byteCount: max(byteCount, 1), alignment: 64)
        pointer.initializeMemory(as: UInt8.self, repeating: 0, count: max(byteCount, 1))
        owner = nil
    }

    /// Allocates `byteCount` bytes without zeroing them; the caller must overwrite every byte.
    public init(uninitializedByteCount byteCount: Int) {
        self.byteCount = byteCount
        pointer = UnsafeMutableRawPointer.allocate(byteCount: max(byteCount, 1), alignment: 64)
        owner = nil
    }

    /// A window of `byteCount` bytes at `pointer` that lives as long as `owner`.
    public init(borrowing pointer: UnsafeMutableRawPointer, byteCount: Int, owner: AnyObject) {
        self.pointer = pointer
        self.byteCount = byteCount
        self.owner = owner
    }

    deinit {
        if owner == nil { pointer.deallocate() }
    }
}
