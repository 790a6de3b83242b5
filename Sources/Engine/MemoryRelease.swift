import CKernelShim
import Dispatch

/// Below this many bytes released, returning memory to the system is not worth the allocator's locks.
private let trimThresholdBytes = 1 << 20

/// Gives memory back after a model is released: the activation pool's free blocks at once, then (when that and the
/// model's constants add up to at least 1 MiB) the allocator's free pages, so RSS falls back instead of staying at the
/// old peak. The heap trim runs shortly after, off this thread: a deinit body runs before the model's stored
/// properties (its weights) are freed.
func releaseUnusedMemory(afterReleasing constantBytes: Int) {
    let pooled = BufferPool.shared.trim()
    guard pooled + constantBytes >= trimThresholdBytes else { return }
    DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + .milliseconds(20)) { _ = osprey_release_free_heap() }
}

extension CompiledModel {
    /// Frees the activation pool's unused buffers and returns free heap pages to the system now.
    public static func releaseUnusedMemory() {
        BufferPool.shared.trim()
        _ = osprey_release_free_heap()
    }
}
