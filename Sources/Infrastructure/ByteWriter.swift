import Glibc

/// A growable byte buffer over raw memory for the hot paths (response heads, access lines).
///
/// A plain struct over a pointer: appends cost a bounds check and a store, with none of Array's uniqueness
/// checks. The owner frees it explicitly; copies share the same memory, so only one copy may be used at a time.
/// Public and inlinable because HTTP's hot paths append to it from another module.
@frozen
public struct ByteWriter {
    @usableFromInline var start: UnsafeMutablePointer<UInt8>
    @usableFromInline var used = 0
    @usableFromInline var allocated: Int

    /// An empty buffer with room for `capacity` bytes.
    @inlinable public init(capacity: Int) {
        allocated = max(16, capacity)
        start = .allocate(capacity: allocated)
    }

    /// The first byte of the memory (valid until the next append that grows it).
    @inlinable public var base: UnsafeMutablePointer<UInt8> { start }
    /// Bytes written.
    @inlinable public var count: Int { used }
    /// Bytes the memory holds before it must grow.
    @inlinable public var capacity: Int { allocated }

    /// Releases the memory; the writer must not be used afterwards.
    @inlinable public func free() { start.deallocate() }

    /// The written bytes.
    @inlinable public var buffer: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: start, count: used) }

    /// The written bytes copied into an array.
    @inlinable public var array: [UInt8] { Array(UnsafeBufferPointer(start: start, count: used)) }

    /// True when nothing is written.
    @inlinable public var isEmpty: Bool { used == 0 }

    /// Forgets the content, keeping the memory.
    @inlinable public mutating func removeAll() { used = 0 }

    /// Drops the first `n` bytes.
    @inlinable public mutating func removeFirst(_ n: Int) {
        precondition(n <= used)
        if n < used { start.update(from: start + n, count: used - n) }
        used -= n
    }

    /// Grows the memory (doubling) so `extra` more bytes fit.
    @inlinable @inline(__always)
    public mutating func reserve(_ extra: Int) {
        guard used + extra > allocated else { return }
        var newCapacity = allocated * 2
        while newCapacity < used + extra { newCapacity *= 2 }
        let grown = UnsafeMutablePointer<UInt8>.allocate(capacity: newCapacity)
        grown.update(from: start, count: used)
        start.deallocate()
        start = grown
        allocated = newCapacity
    }

    /// Appends one byte.
    @inlinable @inline(__always)
    public mutating func append(_ byte: UInt8) {
        reserve(1)
        start[used] = byte
        used += 1
    }

    /// Appends two bytes.
    @inlinable @inline(__always)
    public mutating func append(_ a: UInt8, _ b: UInt8) {
        reserve(2)
        start[used] = a
        start[used + 1] = b
        used += 2
    }

    /// Appends raw bytes.
    @inlinable @inline(__always)
    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard let source = bytes.baseAddress, bytes.count > 0 else { return }
        reserve(bytes.count)
        UnsafeMutableRawPointer(start + used).copyMemory(from: source, byteCount: bytes.count)
        used += bytes.count
    }

    /// Appends bytes from a buffer.
    @inlinable @inline(__always)
    public mutating func append(_ bytes: UnsafeBufferPointer<UInt8>) { append(UnsafeRawBufferPointer(bytes)) }

    /// Appends an array's bytes.
    @inlinable @inline(__always)
    public mutating func append(_ bytes: [UInt8]) { bytes.withUnsafeBytes { append($0) } }

    /// Appends a string's UTF-8 bytes.
    @inlinable @inline(__always)
    public mutating func append(string: String) {
        var string = string
        string.withUTF8 { append(UnsafeRawBufferPointer($0)) }
    }

    /// Appends the decimal digits of `value`.
    @inlinable public mutating func appendDecimal(_ value: Int) {
        if value < 0 {
            append(UInt8(ascii: "-"))
            appendDecimal(value == Int.min ? Int.max : -value)
            return
        }
        var digits = 1
        var rest = value / 10
        while rest > 0 { digits += 1; rest /= 10 }
        reserve(digits)
        var v = value
        for i in stride(from: used + digits - 1, through: used, by: -1) {
            start[i] = UInt8(ascii: "0") + UInt8(v % 10)
            v /= 10
        }
        used += digits
    }
}
