import Glibc
import CKernelShim
import Infrastructure

/// Below this many bytes released, returning memory to the system is not worth the allocator's locks.
private let trimThresholdBytes = 1 << 20

/// Gives memory back after a model is released: the activation pool's free blocks at once, then (when that and the
/// model's constants add up to at least 1 MiB) the allocator's free pages, so RSS falls back instead of staying at the
/// old peak. The heap trim runs shortly after, off this thread: a deinit body runs before the model's stored
/// properties (its weights) are freed.
func releaseUnusedMemory(afterReleasing constantBytes: Int) {
    let pooled = BufferPool.shared.trim()
    guard pooled + constantBytes >= trimThresholdBytes else { return }
    DedicatedThread.start(name: "osprey-trim") {
        usleep(20_000)
        _ = osprey_release_free_heap()
    }
}

extension CompiledModel {
    /// Frees the activation pool's unused buffers and returns free heap pages to the system now.
    public static func releaseUnusedMemory() {
        BufferPool.shared.trim()
        _ = osprey_release_free_heap()
    }

    /// Gives allocations of `threshold` bytes and more a mapping of their own, returned to the system when freed.
    ///
    /// glibc otherwise raises that threshold to the largest block freed so far (a model's weights, an upload's body)
    /// and its arenas' trim threshold to twice that, after which tens of MiB freed by a hot swap stay resident.
    /// Smaller blocks keep coming from the arenas (no page faults per request). Call once at start.
    public static func returnLargeFreesToSystem(threshold: Int = 4 << 20) {
        _ = osprey_fix_mmap_threshold(Int32(clamping: threshold))
    }

    /// Returns the allocator's free pages to the system, e.g. after a load freed the file bytes and decoded protobuf
    /// (glibc keeps freed memory of that size in its arenas, so RSS would otherwise grow by a model per swap).
    public static func returnFreeHeapPages() {
        _ = osprey_release_free_heap()
    }
}
