/// The window of a 2-D convolution, transposed convolution or pool: kernel size, strides, dilations and pads.
///
/// `ConvShape` (inside `ConvGeometry` and `ConvTransposeGeometry`) and `PoolGeometry` each hold one and expose its
/// fields as their own (`g.kernelHeight`) through dynamic member lookup, so all share one definition of these ten numbers.
public struct SlidingWindow: Sendable, Hashable {
    /// Kernel height.
    public var kernelHeight: Int
    /// Kernel width.
    public var kernelWidth: Int
    /// Vertical stride.
    public var strideHeight: Int
    /// Horizontal stride.
    public var strideWidth: Int
    /// Vertical dilation.
    public var dilationHeight: Int
    /// Horizontal dilation.
    public var dilationWidth: Int
    /// Padding above (for ConvTranspose: rows cropped from the top of the full output).
    public var padTop: Int
    /// Padding left (ConvTranspose: columns cropped from the left).
    public var padLeft: Int
    /// Padding below (counted by AveragePool's `countIncludePad`; ConvTranspose: rows cropped from the bottom).
    public var padBottom: Int
    /// Padding right (ConvTranspose: columns cropped from the right).
    public var padRight: Int

    /// A window; strides and dilations default to 1, pads to 0.
    public init(kernelHeight: Int, kernelWidth: Int, strideHeight: Int = 1, strideWidth: Int = 1, dilationHeight: Int = 1,
                dilationWidth: Int = 1, padTop: Int = 0, padLeft: Int = 0, padBottom: Int = 0, padRight: Int = 0) {
        self.kernelHeight = kernelHeight
        self.kernelWidth = kernelWidth
        self.strideHeight = strideHeight
        self.strideWidth = strideWidth
        self.dilationHeight = dilationHeight
        self.dilationWidth = dilationWidth
        self.padTop = padTop
        self.padLeft = padLeft
        self.padBottom = padBottom
        self.padRight = padRight
    }
}

/// A geometry whose fields partly live in a nested value, `parts`, and read and write through it as if declared on the
/// geometry itself (`g.kernelHeight`): the conv, transposed conv and pool geometries share one definition of them.
public protocol ComposedGeometry {
    /// The nested value's type.
    associatedtype Parts
    /// The nested value.
    var parts: Parts { get set }
}

extension ComposedGeometry {
    /// A field of `parts`, as if declared on the geometry itself.
    @inline(__always)
    public subscript<T>(dynamicMember field: WritableKeyPath<Parts, T>) -> T {
        get { parts[keyPath: field] }
        set { parts[keyPath: field] = newValue }
    }
}

extension SlidingWindow {
    /// Calls `body(tap, iy, ix)` (tap = ky * kernelWidth + kx) for each tap of output (y, x)'s window that falls inside
    /// an inHeight x inWidth input, row by row: the reference kernels' loop (taps in padding are skipped).
    @inline(__always)
    func forEachTap(y: Int, x: Int, inHeight: Int, inWidth: Int, _ body: (_ tap: Int, _ iy: Int, _ ix: Int) -> Void) {
        for ky in 0..<kernelHeight {
            let iy = y * strideHeight - padTop + ky * dilationHeight
            if iy < 0 || iy >= inHeight { continue }
            for kx in 0..<kernelWidth {
                let ix = x * strideWidth - padLeft + kx * dilationWidth
                if ix < 0 || ix >= inWidth { continue }
                body(ky * kernelWidth + kx, iy, ix)
            }
        }
    }
}
