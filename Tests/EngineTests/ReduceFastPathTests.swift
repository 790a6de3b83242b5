import Testing
@testable import Engine
import Tensor
import TestSupport

@Suite struct ReduceFastPathTests {
    /// The vector path of ReduceSum and ReduceMean over trailing axes against the generic per-element reduction.
    @Test func trailingSumsAndMeansMatchReference() {
        var rng = SeededGenerator(seed: 41)
        let cases: [([Int], Set<Int>)] = [([1, 1024, 7, 7], [2, 3]), ([2, 3, 5], [2]), ([4, 37], [1]), ([3, 2, 17], [1, 2]),
                                          ([5, 1, 1], [1, 2]), ([6], [0])]
        forEachReduction(cases, &rng) { fast, plain, label in
            #expect(fast?.shape == plain.shape, "\(label)")
            expectClose(fast?.scalars(as: Float.self) ?? [], plain.scalars(as: Float.self), label)
        } fast: { reduceTrailingFloats($0, axes: $1, keepDims: $2, mean: $3) }
        // Leading or middle axes stay on the generic path.
        #expect(reduceTrailingFloats(Tensor(shape: [2, 3], scalars: [Float](repeating: 1, count: 6)), axes: [0], keepDims: true, mean: true) == nil)
    }

    /// The row path over a block of leading or middle axes (mean pooling over tokens, NHWC global pooling, inner
    /// widths below, at and past one 64-lane block) gives exactly the generic reduction's values: rows add in order.
    @Test func middleSumsAndMeansMatchReferenceExactly() {
        var rng = SeededGenerator(seed: 43)
        let cases: [([Int], Set<Int>)] = [([1, 128, 384], [1]), ([2, 7, 7, 130], [1, 2]), ([3, 5], [0]), ([2, 3, 4, 5], [1, 2]),
                                          ([40, 1, 3], [0, 1]), ([2, 1000, 1, 70], [1])]
        forEachReduction(cases, &rng) { fast, plain, label in
            #expect(fast?.shape == plain.shape, "\(label)")
            #expect(fast?.scalars(as: Float.self) == plain.scalars(as: Float.self), "\(label)")
        } fast: { reduceMiddleFloats($0, axes: $1, keepDims: $2, mean: $3) }
        // Trailing axes and axes with a gap are not this path's.
        let x = Tensor(shape: [2, 3, 4], scalars: [Float](repeating: 1, count: 24))
        #expect(reduceMiddleFloats(x, axes: [2], keepDims: true, mean: false) == nil)
        #expect(reduceMiddleFloats(x, axes: [0, 2], keepDims: true, mean: false) == nil)
    }

    /// Runs `fast` and the generic reduction on random inputs of each case, with and without kept axes, sum and mean,
    /// and hands both results to `check` with a label.
    private func forEachReduction(_ cases: [([Int], Set<Int>)], _ rng: inout SeededGenerator,
                                  check: (Tensor?, Tensor, String) -> Void, fast: (Tensor, Set<Int>, Bool, Bool) -> Tensor?) {
        for (shape, axes) in cases {
            let x = Tensor(shape: shape, scalars: rng.floats(shape.reduce(1, *)))
            for keepDims in [false, true] {
                for mean in [false, true] {
                    let plain = reduce(x, axes: axes, keepDims: keepDims, initial: Float(0), pre: { $0 }, combine: +,
                                       post: { a, n in mean ? a / Float(n) : a })
                    check(fast(x, axes, keepDims, mean), plain, "\(shape) \(axes) keepDims \(keepDims) mean \(mean)")
                }
            }
        }
    }
}
