import Foundation
import Tensor

/// Forward-transforms `count` real signals of the plan's length, two per complex FFT (z = x + iy, then
/// X_k = (Z_k + conj Z_{n-k}) / 2 and Y_k = (Z_k - conj Z_{n-k}) / 2i), which halves the work of real input.
/// `load(s, buffer)` writes signal s's n samples; `store(s, re, im)` receives its full n-point spectrum.
func forwardRealSignals(_ plan: FFTPlan, count: Int, load: (Int, UnsafeMutablePointer<Double>) -> Void,
                        store: (Int, UnsafePointer<Double>, UnsafePointer<Double>) -> Void) {
    let n = plan.n
    let buffer = UnsafeMutablePointer<Double>.allocate(capacity: 6 * n)
    defer { buffer.deallocate() }
    let (zRe, zIm, fRe, fIm) = (buffer, buffer + n, buffer + 2 * n, buffer + 3 * n)
    let (yRe, yIm) = (buffer + 4 * n, buffer + 5 * n)
    var s = 0
    while s < count {
        load(s, zRe)
        let paired = s + 1 < count
        if paired { load(s + 1, zIm) } else { zIm.initialize(repeating: 0, count: n) }
        plan.transform(inRe: zRe, inIm: zIm, outRe: fRe, outIm: fIm, inverse: false)
        guard paired else { store(s, fRe, fIm); break }
        for k in 0..<n {
            let j = k == 0 ? 0 : n - k
            let (ar, ai, br, bi) = (fRe[k], fIm[k], fRe[j], fIm[j])
            zRe[k] = (ar + br) / 2; zIm[k] = (ai - bi) / 2
            yRe[k] = (ai + bi) / 2; yIm[k] = (br - ar) / 2
        }
        store(s, zRe, zIm)
        store(s + 1, yRe, yIm)
        s += 2
    }
}

/// A float16 / bfloat16 input widened to float32 (the spectral kernels compute in Double and write the input's dtype).
private func spectralInput(_ x: Tensor, _ ctx: OpContext) throws -> Tensor {
    guard x.dtype.isFloatingPoint, x.container == nil else { throw ctx.error(.unsupportedDType, "expected a floating-point tensor, got \(x)") }
    return x.dtype == .float32 || x.dtype == .float64 ? x : try castTensor(x, to: .float32, ctx)
}

/// An integer scalar input (dft_length, frame_step, ...), or nil when omitted.
private func integerScalar(_ inputs: KernelInputs, _ index: Int, _ name: String, _ ctx: OpContext) throws -> Int? {
    guard let t = inputs[index] else { return nil }
    guard t.count == 1, !t.dtype.isFloatingPoint, t.dtype != .string else { throw ctx.error(.executionFailed, "\(name) must be an integer scalar, got \(t)") }
    return Int(t.doubleValue(at: 0))
}

/// The DFT along one axis of `x` ([..., axis, ..., 1 or 2]); see the ONNX DFT operator for the four cases
/// (complex DFT, RFFT, inverse DFT, IRFFT).
private func discreteFourierTransform(_ x: Tensor, axis: Int, length: Int?, inverse: Bool, onesided: Bool, as dtype: DType, _ ctx: OpContext) throws -> Tensor {
    let r = x.rank, channels = x.shape[r - 1]
    let a = axis < 0 ? axis + r : axis
    guard a >= 0, a <= r - 2 else { throw ctx.error(.executionFailed, "axis \(axis) is out of range for rank \(r) (the last axis holds the complex parts)") }
    let signal = x.shape[a]
    let n = length ?? (inverse && onesided ? 2 * (signal - 1) : signal)
    guard n >= 1, n <= 1 << 26 else { throw ctx.error(.executionFailed, "dft_length \(n) is out of range (signal axis has \(signal))") }
    let outLength = inverse || !onesided ? n : n / 2 + 1, outChannels = inverse && onesided ? 1 : 2
    let outer = x.shape[..<a].reduce(1, *), inner = x.shape[(a + 1)..<(r - 1)].reduce(1, *)
    var outShape = x.shape
    outShape[a] = outLength; outShape[r - 1] = outChannels
    let source = x.doubles
    var result = [Double](repeating: 0, count: outer * outLength * inner * outChannels)
    let plan = FFTPlan.shared(n)
    let used = min(signal, n)
    // Element j of signal (o, i) starts at ((o * signal + j) * inner + i) * channels.
    func base(_ s: Int, _ j: Int, _ len: Int, _ c: Int) -> Int { ((s / inner * len + j) * inner + s % inner) * c }
    let count = outer * inner
    source.withUnsafeBufferPointer { src in
        result.withUnsafeMutableBufferPointer { dst in
            if channels == 1 && !inverse {
                forwardRealSignals(plan, count: count, load: { s, buf in
                    for j in 0..<used { buf[j] = src[base(s, j, signal, 1)] }
                    for j in used..<n { buf[j] = 0 }
                }, store: { s, re, im in
                    for k in 0..<outLength { let at = base(s, k, outLength, 2); dst[at] = re[k]; dst[at + 1] = im[k] }
                })
                return
            }
            let work = UnsafeMutablePointer<Double>.allocate(capacity: 4 * n)
            defer { work.deallocate() }
            let (inRe, inIm, outRe, outIm) = (work, work + n, work + 2 * n, work + 3 * n)
            func sample(_ s: Int, _ j: Int) -> (Double, Double) {
                let at = base(s, j, signal, channels)
                return (src[at], channels == 2 ? src[at + 1] : 0)
            }
            for s in 0..<count {
                if inverse && onesided {
                    // IRFFT: rebuild the Hermitian spectrum from bins 0...n/2; the real part of its inverse is the signal.
                    for k in 0..<n {
                        let mirrored = k > n / 2
                        let bin = mirrored ? n - k : k
                        let (re, im) = bin < signal ? sample(s, bin) : (0, 0)
                        inRe[k] = re; inIm[k] = mirrored ? -im : im
                    }
                } else {
                    for j in 0..<n { (inRe[j], inIm[j]) = j < used ? sample(s, j) : (0, 0) }
                }
                plan.transform(inRe: inRe, inIm: inIm, outRe: outRe, outIm: outIm, inverse: inverse)
                let scale = inverse ? 1 / Double(n) : 1
                for k in 0..<outLength {
                    let at = base(s, k, outLength, outChannels)
                    dst[at] = outRe[k] * scale
                    if outChannels == 2 { dst[at + 1] = outIm[k] * scale }
                }
            }
        }
    }
    return try castTensor(Tensor(shape: outShape, scalars: result), to: dtype, ctx)
}

/// STFT of `signal` [batch, length, 1 or 2]: frames of `frameLength` every `step`, weighted by `window`.
private func shortTimeFourierTransform(_ x: Tensor, step: Int, window: [Double]?, frameLength: Int, onesided: Bool, as dtype: DType,
                                       _ ctx: OpContext) throws -> Tensor {
    let (batch, length, channels) = (x.shape[0], x.shape[1], x.shape[2])
    let frames = 1 + (length - frameLength) / step
    let bins = onesided ? frameLength / 2 + 1 : frameLength
    let source = x.doubles
    var result = [Double](repeating: 0, count: batch * frames * bins * 2)
    let plan = FFTPlan.shared(frameLength)
    source.withUnsafeBufferPointer { src in
        result.withUnsafeMutableBufferPointer { dst in
            // Signal s = (b, f) starts at sample f * step of batch row b.
            func start(_ s: Int) -> Int { (s / frames * length + s % frames * step) * channels }
            func store(_ s: Int, _ re: UnsafePointer<Double>, _ im: UnsafePointer<Double>) {
                for k in 0..<bins { dst[(s * bins + k) * 2] = re[k]; dst[(s * bins + k) * 2 + 1] = im[k] }
            }
            if channels == 1 {
                forwardRealSignals(plan, count: batch * frames, load: { s, buf in
                    let at = start(s)
                    if let window { for j in 0..<frameLength { buf[j] = src[at + j] * window[j] } }
                    else { for j in 0..<frameLength { buf[j] = src[at + j] } }
                }, store: store)
                return
            }
            let work = UnsafeMutablePointer<Double>.allocate(capacity: 4 * frameLength)
            defer { work.deallocate() }
            let (inRe, inIm, outRe, outIm) = (work, work + frameLength, work + 2 * frameLength, work + 3 * frameLength)
            for s in 0..<(batch * frames) {
                let at = start(s)
                for j in 0..<frameLength {
                    let w = window?[j] ?? 1
                    inRe[j] = src[at + 2 * j] * w; inIm[j] = src[at + 2 * j + 1] * w
                }
                plan.transform(inRe: inRe, inIm: inIm, outRe: outRe, outIm: outIm, inverse: false)
                store(s, outRe, outIm)
            }
        }
    }
    return try castTensor(Tensor(shape: [batch, frames, bins, 2], scalars: result), to: dtype, ctx)
}

/// The triangular mel filter bank [dft_length / 2 + 1, num_mel_bins] of the ONNX MelWeightMatrix operator
/// (mel = 2595 log10(1 + f / 700), num_mel_bins + 2 equally spaced edges, edges floored to FFT bins).
func melWeightMatrix(melBins: Int, dftLength: Int, sampleRate: Int, lower: Double, upper: Double) -> [Double]? {
    let spectrogramBins = dftLength / 2 + 1
    func mel(_ hz: Double) -> Double { 2595 * log10(1 + hz / 700) }
    let (low, high) = (mel(lower), mel(upper))
    let step = (high - low) / Double(melBins + 2)
    var edges: [Int] = []
    for i in 0..<(melBins + 2) {
        let hz = 700 * (pow(10, (Double(i) * step + low) / 2595) - 1)
        let bin = (Double(dftLength + 1) * hz / Double(sampleRate)).rounded(.down)
        guard bin.isFinite, bin >= 0, bin < Double(spectrogramBins) else { return nil }
        edges.append(Int(bin))
    }
    var out = [Double](repeating: 0, count: spectrogramBins * melBins)
    for i in 0..<melBins {
        let (left, center, right) = (edges[i], edges[i + 1], edges[i + 2])
        if center == left {
            out[center * melBins + i] = 1
        } else if center > left {
            for j in left...center { out[j * melBins + i] = Double(j - left) / Double(center - left) }
        }
        if right > center {
            for j in center..<right { out[j * melBins + i] = Double(right - j) / Double(right - center) }
        }
    }
    return out
}

let spectralOperators: OperatorTable = [
    "DFT": { ctx in
        let inverse = try ctx.int("inverse", 0), onesided = try ctx.int("onesided", 0)
        guard inverse == 0 || inverse == 1 else { throw ctx.unsupported("inverse", "= \(inverse) (expected 0 or 1)") }
        guard onesided == 0 || onesided == 1 else { throw ctx.unsupported("onesided", "= \(onesided) (expected 0 or 1)") }
        // Opset 17 takes the axis as an attribute (default 1); opset 20 as optional input 2 (default -2).
        let axisAttribute = ctx.opset < 20 ? try ctx.int("axis", 1) : nil
        return PreparedKernel { inputs in
            let x = try spectralInput(inputs.required(0, ctx), ctx)
            guard x.rank >= 2, x.shape[x.rank - 1] == 1 || x.shape[x.rank - 1] == 2 else {
                throw ctx.error(.executionFailed, "input must be [..., signal, 1 or 2] (real or complex), got \(x)")
            }
            let axis = try axisAttribute ?? integerScalar(inputs, 2, "axis", ctx) ?? -2
            let length = try integerScalar(inputs, 1, "dft_length", ctx)
            return [try discreteFourierTransform(x, axis: axis, length: length, inverse: inverse == 1, onesided: onesided == 1,
                                                 as: inputs[0]!.dtype, ctx)]
        }
    },
    "STFT": { ctx in
        let onesided = try ctx.int("onesided", 1)
        guard onesided == 0 || onesided == 1 else { throw ctx.unsupported("onesided", "= \(onesided) (expected 0 or 1)") }
        return PreparedKernel { inputs in
            var x = try spectralInput(inputs.required(0, ctx), ctx)
            // torch.onnx's TorchScript exporter feeds torch.stft's real [batch, length] signal without the trailing
            // axis; onnxruntime reads that as real, and so does the engine.
            if x.rank == 2 { x = x.reshaped(x.shape + [1]) }
            guard x.rank == 3, x.shape[2] == 1 || x.shape[2] == 2 else {
                throw ctx.error(.executionFailed, "signal must be [batch, length, 1 or 2] (real or complex), got \(x)")
            }
            guard let step = try integerScalar(inputs, 1, "frame_step", ctx) else { throw ctx.error(.invalidModel, "frame_step (input 1) is required") }
            let window = try inputs[2].map { try spectralInput($0, ctx) }
            if let window, window.rank != 1 { throw ctx.error(.executionFailed, "window must be 1-D, got \(window)") }
            let given = try integerScalar(inputs, 3, "frame_length", ctx)
            // As ONNX's reference: frame_length, else the window's length, else the whole signal.
            let frameLength = given ?? window?.count ?? x.shape[1]
            if let window, window.count != frameLength {
                throw ctx.error(.executionFailed, "window length \(window.count) differs from frame_length \(frameLength)")
            }
            guard step >= 1 else { throw ctx.error(.executionFailed, "frame_step must be positive, got \(step)") }
            guard frameLength >= 1, frameLength <= x.shape[1] else {
                throw ctx.error(.executionFailed, "frame_length \(frameLength) must be between 1 and the signal length \(x.shape[1])")
            }
            return [try shortTimeFourierTransform(x, step: step, window: window?.doubles, frameLength: frameLength, onesided: onesided == 1,
                                                  as: inputs[0]!.dtype, ctx)]
        }
    },
    "MelWeightMatrix": { ctx in
        let dtype = try dtypeAttribute(ctx, "output_datatype", .float32)
        guard dtype.isFloatingPoint else { throw ctx.unsupported("output_datatype", "= \(dtype) (expected a floating-point type)") }
        return PreparedKernel { inputs in
            guard let melBins = try integerScalar(inputs, 0, "num_mel_bins", ctx), let dftLength = try integerScalar(inputs, 1, "dft_length", ctx),
                  let sampleRate = try integerScalar(inputs, 2, "sample_rate", ctx) else {
                throw ctx.error(.invalidModel, "num_mel_bins, dft_length and sample_rate are required")
            }
            let lower = try inputs.required(3, ctx), upper = try inputs.required(4, ctx)
            guard lower.count == 1, upper.count == 1 else { throw ctx.error(.executionFailed, "lower_edge_hertz and upper_edge_hertz must be scalars") }
            guard melBins >= 1, melBins <= 1 << 16, dftLength >= 1, dftLength <= 1 << 24, sampleRate >= 1 else {
                throw ctx.error(.executionFailed, "num_mel_bins \(melBins), dft_length \(dftLength), sample_rate \(sampleRate) out of range")
            }
            guard let values = melWeightMatrix(melBins: melBins, dftLength: dftLength, sampleRate: sampleRate,
                                               lower: lower.doubleValue(at: 0), upper: upper.doubleValue(at: 0)) else {
                throw ctx.error(.executionFailed, "edges \(lower.doubleValue(at: 0))-\(upper.doubleValue(at: 0)) Hz fall outside the \(dftLength / 2 + 1) bins of a \(dftLength)-point DFT at \(sampleRate) Hz")
            }
            return [try castTensor(Tensor(shape: [dftLength / 2 + 1, melBins], scalars: values), to: dtype, ctx)]
        }
    },
]
