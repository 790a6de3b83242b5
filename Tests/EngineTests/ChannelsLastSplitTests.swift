import Testing
@testable import Engine
import TestSupport

/// The channels-last kernels' splits over the compute threads: every output once, and the same bits at 1 and 2 threads.
@Suite(.serialized) struct ChannelsLastSplitTests {
    /// Shapes of MobileNet-style layers: many rows, a 7x7 image (9 bands), one squeezed row, odd strips and tails.
    private static let shapes: [(rows: Int, columns: Int, depth: Int)] = [
        (3136, 24, 72), (49, 160, 960), (49, 960, 160), (1, 960, 240), (1, 1000, 1280), (7, 33, 5000), (98, 112, 672), (0, 64, 64),
    ]

    @Test func tasksCoverEveryOutputOnce() {
        for (rows, columns, depth) in Self.shapes {
            for threads in [1, 2, 3, 8] {
                let split = PointwiseSplit(rows: rows, columns: columns, depth: depth, threads: threads)
                var hits = [Int](repeating: 0, count: split.bands * split.strips)
                for t in 0..<split.tasks {
                    let (bands, strips) = split.task(t)
                    for b in bands { for s in strips { hits[b * split.strips + s] += 1 } }
                }
                #expect(hits.allSatisfy { $0 == 1 }, "\(rows)x\(columns)x\(depth) threads \(threads)")
                if threads == 1 { #expect(split.tasks == 1) }
            }
        }
    }

    /// A 7x7 layer and a squeezed row get work for both threads (they ran as one task before).
    @Test func fewRowsStillGiveEveryThreadWork() {
        for (rows, columns, depth) in [(49, 160, 960), (1, 960, 1280)] {
            let split = PointwiseSplit(rows: rows, columns: columns, depth: depth, threads: 2)
            #expect(split.tasks >= 8, "\(rows)x\(columns)x\(depth): \(split.tasks) tasks")
        }
    }

    @Test func productIsIdenticalAtOneAndTwoThreads() {
        var rng = SeededGenerator(seed: 31)
        defer { EngineThreads.configure(threads: 2) }
        for (rows, columns, depth) in Self.shapes where rows > 0 {
            let a = rng.floats(rows * depth), w = rng.floats(depth * columns), bias = rng.floats(columns)
            let residual = rng.floats(rows * columns)
            let packed = PackedMatrixB(w, depth: depth, columns: columns)
            // HardSwish runs in the kernel's registers: the same bits at any split. GELU runs after each task's block
            // (the strided epilogue), whose vector tails move with the split: within tolerance of the reference only.
            for activation in [Activation.hardSwish, .gelu] {
                var outputs: [[Float]] = []
                for threads in [1, 2] {
                    EngineThreads.configure(threads: threads)
                    var out = [Float](repeating: .nan, count: rows * columns)
                    pointwiseProduct(a, rows: rows, packed, bias: bias, residual: residual, activation: activation, output: &out)
                    outputs.append(out)
                }
                if activation == .hardSwish { #expect(outputs[0] == outputs[1], "\(rows)x\(columns)x\(depth) \(activation)") }
                expectClose(outputs[0], outputs[1], "\(rows)x\(columns)x\(depth) \(activation) at 1 and 2 threads")
                var reference = [Float](repeating: 0, count: rows * columns)
                packedMatmulReference(a, lda: depth, rows: rows, b: w, depth: depth, columns: columns, bias: bias, residual: residual,
                                      activation: activation, out: &reference)
                expectClose(outputs[1], reference, "\(rows)x\(columns)x\(depth) \(activation)")
            }
        }
    }

    /// The squeeze-scaled product (one region over images and split tasks): the same bits at 1 and 2 threads, and the
    /// product of the scaled input. Images of more pixels than padded outputs scale each task's strips of the weights
    /// instead of its rows (3x49 240->40, 2x196, and 1x90 512->80, whose two-thread split also cuts the strips).
    @Test func scaledProductIsIdenticalAtOneAndTwoThreads() {
        var rng = SeededGenerator(seed: 33)
        defer { EngineThreads.configure(threads: 2) }
        for (batch, pixels, c, m) in [(1, 49, 960, 160), (3, 49, 240, 40), (2, 196, 120, 48), (1, 1, 64, 16), (8, 49, 576, 96), (1, 90, 512, 80)] {
            let x = rng.floats(batch * pixels * c), w = rng.floats(c * m), bias = rng.floats(m)
            let residual = rng.floats(batch * pixels * m), scale = rng.floats(batch * c)
            let packed = PackedMatrixB(w, depth: c, columns: m)
            var outputs: [[Float]] = []
            for threads in [1, 2] {
                EngineThreads.configure(threads: threads)
                var out = [Float](repeating: .nan, count: batch * pixels * m)
                scale.withUnsafeBufferPointer { sp in
                    channelsLastPointwise(x, batch: batch, pixels: pixels, packed, bias: bias, residual: residual, scale: sp.baseAddress,
                                          activation: .hardSwish, output: &out)
                }
                outputs.append(out)
            }
            #expect(outputs[0] == outputs[1], "\(batch)x\(pixels) \(c)->\(m)")
            var a = x
            for n in 0..<batch { for p in 0..<pixels { for k in 0..<c { a[(n * pixels + p) * c + k] *= scale[n * c + k] } } }
            var reference = [Float](repeating: 0, count: batch * pixels * m)
            packedMatmulReference(a, lda: c, rows: batch * pixels, b: w, depth: c, columns: m, bias: bias, residual: residual,
                                  activation: .hardSwish, out: &reference)
            expectClose(outputs[1], reference, "\(batch)x\(pixels) \(c)->\(m)")
        }
    }
}
