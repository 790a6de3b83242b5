/// The three F(4x4, 3x3) Winograd transforms (Lavin and Gray): a 6x6 input tile d becomes B^T d B, a 3x3 filter g
/// becomes G g G^T, and the 36 per-position products m become the 4x4 outputs A^T m A.
///
/// The input and output transforms work on vectors of 8 channels (one AVX2 register): every "value" below is the
/// same tile position in 8 channels, so the transforms are plain lane-wise arithmetic with no shuffles. Each 2-D
/// transform is two passes of the 1-D one through a 6x6 (or 6x4) buffer of such vectors.
enum Winograd {
    /// Output rows and columns per tile.
    static let outputTile = 4
    /// Input rows and columns per tile (output tile + kernel - 1).
    static let inputTile = 6
    /// Positions of the transformed domain (6 x 6): one product per position.
    static let positions = 36
    /// Channels per transform vector.
    static let lanes = 8

    /// G (6x3) in double precision: the filter transform is done once, so it is done exactly and rounded once.
    static let filterMatrix: [[Double]] = [
        [1.0 / 4, 0, 0],
        [-1.0 / 6, -1.0 / 6, -1.0 / 6],
        [-1.0 / 6, 1.0 / 6, -1.0 / 6],
        [1.0 / 24, 1.0 / 12, 1.0 / 6],
        [1.0 / 24, -1.0 / 12, 1.0 / 6],
        [0, 0, 1],
    ]

    /// G g G^T of one row-major 3x3 filter, 36 values row-major (position i * 6 + j).
    static func transformFilter(_ g: UnsafePointer<Float>) -> [Float] {
        let gm = filterMatrix
        // t = G g (6x3), then u = t G^T (6x6).
        var t = [[Double]](repeating: [0, 0, 0], count: 6)
        for i in 0..<6 {
            for j in 0..<3 {
                var s = 0.0
                for k in 0..<3 { s += gm[i][k] * Double(g[k * 3 + j]) }
                t[i][j] = s
            }
        }
        var u = [Float](repeating: 0, count: 36)
        for i in 0..<6 {
            for j in 0..<6 {
                var s = 0.0
                for k in 0..<3 { s += t[i][k] * gm[j][k] }
                u[i * 6 + j] = Float(s)
            }
        }
        return u
    }

    /// One 1-D input transform, B^T d, over 6 vectors `stride` floats apart; results `outStride` apart.
    @inline(__always)
    static func input1D(_ d: UnsafePointer<Float>, stride: Int, _ out: UnsafeMutablePointer<Float>, outStride: Int) {
        typealias V = SIMD8<Float>
        let d0 = d.vector(V.self), d1 = (d + stride).vector(V.self), d2 = (d + 2 * stride).vector(V.self)
        let d3 = (d + 3 * stride).vector(V.self), d4 = (d + 4 * stride).vector(V.self), d5 = (d + 5 * stride).vector(V.self)
        let four = V(repeating: 4), five = V(repeating: 5), two = V(repeating: 2)
        // t1,t2 = (d4 - 4 d2) +- (d3 - 4 d1); t3,t4 = (d4 - d2) +- 2 (d3 - d1).
        let a = d4 - four * d2, b = d3 - four * d1
        let c = d4 - d2, e = two * (d3 - d1)
        out.store(four * d0 - five * d2 + d4)
        (out + outStride).store(a + b)
        (out + 2 * outStride).store(a - b)
        (out + 3 * outStride).store(c + e)
        (out + 4 * outStride).store(c - e)
        (out + 5 * outStride).store(four * d1 - five * d3 + d5)
    }

    /// One 1-D output transform, A^T m, over 6 vectors `stride` floats apart; 4 results `outStride` apart.
    @inline(__always)
    static func output1D(_ m: UnsafePointer<Float>, stride: Int, _ out: UnsafeMutablePointer<Float>, outStride: Int) {
        typealias V = SIMD8<Float>
        let m0 = m.vector(V.self), m1 = (m + stride).vector(V.self), m2 = (m + 2 * stride).vector(V.self)
        let m3 = (m + 3 * stride).vector(V.self), m4 = (m + 4 * stride).vector(V.self), m5 = (m + 5 * stride).vector(V.self)
        let p = m1 + m2, q = m1 - m2, r = m3 + m4, s = m3 - m4
        out.store(m0 + p + r)
        (out + outStride).store(q + V(repeating: 2) * s)
        (out + 2 * outStride).store(p + V(repeating: 4) * r)
        (out + 3 * outStride).store(q + V(repeating: 8) * s + m5)
    }

    /// B^T d B of one 6x6 tile of 8 channels: d(i, j) at `tile + i * rowStride + j * columnStride`; position i * 6 + j
    /// of the result at `out + (i * 6 + j) * positionStride`. `scratch` holds 36 vectors.
    @inline(__always)
    static func inputTile(_ tile: UnsafePointer<Float>, rowStride: Int, columnStride: Int, scratch: UnsafeMutablePointer<Float>,
                          _ out: UnsafeMutablePointer<Float>, positionStride: Int) {
        // Rows first (into scratch, row i at 6 vectors), then the columns of scratch.
        for i in 0..<6 { input1D(tile + i * rowStride, stride: columnStride, scratch + i * 6 * lanes, outStride: lanes) }
        for j in 0..<6 {
            input1D(UnsafePointer(scratch + j * lanes), stride: 6 * lanes, out + j * positionStride, outStride: 6 * positionStride)
        }
    }

    /// A^T m A of one tile's 36 products of 8 channels (position p at `products + p * positionStride`) into the 4x4
    /// outputs, output (r, c) at `out + (r * 4 + c) * 8`. `scratch` holds 24 vectors.
    @inline(__always)
    static func outputTile(_ products: UnsafePointer<Float>, positionStride: Int, scratch: UnsafeMutablePointer<Float>,
                           _ out: UnsafeMutablePointer<Float>) {
        for i in 0..<6 { output1D(products + i * 6 * positionStride, stride: positionStride, scratch + i * 4 * lanes, outStride: lanes) }
        for c in 0..<4 { output1D(UnsafePointer(scratch + c * lanes), stride: 4 * lanes, out + c * lanes, outStride: 4 * lanes) }
    }
}
