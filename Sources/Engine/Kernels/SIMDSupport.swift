import Foundation

/// Vector width of the kernels: one AVX-512 register, two AVX2 registers.
typealias FloatVector = SIMD16<Float>

/// Unaligned vector load and store helpers shared by the kernels.
extension UnsafePointer where Pointee == Float {
    /// Loads `V.scalarCount` consecutive floats.
    @inline(__always)
    func vector<V: SIMD>(_: V.Type = V.self) -> V where V.Scalar == Float {
        UnsafeRawPointer(self).loadUnaligned(as: V.self)
    }
}

extension UnsafeMutablePointer where Pointee == Float {
    /// Loads `V.scalarCount` consecutive floats.
    @inline(__always)
    func vector<V: SIMD>(_: V.Type = V.self) -> V where V.Scalar == Float {
        UnsafeRawPointer(self).loadUnaligned(as: V.self)
    }

    /// Stores `value` into `V.scalarCount` consecutive floats.
    @inline(__always)
    func store<V: SIMD>(_ value: V) where V.Scalar == Float {
        UnsafeMutableRawPointer(self).storeBytes(of: value, as: V.self)
    }
}

/// Floats 0, 2, 4, ... 30 of p (reads 32): the even float of each 64-bit pair is its low half. Spelled as an integer
/// truncation because `SIMD32.evenHalf` of a load was narrowed by LLVM into 16 scalar loads and inserts.
@inline(__always)
func loadEvenLanes16(_ p: UnsafePointer<Float>) -> SIMD16<Float> {
    let pairs = UnsafeRawPointer(p).loadUnaligned(as: SIMD16<UInt64>.self)
    return unsafeBitCast(SIMD16<UInt32>(truncatingIfNeeded: pairs), to: SIMD16<Float>.self)
}

/// Loads 16 floats `stride` apart; stride 1 and 2 use contiguous loads (stride 2 reads 32 floats and keeps the even ones).
@inline(__always)
func loadStrided16(_ p: UnsafePointer<Float>, stride: Int) -> SIMD16<Float> {
    if stride == 1 { return p.vector(SIMD16<Float>.self) }
    if stride == 2 { return loadEvenLanes16(p) }
    var v = SIMD16<Float>()
    for i in 0..<16 { v[i] = p[i * stride] }
    return v
}

/// acc += a * b lane-wise: one FMA instruction where the target has it (release builds), multiply and add otherwise
/// (without an FMA target `addProduct` becomes a libm call per lane).
@inline(__always)
func multiplyAdd<V: SIMD>(_ acc: inout V, _ a: V, _ b: V) where V.Scalar == Float {
    #if OSPREY_FMA
    acc.addProduct(a, b)
    #else
    acc += a * b
    #endif
}

/// Extra floats a kernel may read past the last element it uses (stride-2 loads read twice the lanes).
let vectorReadSlack = 32

/// Floats rounded up so that buffers can be over-read by `vectorReadSlack`.
@inline(__always)
func paddedCount(_ count: Int) -> Int { count + vectorReadSlack }

/// A 64-byte aligned float buffer owned by the caller (kernel-private scratch and packed weights).
@inline(__always)
func allocateFloats(_ count: Int) -> UnsafeMutablePointer<Float> {
    let raw = UnsafeMutableRawPointer.allocate(byteCount: max(1, count) * MemoryLayout<Float>.stride, alignment: 64)
    return raw.bindMemory(to: Float.self, capacity: max(1, count))
}

/// A 64-byte aligned copy of `source` (weights or a bias kept by a packed kernel), freed with `deallocate()`.
func copiedFloats(_ source: UnsafeBufferPointer<Float>) -> UnsafeMutablePointer<Float> {
    let copy = allocateFloats(source.count)
    if let base = source.baseAddress { copy.initialize(from: base, count: source.count) }
    return copy
}

/// Which of a thread's scratch buffers to use: a layer-wide one the caller fills before fanning out (`.layer`), the
/// per-task one used inside parallel bodies (`.tile`), so the caller's share of the work can use both, and one
/// attention head's scores (`.scores`, held while `smallMatmul` uses `.tile`).
enum ScratchSlot: Int { case tile = 0, layer = 1, scores = 2 }

/// Runs `body` with a float buffer of at least `count` elements owned by the calling thread and kept for its next
/// call (compute threads are persistent, so tiles reuse warm memory instead of allocating). Not reentrant per slot.
func withThreadScratch<R>(_ count: Int, slot: ScratchSlot = .tile, _ body: (UnsafeMutablePointer<Float>) -> R) -> R {
    let box: ThreadScratch
    if let existing = pthread_getspecific(ThreadScratch.key) {
        box = Unmanaged<ThreadScratch>.fromOpaque(existing).takeUnretainedValue()
    } else {
        box = ThreadScratch()
        pthread_setspecific(ThreadScratch.key, Unmanaged.passRetained(box).toOpaque())
    }
    let i = slot.rawValue
    if box.capacity[i] < count {
        box.pointer[i]?.deallocate()
        box.capacity[i] = paddedCount(count)
        box.pointer[i] = allocateFloats(box.capacity[i])
    }
    return body(box.pointer[i]!)
}

/// The per-thread buffers behind `withThreadScratch`, released when their thread exits.
private final class ThreadScratch {
    var pointer: [UnsafeMutablePointer<Float>?] = [nil, nil, nil]
    var capacity = [0, 0, 0]

    deinit { pointer.forEach { $0?.deallocate() } }

    static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key) { raw in
            if let raw { Unmanaged<ThreadScratch>.fromOpaque(raw).release() }
        }
        return key
    }()
}
