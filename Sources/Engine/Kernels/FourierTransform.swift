import Foundation
import Infrastructure

/// A complex discrete Fourier transform of one length `n`, planned once and reused (thread-safe after init).
///
/// Lengths whose prime factors are all at most `FFTPlan.largestRadix` run a mixed-radix decimation-in-time FFT
/// (radix 4, 2, 3, 5 butterflies, a direct butterfly for other small primes); any other length runs Bluestein's
/// chirp-z algorithm on a power-of-two FFT, so every length costs O(n log n). `referenceDFT` is the plain twin.
/// Arithmetic is in Double: audio front ends feed float32 frames whose spectra must match onnxruntime's to 1e-4.
final class FFTPlan: @unchecked Sendable {
    /// Largest prime factor handled by a direct butterfly; a larger one switches the plan to Bluestein.
    static let largestRadix = 31

    /// The transform length.
    let n: Int
    private let factors: [Int]
    /// e^{-2πi j/n} for j in 0..<n (forward twiddles; the inverse runs on conjugated data).
    private let twiddleRe: [Double], twiddleIm: [Double]
    private let bluestein: Bluestein?

    /// Bluestein's chirp e^{-πi k²/n} and the transformed conjugate chirp filter, on an `inner` power-of-two plan.
    private struct Bluestein {
        let inner: FFTPlan
        let chirpRe: [Double], chirpIm: [Double]
        let filterRe: [Double], filterIm: [Double]
    }

    /// Plans a transform of length `n` (n >= 1).
    init(_ n: Int) {
        precondition(n >= 1, "FFT length must be positive")
        self.n = n
        var factors: [Int] = [], rest = n
        while rest % 4 == 0 { factors.append(4); rest /= 4 }
        while rest % 2 == 0 { factors.append(2); rest /= 2 }
        var p = 3
        while rest > 1 {
            if p * p > rest { factors.append(rest); rest = 1; break }
            while rest % p == 0 { factors.append(p); rest /= p }
            p += 2
        }
        let direct = factors.allSatisfy { $0 <= FFTPlan.largestRadix }
        self.factors = direct ? factors : []
        var re = [Double](repeating: 0, count: direct ? n : 0), im = re
        for j in 0..<re.count {
            let angle = -2 * Double.pi * Double(j) / Double(n)
            re[j] = cos(angle); im[j] = sin(angle)
        }
        twiddleRe = re; twiddleIm = im
        bluestein = direct ? nil : FFTPlan.planBluestein(n)
    }

    private static func planBluestein(_ n: Int) -> Bluestein {
        var m = 1
        while m < 2 * n - 1 { m <<= 1 }
        let inner = FFTPlan(m)
        var chirpRe = [Double](repeating: 0, count: n), chirpIm = chirpRe
        for k in 0..<n {
            // k² mod 2n keeps the angle small, so large k lose no precision.
            let angle = -Double.pi * Double((k * k) % (2 * n)) / Double(n)
            chirpRe[k] = cos(angle); chirpIm[k] = sin(angle)
        }
        var bRe = [Double](repeating: 0, count: m), bIm = bRe
        for k in 0..<n {
            bRe[k] = chirpRe[k]; bIm[k] = -chirpIm[k]
            if k > 0 { bRe[m - k] = chirpRe[k]; bIm[m - k] = -chirpIm[k] }
        }
        var fRe = [Double](repeating: 0, count: m), fIm = fRe
        bRe.withUnsafeBufferPointer { br in bIm.withUnsafeBufferPointer { bi in
            fRe.withUnsafeMutableBufferPointer { fr in fIm.withUnsafeMutableBufferPointer { fi in
                inner.transform(inRe: br.baseAddress!, inIm: bi.baseAddress!, outRe: fr.baseAddress!, outIm: fi.baseAddress!, inverse: false)
            } }
        } }
        return Bluestein(inner: inner, chirpRe: chirpRe, chirpIm: chirpIm, filterRe: fRe, filterIm: fIm)
    }

    /// out = DFT(in) (unnormalised; `inverse` uses e^{+2πi}, without the 1/n). Buffers hold `n` values each and
    /// must not overlap.
    func transform(inRe: UnsafePointer<Double>, inIm: UnsafePointer<Double>, outRe: UnsafeMutablePointer<Double>,
                   outIm: UnsafeMutablePointer<Double>, inverse: Bool) {
        if inverse {
            // DFT^-1(x) = conj(DFT(conj(x))): one set of twiddles serves both directions.
            let conjIm = UnsafeMutablePointer<Double>.allocate(capacity: n)
            defer { conjIm.deallocate() }
            for i in 0..<n { conjIm[i] = -inIm[i] }
            transform(inRe: inRe, inIm: UnsafePointer(conjIm), outRe: outRe, outIm: outIm, inverse: false)
            for i in 0..<n { outIm[i] = -outIm[i] }
            return
        }
        if n == 1 {
            outRe[0] = inRe[0]; outIm[0] = inIm[0]
            return
        }
        if let bluestein {
            runBluestein(bluestein, inRe, inIm, outRe, outIm)
            return
        }
        twiddleRe.withUnsafeBufferPointer { tr in twiddleIm.withUnsafeBufferPointer { ti in
            factors.withUnsafeBufferPointer { f in
                Self.mixedRadix(outRe, outIm, inRe, inIm, fstride: 1, factors: f.baseAddress!, remaining: n,
                                tr: tr.baseAddress!, ti: ti.baseAddress!)
            }
        } }
    }

    /// One decimation-in-time level: transforms the `p` interleaved sub-sequences (input stride `fstride`) into
    /// consecutive blocks of `m = remaining / p`, then combines them with twiddles w_{remaining}^{qk}.
    private static func mixedRadix(_ outRe: UnsafeMutablePointer<Double>, _ outIm: UnsafeMutablePointer<Double>,
                                   _ inRe: UnsafePointer<Double>, _ inIm: UnsafePointer<Double>, fstride: Int,
                                   factors: UnsafePointer<Int>, remaining: Int, tr: UnsafePointer<Double>, ti: UnsafePointer<Double>) {
        let p = factors[0], m = remaining / p
        if m == 1 {
            for q in 0..<p { outRe[q] = inRe[q * fstride]; outIm[q] = inIm[q * fstride] }
        } else {
            for q in 0..<p {
                mixedRadix(outRe + q * m, outIm + q * m, inRe + q * fstride, inIm + q * fstride, fstride: fstride * p,
                           factors: factors + 1, remaining: m, tr: tr, ti: ti)
            }
        }
        switch p {
        case 2: butterfly2(outRe, outIm, fstride: fstride, m: m, tr: tr, ti: ti)
        case 4: butterfly4(outRe, outIm, fstride: fstride, m: m, tr: tr, ti: ti)
        default: butterflyGeneric(outRe, outIm, p: p, fstride: fstride, m: m, tr: tr, ti: ti)
        }
    }

    @inline(__always)
    private static func butterfly2(_ re: UnsafeMutablePointer<Double>, _ im: UnsafeMutablePointer<Double>, fstride: Int, m: Int,
                                   tr: UnsafePointer<Double>, ti: UnsafePointer<Double>) {
        for k in 0..<m {
            let (wr, wi) = (tr[k * fstride], ti[k * fstride])
            let (br, bi) = (re[k + m] * wr - im[k + m] * wi, re[k + m] * wi + im[k + m] * wr)
            let (ar, ai) = (re[k], im[k])
            re[k] = ar + br; im[k] = ai + bi
            re[k + m] = ar - br; im[k + m] = ai - bi
        }
    }

    @inline(__always)
    private static func butterfly4(_ re: UnsafeMutablePointer<Double>, _ im: UnsafeMutablePointer<Double>, fstride: Int, m: Int,
                                   tr: UnsafePointer<Double>, ti: UnsafePointer<Double>) {
        for k in 0..<m {
            let (w1r, w1i) = (tr[k * fstride], ti[k * fstride])
            let (w2r, w2i) = (tr[2 * k * fstride], ti[2 * k * fstride])
            let (w3r, w3i) = (tr[3 * k * fstride], ti[3 * k * fstride])
            let (ar, ai) = (re[k], im[k])
            let (br, bi) = (re[k + m] * w1r - im[k + m] * w1i, re[k + m] * w1i + im[k + m] * w1r)
            let (cr, ci) = (re[k + 2 * m] * w2r - im[k + 2 * m] * w2i, re[k + 2 * m] * w2i + im[k + 2 * m] * w2r)
            let (dr, di) = (re[k + 3 * m] * w3r - im[k + 3 * m] * w3i, re[k + 3 * m] * w3i + im[k + 3 * m] * w3r)
            let (s0r, s0i) = (ar + cr, ai + ci), (s1r, s1i) = (ar - cr, ai - ci)
            let (s2r, s2i) = (br + dr, bi + di), (s3r, s3i) = (br - dr, bi - di)
            // Forward radix 4: X1 = s1 - i s3, X3 = s1 + i s3.
            re[k] = s0r + s2r; im[k] = s0i + s2i
            re[k + 2 * m] = s0r - s2r; im[k + 2 * m] = s0i - s2i
            re[k + m] = s1r + s3i; im[k + m] = s1i - s3r
            re[k + 3 * m] = s1r - s3i; im[k + 3 * m] = s1i + s3r
        }
    }

    /// A direct p-point DFT per column (p odd and small), with the twiddles of this level applied first.
    private static func butterflyGeneric(_ re: UnsafeMutablePointer<Double>, _ im: UnsafeMutablePointer<Double>, p: Int, fstride: Int,
                                         m: Int, tr: UnsafePointer<Double>, ti: UnsafePointer<Double>) {
        let n = fstride * p * m
        withUnsafeTemporaryAllocation(of: Double.self, capacity: 2 * p) { scratch in
            let sr = scratch.baseAddress!, si = sr + p
            for k in 0..<m {
                for q in 0..<p {
                    let t = (q * k * fstride) % n
                    let (xr, xi) = (re[k + q * m], im[k + q * m])
                    sr[q] = xr * tr[t] - xi * ti[t]; si[q] = xr * ti[t] + xi * tr[t]
                }
                for s in 0..<p {
                    var (accR, accI) = (sr[0], si[0])
                    // w_p^{qs} = w_n^{qs * fstride * m}.
                    let step = (s * fstride * m) % n
                    var t = 0
                    for q in 1..<p {
                        t += step; if t >= n { t -= n }
                        accR += sr[q] * tr[t] - si[q] * ti[t]
                        accI += sr[q] * ti[t] + si[q] * tr[t]
                    }
                    re[k + s * m] = accR; im[k + s * m] = accI
                }
            }
        }
    }

    /// X_k = c_k (a * b)_k with a_k = x_k c_k and b the conjugate chirp, the convolution done by the inner FFT.
    private func runBluestein(_ b: Bluestein, _ inRe: UnsafePointer<Double>, _ inIm: UnsafePointer<Double>,
                              _ outRe: UnsafeMutablePointer<Double>, _ outIm: UnsafeMutablePointer<Double>) {
        let m = b.inner.n
        let buffer = UnsafeMutablePointer<Double>.allocate(capacity: 4 * m)
        defer { buffer.deallocate() }
        let aRe = buffer, aIm = buffer + m, fRe = buffer + 2 * m, fIm = buffer + 3 * m
        aRe.initialize(repeating: 0, count: 2 * m)
        for k in 0..<n {
            aRe[k] = inRe[k] * b.chirpRe[k] - inIm[k] * b.chirpIm[k]
            aIm[k] = inRe[k] * b.chirpIm[k] + inIm[k] * b.chirpRe[k]
        }
        b.inner.transform(inRe: aRe, inIm: aIm, outRe: fRe, outIm: fIm, inverse: false)
        for k in 0..<m {
            let (xr, xi) = (fRe[k], fIm[k])
            fRe[k] = xr * b.filterRe[k] - xi * b.filterIm[k]
            fIm[k] = xr * b.filterIm[k] + xi * b.filterRe[k]
        }
        b.inner.transform(inRe: fRe, inIm: fIm, outRe: aRe, outIm: aIm, inverse: true)
        let scale = 1 / Double(m)
        for k in 0..<n {
            let (xr, xi) = (aRe[k] * scale, aIm[k] * scale)
            outRe[k] = xr * b.chirpRe[k] - xi * b.chirpIm[k]
            outIm[k] = xr * b.chirpIm[k] + xi * b.chirpRe[k]
        }
    }

    /// The plan for length `n`, shared: STFT and DFT nodes ask for the same few lengths on every run.
    static func shared(_ n: Int) -> FFTPlan {
        if let plan = cache.withLock({ $0[n] }) { return plan }
        let plan = FFTPlan(n)
        cache.withLock { plans in
            if plans.count > 64 { plans.removeAll() }
            plans[n] = plan
        }
        return plan
    }

    private static let cache = Locked<[Int: FFTPlan]>([:])
}

/// The plain O(n²) DFT, the reference twin of `FFTPlan.transform` (unnormalised; `inverse` uses e^{+2πi}).
func referenceDFT(re: [Double], im: [Double], inverse: Bool) -> (re: [Double], im: [Double]) {
    let n = re.count
    var outRe = [Double](repeating: 0, count: n), outIm = outRe
    let sign: Double = inverse ? 1 : -1
    for k in 0..<n {
        for j in 0..<n {
            let angle = sign * 2 * Double.pi * Double((k * j) % n) / Double(n)
            let (c, s) = (cos(angle), sin(angle))
            outRe[k] += re[j] * c - im[j] * s
            outIm[k] += re[j] * s + im[j] * c
        }
    }
    return (outRe, outIm)
}
