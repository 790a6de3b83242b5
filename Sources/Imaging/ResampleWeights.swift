/// Precomputed 1-D resampling taps for one axis, Pillow's `precompute_coeffs` in floating point.
///
/// Output index `i` (of a virtual `outSize`-long axis, of which `first..<first+count` are kept) reads
/// `counts[j]` input samples from `starts[j]` with weights `weights[j * maxTaps ..< j * maxTaps + counts[j]]`.
struct ResampleWeights {
    /// Filter kernels.
    enum Kernel {
        /// Triangle (bilinear), support 1.
        case triangle
        /// Box (area averaging), support 1/2.
        case box
        /// Nearest neighbour: the sample under the output pixel's centre.
        case nearest
    }

    let starts: [Int]
    let counts: [Int]
    let weights: [Float]
    let maxTaps: Int

    /// First and one-past-last input index any kept output reads (rows to run the other pass on).
    var inputRange: Range<Int> {
        guard !starts.isEmpty else { return 0..<0 }
        var lo = Int.max, hi = 0
        for j in starts.indices {
            lo = min(lo, starts[j])
            hi = max(hi, starts[j] + counts[j])
        }
        return lo..<hi
    }

    init(inSize: Int, outSize: Int, first: Int, count: Int, kernel: Kernel, antialias: Bool) {
        precondition(inSize > 0 && outSize > 0 && first >= 0 && first + count <= outSize)
        let scale = Double(inSize) / Double(outSize)
        if kernel == .nearest {
            starts = (first..<(first + count)).map { i in min(Int((Double(i) + 0.5) * scale), inSize - 1) }
            counts = Array(repeating: 1, count: count)
            weights = Array(repeating: 1, count: count)
            maxTaps = 1
            return
        }
        let baseSupport = kernel == .triangle ? 1.0 : 0.5
        // Widening the kernel by the downscale factor is what makes it average the whole source area.
        let filterScale = (antialias || kernel == .box) ? max(scale, 1.0) : 1.0
        let support = baseSupport * filterScale
        let taps = Int(support.rounded(.up)) * 2 + 1
        var starts = [Int](), counts = [Int]()
        var weights = [Float](repeating: 0, count: count * taps)
        starts.reserveCapacity(count)
        counts.reserveCapacity(count)
        let inverse = 1.0 / filterScale
        var row = [Double](repeating: 0, count: taps)
        for j in 0..<count {
            let center = (Double(first + j) + 0.5) * scale
            let lo = max(Int(center - support + 0.5), 0)
            let hi = min(Int(center + support + 0.5), inSize)
            let n = min(max(hi - lo, 1), taps)
            var total = 0.0
            for k in 0..<n {
                let x = (Double(lo + k) - center + 0.5) * inverse
                let w: Double
                switch kernel {
                case .triangle: w = max(0, 1 - abs(x))
                case .box: w = (x > -0.5 && x <= 0.5) ? 1 : 0
                case .nearest: w = 0
                }
                row[k] = w
                total += w
            }
            if total == 0 { row[0] = 1; total = 1 }  // degenerate tiny sizes: fall back to one sample
            for k in 0..<n { weights[j * taps + k] = Float(row[k] / total) }
            starts.append(min(lo, inSize - 1))
            counts.append(min(n, inSize - min(lo, inSize - 1)))
        }
        self.starts = starts
        self.counts = counts
        self.weights = weights
        maxTaps = taps
    }
}
