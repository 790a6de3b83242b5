import Testing
import Tensor
@testable import Engine
import TestSupport

/// Block permutes (ShuffleNet's channel shuffle) against the generic strided copy, at one and two threads.
@Suite struct KernelBlockPermuteTests {
    /// Every permutation of rank 3-5 shapes (with size-1 axes) that reads as blocks moved between matrices equals the
    /// strided copy; the channel shuffle is recognised with its planes as blocks.
    @Test(.serialized, arguments: [1, 2])
    func blockPermuteMatchesTheStridedCopy(threads: Int) {
        EngineThreads.configure(threads: threads)
        defer { EngineThreads.configure(threads: 2) }
        var rng = SeededGenerator(seed: 19)
        func permutations(_ n: Int) -> [[Int]] {
            n == 1 ? [[0]] : permutations(n - 1).flatMap { p in (0...p.count).map { i in var q = p; q.insert(n - 1, at: i); return q } }
        }
        var recognised = 0
        for shape in [[2, 2, 58, 7, 7], [1, 2, 24, 28, 28], [3, 4, 5], [2, 3, 1, 4, 37], [1, 5, 6, 1, 1030], [4, 1, 3, 2]] {
            let x = Tensor(shape: shape, scalars: rng.floats(shape.reduce(1, *)))
            for perm in permutations(shape.count) {
                guard let m = transposeAsBlockMatrices(shape: shape, perm: perm) else { continue }
                #expect(transposeAsMatrices(shape: shape, perm: perm) == nil, "\(shape) perm \(perm) is also a plain transpose")
                recognised += 1
                let expected = stridedCopy(x, shape: perm.map { shape[$0] }, strides: perm.map { x.strides[$0] }, offset: 0)
                var actual = [Float](repeating: .nan, count: x.count)
                x.withUnsafeBytes { src in
                    actual.withUnsafeMutableBytes { dst in
                        blockPermute(src.baseAddress!, dst.baseAddress!, outer: m.outer, rows: m.rows, columns: m.columns, block: m.block)
                    }
                }
                #expect(actual == expected.scalars(as: Float.self), "\(shape) perm \(perm)")
            }
        }
        #expect(recognised > 10)
        let shuffle = transposeAsBlockMatrices(shape: [8, 2, 116, 14, 14], perm: [0, 2, 1, 3, 4])
        #expect(shuffle.map { [$0.outer, $0.rows, $0.columns, $0.block] } == [8, 2, 116, 196])
        #expect(transposeAsBlockMatrices(shape: [1, 96, 56, 56], perm: [0, 2, 3, 1]) == nil)
    }
}
