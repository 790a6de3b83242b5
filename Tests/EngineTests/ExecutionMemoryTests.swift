import Foundation
import Testing
import Tensor
import ONNX
@testable import Engine

/// Residual Add fusion (fused and unfused plans agree) and pooled buffers under repeated and concurrent runs.
@Suite struct ExecutionMemoryTests {
    private typealias T = TestSupport

    /// Seeded pseudo-random floats in [-1, 1).
    private static func random(_ count: Int, seed: UInt64) -> [Float] {
        var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
        return (0..<count).map { _ in
            state ^= state << 13; state ^= state >> 7; state ^= state << 17
            return Float(state % 2_000_000) / 1_000_000 - 1
        }
    }

    private static func tensor(_ shape: [Int], seed: UInt64) -> Tensor {
        Tensor(shape: shape, scalars: random(shape.reduce(1, *), seed: seed))
    }

    private static func conv(_ name: String, _ input: String, _ output: String, kernel: Int, group: Int = 1) -> Node {
        Node(name: name, opType: "Conv", inputs: [input, "\(name).w", "\(name).b"], outputs: [output],
             attributes: ["pads": .ints(Array(repeating: Int64(kernel / 2), count: 4)), "group": .int(Int64(group))])
    }

    /// A ResNet basic block with a downsampling skip, then a MobileNetV2-style projection + Add (skip first),
    /// then an Add whose skip broadcasts ([1, C, 1, 1]) followed by Clip, and finally a conv whose 1x1 output
    /// broadcasts up against a full feature map in an Add followed by Relu.
    private static func residualModel(channels c: Int) -> Model {
        var inits: [(name: String, tensor: Tensor)] = []
        var seed: UInt64 = 1
        func weights(_ name: String, out: Int, inPerGroup: Int, kernel: Int) {
            seed += 1
            inits.append((name: "\(name).w", tensor: tensor([out, inPerGroup, kernel, kernel], seed: seed)))
            seed += 1
            inits.append((name: "\(name).b", tensor: tensor([out], seed: seed)))
        }
        weights("c1", out: c, inPerGroup: c, kernel: 3)
        weights("c2", out: c, inPerGroup: c, kernel: 3)
        weights("down", out: c, inPerGroup: c, kernel: 1)
        weights("expand", out: 2 * c, inPerGroup: c, kernel: 1)
        weights("dw", out: 2 * c, inPerGroup: 1, kernel: 3)
        weights("project", out: c, inPerGroup: 2 * c, kernel: 1)
        weights("pw", out: c, inPerGroup: c, kernel: 1)
        weights("tiny", out: c, inPerGroup: c, kernel: 1)
        inits.append((name: "lo", tensor: Tensor(scalar: Float(-0.5))))
        inits.append((name: "hi", tensor: Tensor(scalar: Float(0.75))))
        let nodes: [Node] = [
            conv("c1", "x", "a1", kernel: 3),
            Node(name: "r1", opType: "Relu", inputs: ["a1"], outputs: ["h1"]),
            conv("c2", "h1", "a2", kernel: 3),
            conv("down", "x", "d", kernel: 1),
            Node(name: "add1", opType: "Add", inputs: ["a2", "d"], outputs: ["s1"]),
            Node(name: "r2", opType: "Relu", inputs: ["s1"], outputs: ["b1"]),
            conv("expand", "b1", "e", kernel: 1),
            Node(name: "r3", opType: "Relu", inputs: ["e"], outputs: ["e1"]),
            conv("dw", "e1", "e2", kernel: 3, group: 2 * c),
            conv("project", "e2", "p", kernel: 1),
            Node(name: "add2", opType: "Add", inputs: ["b1", "p"], outputs: ["b2"]),
            conv("pw", "b2", "q", kernel: 1),
            Node(name: "add3", opType: "Add", inputs: ["q", "gate"], outputs: ["s3"]),
            Node(name: "clip", opType: "Clip", inputs: ["s3", "lo", "hi"], outputs: ["b3"]),
            Node(name: "pool", opType: "GlobalAveragePool", inputs: ["b3"], outputs: ["g"]),
            conv("tiny", "g", "t", kernel: 1),
            Node(name: "add4", opType: "Add", inputs: ["t", "b3"], outputs: ["s4"]),
            Node(name: "r4", opType: "Relu", inputs: ["s4"], outputs: ["y"]),
        ]
        let inputs = [ValueInfo(name: "x", elementType: .float32, shape: [.symbolic("N"), .fixed(c), .fixed(9), .fixed(9)]),
                      ValueInfo(name: "gate", elementType: .float32, shape: [.fixed(1), .fixed(c), .fixed(1), .fixed(1)])]
        let graph = Graph(name: "residual", nodes: nodes, initializers: inits, inputs: inputs, outputs: [ValueInfo(name: "y")])
        return Model(opsetImports: ["": 17], graph: graph)
    }

    private static func feeds(batch: Int, channels: Int, seed: UInt64) -> [String: Tensor] {
        ["x": tensor([batch, channels, 9, 9], seed: seed), "gate": tensor([1, channels, 1, 1], seed: seed + 100)]
    }

    @Test func fusedResidualAddsMatchTheUnfusedPlan() throws {
        let model = Self.residualModel(channels: 8)
        // NCHW convs: a channels-last region would take these convs' residual Adds into its own kernels.
        let fused = try CompiledModel(model: model, baseDirectory: nil, fuseResiduals: true, channelsLast: false)
        let plain = try CompiledModel(model: model, baseDirectory: nil, fuseResiduals: false, channelsLast: false)
        for batch in [1, 3] {
            let f = Self.feeds(batch: batch, channels: 8, seed: UInt64(batch))
            let a = try fused.run(f)["y"]!, b = try plain.run(f)["y"]!
            #expect(a.shape == [batch, 8, 9, 9])
            #expect(T.close(T.floats(a), T.floats(b)))
        }
        let profile = try fused.profile(Self.feeds(batch: 1, channels: 8, seed: 9))
        let kinds = Set(profile.map(\.opType))
        #expect(kinds.contains("Conv+Add+relu"))
        #expect(kinds.contains("Conv+Add"))
        #expect(!kinds.contains("Add"))
    }

    @Test func repeatedRunsReuseBuffersAndStayCorrect() throws {
        let model = try CompiledModel(model: Self.residualModel(channels: 16), baseDirectory: nil, fuseResiduals: true)
        // Batch 16: activations of 81 KB, above the pool's 64 KB minimum (convs take no pooled scratch any more).
        let f = Self.feeds(batch: 16, channels: 16, seed: 5)
        let first = T.floats(try model.run(f)["y"]!)
        for _ in 0..<3 { #expect(T.floats(try model.run(f)["y"]!) == first) }
        let stats = CompiledModel.bufferPoolStatistics
        #expect(stats.hits > 0)
        #expect(stats.heldBytes <= 3 * stats.peakInUseBytes)
    }

    @Test func outputsHeldByCallersAreNotOverwritten() throws {
        let model = try CompiledModel(model: Self.residualModel(channels: 16), baseDirectory: nil, fuseResiduals: true)
        let a = try model.run(Self.feeds(batch: 4, channels: 16, seed: 1))["y"]!
        let snapshot = T.floats(a)
        for seed in 2..<5 { _ = try model.run(Self.feeds(batch: 4, channels: 16, seed: UInt64(seed))) }
        #expect(T.floats(a) == snapshot)
    }

    @Test func pooledBatchStacksRowsLikeConcatenatingRows() {
        // Rows of 40 x 1024 floats (160 KiB): each part and the stacked batch are above the pool's 64 KiB minimum.
        let whole = Self.tensor([5, 40, 1024], seed: 21)
        let parts = [whole.rows(0..<1), whole.rows(1..<3), whole.rows(3..<5), Self.tensor([2, 40, 1024], seed: 22)]
        let pooled = Tensor.pooledBatch(concatenating: parts)
        let plain = Tensor.concatenatingRows(parts)
        #expect(pooled.shape == [7, 40, 1024])
        #expect(T.floats(pooled) == T.floats(plain))
        let small = [Self.tensor([1, 3], seed: 23), Self.tensor([2, 3], seed: 24)]
        #expect(T.floats(Tensor.pooledBatch(concatenating: small)) == T.floats(Tensor.concatenatingRows(small)))
        let a = Array("a".utf8), b = Array("b".utf8)
        let strings = Tensor.pooledBatch(concatenating: [Tensor(shape: [1], strings: [a]), Tensor(shape: [1], strings: [b])])
        #expect(strings.strings == [a, b])
    }

    @Test func concurrentRunsOfOneModelGiveEachTheirOwnResults() throws {
        let model = try CompiledModel(model: Self.residualModel(channels: 16), baseDirectory: nil, fuseResiduals: true)
        let inputs = (0..<4).map { Self.feeds(batch: 1 + $0 % 2, channels: 16, seed: UInt64(10 + $0)) }
        let expected = try inputs.map { T.floats(try model.run($0)["y"]!) }
        let failures = Counter()
        DispatchQueue.concurrentPerform(iterations: 4) { worker in
            for round in 0..<6 {
                let k = (worker + round) % inputs.count
                guard let y = try? model.run(inputs[k])["y"], T.floats(y) == expected[k] else { failures.add(); continue }
            }
        }
        #expect(failures.value == 0)
    }

    @Test(arguments: [1, 3, 6]) func gemmMatchesNaiveProductForEveryTransposeAndRowCount(rows m: Int) throws {
        let k = 7, n = 5
        for transA in [false, true] {
            for transB in [false, true] {
                let a = Self.tensor(transA ? [k, m] : [m, k], seed: 3), b = Self.tensor(transB ? [n, k] : [k, n], seed: 4)
                let c = Self.tensor([n], seed: 5)
                let y = try T.runNode("Gemm", [("a", a), ("b", b), ("c", c)],
                                      attributes: ["transA": .int(transA ? 1 : 0), "transB": .int(transB ? 1 : 0), "alpha": .float(1.5), "beta": .float(0.5)],
                                      constants: ["b", "c"])[0]
                let af = T.floats(a), bf = T.floats(b), cf = T.floats(c)
                var expected: [Float] = []
                for i in 0..<m {
                    for j in 0..<n {
                        var sum: Float = 0
                        for p in 0..<k { sum += (transA ? af[p * m + i] : af[i * k + p]) * (transB ? bf[j * k + p] : bf[p * n + j]) }
                        expected.append(1.5 * sum + 0.5 * cf[j])
                    }
                }
                #expect(y.shape == [m, n])
                #expect(T.close(T.floats(y), expected), "transA \(transA) transB \(transB) rows \(m)")
            }
        }
    }

    @Test func batchedPointwiseConvMatchesTheReference() throws {
        let x = Self.tensor([3, 8, 9, 9], seed: 21), w = Self.tensor([6, 8, 1, 1], seed: 22), b = Self.tensor([6], seed: 23)
        // Constant weights take the packed path (image by image for small planes); runtime weights the reference.
        let packed = try T.runNode("Conv", [("x", x), ("w", w), ("b", b)], constants: ["w", "b"])[0]
        let reference = try T.runNode("Conv", [("x", x), ("w", w), ("b", b)])[0]
        #expect(packed.shape == [3, 6, 9, 9])
        #expect(T.close(T.floats(packed), T.floats(reference)))
    }

    @Test func sizeClassesBoundTheSlack() {
        for bytes in [65_536, 65_537, 100_000, 802_816, 3_211_264, 12_845_056] {
            let size = BufferPool.sizeClass(bytes)
            #expect(size >= bytes && Double(size) <= Double(bytes) * 1.25)
        }
    }
}

/// A lock-protected failure count for the concurrency test.
private final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func add() { lock.lock(); count += 1; lock.unlock() }
    var value: Int { lock.lock(); defer { lock.unlock() }; return count }
}
