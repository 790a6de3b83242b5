import CKernelShim

extension CompiledModel {
    /// Keeps up to `bytes` of freed memory at the top of the allocator's heap for the next allocations instead of
    /// returning it at once. Fixing the mmap threshold (`returnLargeFreesToSystem`) leaves glibc's trim threshold at
    /// 128 KiB, so a server's request-sized buffers would be unmapped and faulted in again on every request; explicit
    /// trims (`returnFreeHeapPages`, the release after a model is freed) still hand everything back. Call once at start.
    public static func keepFreedMemoryForReuse(upTo bytes: Int = 32 << 20) {
        _ = osprey_fix_trim_threshold(Int32(clamping: bytes))
    }
}
