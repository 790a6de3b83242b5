import Testing
import Tensor
@testable import Engine
import TestSupport

/// The direct NCHW resize kernel against the separable per-axis path, its reference twin.
@Suite struct ResizePlanesTests {
    @Test(arguments: [1, 2])
    func nearestAndLinearMatchTheSeparablePath(threads: Int) throws {
        EngineThreads.configure(threads: threads)
        defer { EngineThreads.configure(threads: 2) }
        var rng = SeededGenerator(seed: 31)
        let ctx = OpContext(node: .init(opType: "Resize", inputs: [], outputs: []), opset: 19, constants: [:], activation: .none)
        let cases: [([Int], [Float])] = [([1, 3, 5, 7], [1, 1, 2, 2]), ([2, 4, 10, 10], [1, 1, 4, 4]), ([1, 2, 9, 6], [1, 1, 0.5, 1.5]),
                                         ([1, 64, 20, 20], [1, 1, 2, 2]), ([1, 1, 3, 4], [1, 1, 3, 2.5])]
        for (shape, scales) in cases {
            let x = Tensor(shape: shape, scalars: rng.floats(shape.reduce(1, *)))
            let outShape = (0..<4).map { Int((Float(shape[$0]) * scales[$0]).rounded(.down)) }
            for (mode, coordinates, nearest) in [("nearest", "asymmetric", "floor"), ("nearest", "half_pixel", "round_prefer_floor"),
                                                 ("linear", "half_pixel", "floor"), ("linear", "align_corners", "floor"),
                                                 ("linear", "pytorch_half_pixel", "floor")] {
                var r = ResizeAttributes()
                r.mode = mode
                r.coordinateMode = coordinates
                r.nearestMode = nearest
                #expect(resizePlanes(x, outShape: outShape, scales: scales, scalesGiven: true, r) != nil)
                let fast = try resize(x, outShape: outShape, scales: scales, scalesGiven: true, roi: nil, r, ctx)
                let plain = try resize(x, outShape: outShape, scales: scales, scalesGiven: true, roi: nil, r, ctx, direct: false)
                #expect(fast.shape == plain.shape)
                #expect(TestSupport.close(TestSupport.floats(fast), TestSupport.floats(plain)), "\(shape) \(scales) \(mode) \(coordinates)")
            }
        }
    }
}
