#if canImport(Glibc)
import Glibc
#endif

/// A growable byte buffer over raw memory for the hot paths (response heads, access lines).
///
/// A plain struct over a pointer: appends cost a bounds check and a store, with none of Array's uniqueness
/// checks. The owner frees it explicitly; copies share the same memory, so only one copy may be used at a time.
struct ByteWriter {
    private(set) var base: UnsafeMutablePointer<UInt8>
    private(set) var count = 0
    private(set) var capacity: Int

    /// An empty buffer with room for `capacity` bytes.
    init(capacity: Int) {
        self.capacity = max(16, capacity)
        base = .allocate(capacity: self.capacity)
    }

    /// Releases the memory; the writer must not be used afterwards.
    func free() { base.deallocate() }

    /// The written bytes.
    var buffer: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }

    /// The written bytes copied into an array.
    var array: [UInt8] { Array(UnsafeBufferPointer(start: base, count: count)) }

    var isEmpty: Bool { count == 0 }

    /// Forgets the content, keeping the memory.
    mutating func removeAll() { count = 0 }

    /// Drops the first `n` bytes.
    mutating func removeFirst(_ n: Int) {
        precondition(n <= count)
        if n < count { (base).update(from: base + n, count: count - n) }
        count -= n
    }

    @inline(__always)
    mutating func reserve(_ extra: Int) {
        guard count + extra > capacity else { return }
        var newCapacity = capacity * 2
        while newCapacity < count + extra { newCapacity *= 2 }
        let grown = UnsafeMutablePointer<UInt8>.allocate(capacity: newCapacity)
        grown.update(from: base, count: count)
        base.deallocate()
        base = grown
        capacity = newCapacity
    }

    @inline(__always)
    mutating func append(_ byte: UInt8) {
        reserve(1)
        base[count] = byte
        count += 1
    }

    @inline(__always)
    mutating func append(_ a: UInt8, _ b: UInt8) {
        reserve(2)
        base[count] = a
        base[count + 1] = b
        count += 2
    }

    @inline(__always)
    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard let source = bytes.baseAddress, bytes.count > 0 else { return }
        reserve(bytes.count)
        UnsafeMutableRawPointer(base + count).copyMemory(from: source, byteCount: bytes.count)
        count += bytes.count
    }

    @inline(__always)
    mutating func append(_ bytes: UnsafeBufferPointer<UInt8>) { append(UnsafeRawBufferPointer(bytes)) }

    @inline(__always)
    mutating func append(_ bytes: [UInt8]) { bytes.withUnsafeBytes { append($0) } }

    /// Appends a string's UTF-8 bytes.
    @inline(__always)
    mutating func append(string: String) {
        var string = string
        string.withUTF8 { append(UnsafeRawBufferPointer($0)) }
    }

    /// Appends the decimal digits of `value`.
    mutating func appendDecimal(_ value: Int) {
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
        for i in stride(from: count + digits - 1, through: count, by: -1) {
            base[i] = UInt8(ascii: "0") + UInt8(v % 10)
            v /= 10
        }
        count += digits
    }
}
