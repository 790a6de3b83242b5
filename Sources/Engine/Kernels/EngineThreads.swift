import COpenBLAS

/// Thread budget of the engine: OpenBLAS's pool and Osprey's own kernels share it so the cores are never oversubscribed.
public enum EngineThreads {
    /// Sets the number of compute threads (clamped to at least 1).
    public static func configure(threads: Int) {
        openblas_set_num_threads(Int32(max(1, threads)))
    }
}
