import Testing
import CKernelShim
import Foundation
@testable import Engine
import TestSupport

/// The integer GEMM against its plain twin: exact int32 results for u8 and s8 operands, scalar and per-row/per-column
/// zero points, every tile and panel tail, one and two threads.
@Suite struct KernelQuantizedGemmTests {
    private func check<A: FixedWidthInteger, B: FixedWidthInteger>(m: Int, n: Int, k: Int, a: [A], aZero: [Int32], b: [B], bZero: [Int32],
                                                                  _ label: String) {
        let packed = b.withUnsafeBufferPointer { PackedQuantizedMatrix(k: k, n: n, values: $0.baseAddress!, rowStride: n, zeroPoints: bZero) }
        var widened = [Int16](repeating: 0, count: max(1, m * quantizedRowStride(k)))
        a.withUnsafeBufferPointer { av in
            widened.withUnsafeMutableBufferPointer {
                widenQuantizedRows(m: m, k: k, values: av.baseAddress!, rowStride: k, zeroPoints: aZero, into: $0.baseAddress!)
            }
        }
        var fast = [Int32](repeating: -1, count: m * n), plain = [Int32](repeating: 0, count: m * n)
        widened.withUnsafeBufferPointer { w in fast.withUnsafeMutableBufferPointer { quantizedGemm(m: m, a: w.baseAddress!, b: packed, c: $0.baseAddress!, ldc: n) } }
        a.withUnsafeBufferPointer { av in
            b.withUnsafeBufferPointer { bv in
                plain.withUnsafeMutableBufferPointer {
                    quantizedGemmReference(m: m, n: n, k: k, a: av.baseAddress!, aZero: aZero, b: bv.baseAddress!, bZero: bZero, c: $0.baseAddress!)
                }
            }
        }
        #expect(fast == plain, "\(label) \(m)x\(n)x\(k)")
    }

    @Test(arguments: [1, 2])
    func matchesReference(threads: Int) {
        EngineThreads.configure(threads: threads)
        defer { EngineThreads.configure(threads: 2) }
        var rng = SeededGenerator(seed: 11)
        for (m, n, k) in [(1, 1, 1), (1, 16, 2), (5, 17, 3), (6, 16, 64), (7, 33, 9), (13, 40, 31), (64, 200, 147), (3, 1000, 288)] {
            let au = (0..<(m * k)).map { _ in UInt8.random(in: .min ... .max, using: &rng) }
            let bs = (0..<(k * n)).map { _ in Int8.random(in: .min ... .max, using: &rng) }
            check(m: m, n: n, k: k, a: au, aZero: [Int32(UInt8.random(in: 0...255, using: &rng))], b: bs, bZero: [0], "u8 x s8")
            let perColumn = (0..<n).map { _ in Int32(Int8.random(in: -20...20, using: &rng)) }
            check(m: m, n: n, k: k, a: au, aZero: [128], b: bs, bZero: perColumn, "u8 x s8, per-column zero points")
            let bu = (0..<(k * n)).map { _ in UInt8.random(in: .min ... .max, using: &rng) }
            let perRow = (0..<m).map { _ in Int32(UInt8.random(in: 0...255, using: &rng)) }
            check(m: m, n: n, k: k, a: au, aZero: perRow, b: bu, bZero: [Int32(UInt8.random(in: 0...255, using: &rng))], "u8 x u8, per-row zero points")
        }
    }

    /// Extremes where u8 x s8 pair sums overflow int16 (vpmaddubsw would saturate): still exact.
    @Test func extremesDoNotSaturate() {
        let m = 6, n = 16, k = 64
        check(m: m, n: n, k: k, a: [UInt8](repeating: 255, count: m * k), aZero: [0], b: [Int8](repeating: -128, count: k * n), bZero: [127],
              "255 x (-128 - 127)")
        check(m: m, n: n, k: k, a: [UInt8](repeating: 255, count: m * k), aZero: [0], b: [Int8](repeating: 127, count: k * n), bZero: [0],
              "255 x 127")
    }

    @Test func takesTheVectorPathWhereTheCPUHasAVX2() throws {
        let flags = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let avx2 = flags.split(separator: "\n").first { $0.hasPrefix("flags") }?.split(separator: " ").contains("avx2") ?? false
        #expect(osprey_qgemm_uses_avx2() == (avx2 ? 1 : 0))
    }
}
