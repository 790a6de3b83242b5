import Tensor

/// Where the taps of an N-D window land, for the direct N-D reference kernels (convolution, transposed convolution,
/// pooling): element `o` of the row-major `from` grid, scaled by the strides, shifted by the leading pads and moved by
/// tap `k`'s dilated kernel position, lands on the row-major `to` grid or falls outside it.
struct WindowTaps {
    private let fromShape: [Int], fromStrides: [Int]
    private let toShape: [Int], toStrides: [Int]
    private let kernel: [Int], kernelStrides: [Int]
    private let strides: [Int], dilations: [Int], padBegin: [Int]

    /// Taps from grid `from` onto grid `to` (same rank as `kernel`).
    init(from: [Int], to: [Int], kernel: [Int], strides: [Int], dilations: [Int], padBegin: [Int]) {
        fromShape = from
        fromStrides = Tensor.contiguousStrides(from)
        toShape = to
        toStrides = Tensor.contiguousStrides(to)
        self.kernel = kernel
        kernelStrides = Tensor.contiguousStrides(kernel)
        self.strides = strides
        self.dilations = dilations
        self.padBegin = padBegin
    }

    /// The flat offset in `to` of tap `k` (row-major over the kernel) of element `o`, or nil when it falls outside.
    @inline(__always)
    func offset(_ o: Int, tap k: Int) -> Int? {
        var offset = 0
        for a in 0..<kernel.count {
            let i = (o / fromStrides[a]) % fromShape[a] * strides[a] - padBegin[a] + (k / kernelStrides[a]) % kernel[a] * dilations[a]
            if i < 0 || i >= toShape[a] { return nil }
            offset += i * toStrides[a]
        }
        return offset
    }
}
