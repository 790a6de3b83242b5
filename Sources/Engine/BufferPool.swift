import Foundation
import Infrastructure
import Tensor

/// Bytes held by the engine's activation buffer pool (see `CompiledModel.bufferPoolStatistics`).
public struct BufferPoolStatistics: Sendable, Equatable {
    /// Bytes the pool owns: buffers in use by tensors plus free buffers kept for reuse.
    public var heldBytes: Int
    /// Bytes of pooled buffers currently backing live tensors (including outputs callers still hold).
    public var inUseBytes: Int
    /// Most bytes ever in use at once.
    public var peakInUseBytes: Int
    /// Buffer requests served from the free lists.
    public var hits: Int
    /// Buffer requests that had to allocate.
    public var misses: Int
}

/// Recycles large activation and scratch buffers across steps and runs, so steady-state runs do not
/// allocate (page faults and kernel page clearing were a large share of whole-model time).
///
/// Requests round up to size classes (four per power of two) and take the smallest free block that fits within
/// twice the request. A tensor's storage borrows a pooled block whose
/// token returns the block to the free list when the last tensor sharing it dies, on whatever thread that is;
/// the storage itself stays uniquely owned, so copy-on-write and in-place kernels work as before. All state is
/// behind one lock: concurrent runs of the same or different models share the pool safely. The pool holds at most
/// three times the peak in-use bytes, evicting the least recently used free blocks first (e.g. after a batch-size change).
final class BufferPool: @unchecked Sendable {
    /// The process-wide pool.
    static let shared = BufferPool()
    /// Smaller requests go to malloc, which serves them from its own free lists without page faults.
    static let minimumBytes = 64 * 1024

    private let lock = Lock()
    /// Free blocks (size, pointer, last use), unordered: the pool holds tens of blocks, so scans are cheap.
    private var free: [(size: Int, pointer: UnsafeMutableRawPointer, used: Int)] = []
    private var clock = 0
    private var freeBytes = 0
    private var inUse = 0
    private var peak = 0
    private var hits = 0
    private var misses = 0

    /// Current statistics.
    var statistics: BufferPoolStatistics {
        lock.lock()
        defer { lock.unlock() }
        return BufferPoolStatistics(heldBytes: freeBytes + inUse, inUseBytes: inUse, peakInUseBytes: peak, hits: hits, misses: misses)
    }

    /// The size class of `bytes`: rounded up to a quarter of its power of two (at most 25% slack).
    static func sizeClass(_ bytes: Int) -> Int {
        let top = Int.bitWidth - 1 - bytes.leadingZeroBitCount
        let quarter = max(1, (1 << top) / 4)
        return (bytes + quarter - 1) / quarter * quarter
    }

    /// Uninitialized storage of exactly `byteCount` bytes (the caller overwrites every byte it reads).
    func storage(byteCount: Int) -> TensorStorage {
        guard byteCount >= Self.minimumBytes else { return TensorStorage(uninitializedByteCount: byteCount) }
        let (pointer, size) = take(Self.sizeClass(byteCount))
        let block = PooledBlock(pointer: pointer, size: size, pool: self)
        return TensorStorage(borrowing: block.pointer, byteCount: byteCount, owner: block)
    }

    /// Runs `body` with `floats` uninitialized scratch floats (64-byte aligned), returned to the pool afterwards.
    func withScratch<R>(floats: Int, _ body: (UnsafeMutablePointer<Float>) throws -> R) rethrows -> R {
        let bytes = floats * MemoryLayout<Float>.stride
        guard bytes >= Self.minimumBytes else {
            let p = UnsafeMutablePointer<Float>.allocate(capacity: max(floats, 1))
            defer { p.deallocate() }
            return try body(p)
        }
        let (p, size) = take(Self.sizeClass(bytes))
        defer { giveBack(p, size: size) }
        return try body(p.assumingMemoryBound(to: Float.self))
    }

    /// Bytes the pool may hold (in use plus free): a multiple of the peak, so varied layer sizes find a fit.
    private var limit: Int { 3 * peak }

    /// The smallest free block of at least `bytes` and at most twice that (best fit), else a new one.
    private func take(_ bytes: Int) -> (pointer: UnsafeMutableRawPointer, size: Int) {
        var evicted: [UnsafeMutableRawPointer] = []
        lock.lock()
        clock += 1
        var best = -1
        for i in free.indices where free[i].size >= bytes && free[i].size <= 2 * bytes && (best < 0 || free[i].size < free[best].size) {
            best = i
        }
        if best >= 0 {
            let block = free.remove(at: best)
            freeBytes -= block.size
            inUse += block.size
            hits += 1
            lock.unlock()
            return (block.pointer, block.size)
        }
        misses += 1
        inUse += bytes
        peak = max(peak, inUse)
        // Over the limit (e.g. after a batch-size change): drop the least recently used free blocks first.
        while freeBytes + inUse > limit, let oldest = free.indices.min(by: { free[$0].used < free[$1].used }) {
            let block = free.remove(at: oldest)
            evicted.append(block.pointer)
            freeBytes -= block.size
        }
        lock.unlock()
        for p in evicted { p.deallocate() }
        return (UnsafeMutableRawPointer.allocate(byteCount: bytes, alignment: 64), bytes)
    }

    /// Frees every free block and restarts the peak from the bytes in use now, so the pool shrinks back after a model
    /// is released instead of holding three times the old peak. Returns the bytes freed.
    @discardableResult
    func trim() -> Int {
        lock.lock()
        let released = free
        free = []
        freeBytes = 0
        peak = inUse
        lock.unlock()
        for block in released { block.pointer.deallocate() }
        return released.reduce(0) { $0 + $1.size }
    }

    fileprivate func giveBack(_ pointer: UnsafeMutableRawPointer, size: Int) {
        lock.lock()
        clock += 1
        inUse -= size
        let keep = freeBytes + inUse + size <= limit
        if keep {
            free.append((size, pointer, clock))
            freeBytes += size
        }
        lock.unlock()
        if !keep { pointer.deallocate() }
    }
}

/// One pooled block lent to a tensor's storage; returns to the pool when the storage dies.
private final class PooledBlock {
    let pointer: UnsafeMutableRawPointer
    let size: Int
    let pool: BufferPool

    init(pointer: UnsafeMutableRawPointer, size: Int, pool: BufferPool) {
        self.pointer = pointer
        self.size = size
        self.pool = pool
    }

    deinit { pool.giveBack(pointer, size: size) }
}

extension Tensor {
    /// An uninitialized numeric tensor whose (large) buffer comes from the engine's pool; every element must be written.
    static func pooled(_ dtype: DType, shape: [Int]) -> Tensor {
        precondition(dtype != .string, "string tensors hold their elements out of line")
        let bytes = Tensor.elementCount(shape) * dtype.byteSize
        return Tensor(dtype: dtype, shape: shape, storage: BufferPool.shared.storage(byteCount: bytes))
    }

    /// `parts` stacked along their first axis, like `concatenatingRows`, into a buffer of the engine's pool that
    /// returns to it when the last tensor sharing it dies: a server's batch input (MiBs per execution) then reuses the
    /// same memory every time, whatever the allocator's thresholds, instead of a fresh allocation.
    public static func pooledBatch(concatenating parts: [Tensor]) -> Tensor {
        precondition(!parts.isEmpty, "nothing to concatenate")
        let first = parts[0]
        guard parts.count > 1, first.dtype != .string, first.rank >= 1 else { return Tensor.concatenatingRows(parts) }
        let tail = Array(first.shape.dropFirst())
        var rows = 0
        var offsets: [Int] = []
        for part in parts {
            precondition(part.dtype == first.dtype && Array(part.shape.dropFirst()) == tail,
                         "cannot stack \(part.dtype)\(part.shape) onto \(first.dtype)\(first.shape)")
            offsets.append(rows * Tensor.elementCount(tail) * first.dtype.byteSize)
            rows += part.shape[0]
        }
        let result = Tensor.pooled(first.dtype, shape: [rows] + tail)
        // One thread: splitting the copy across the engine's pool made the sleeping worker's wake-up part of every
        // batch (loaded A/B: light-model server CPU per request up 4-28%) for a copy of well under a millisecond.
        for (part, offset) in zip(parts, offsets) {
            part.withUnsafeBytes { source in
                if source.count > 0 { (result.storage.pointer + offset).copyMemory(from: source.baseAddress!, byteCount: source.count) }
            }
        }
        return result
    }
}
