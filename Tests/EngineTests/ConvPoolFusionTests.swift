import Testing
import Tensor
import ONNX
@testable import Engine
import TestSupport

private typealias T = TestSupport

/// A Conv (+ clamp) and the MaxPool that alone reads it, compiled with the `ConvMaxPool` fusion and without.
@Suite struct ConvPoolFusionTests {
    /// One conv-and-pool shape: the conv's channels, kernel, stride and pads, then the pool's.
    struct Case: Sendable, CustomStringConvertible {
        var inChannels = 3, outChannels = 20, kernel = 3, stride = 2, pad = 0
        var poolKernel = 3, poolStride = 2, poolPad = 0, ceil = 1
        var activation = "Relu"
        var height = 41, width = 37
        var description: String { "\(inChannels)->\(outChannels) k\(kernel) s\(stride) p\(pad), pool k\(poolKernel) s\(poolStride) p\(poolPad) ceil \(ceil), \(activation), \(height)x\(width)" }
    }

    /// x [N, C, H, W] -> Conv (+ `activation`) -> MaxPool -> y; with `sharedConv` the conv output is an output too.
    static func model(_ c: Case, sharedConv: Bool = false) -> Model {
        var rng = SeededGenerator(seed: 23)
        let k = c.kernel
        let inits: [(name: String, tensor: Tensor)] = [
            ("w", Tensor(shape: [c.outChannels, c.inChannels, k, k], scalars: rng.floats(c.outChannels * c.inChannels * k * k))),
            ("b", Tensor(shape: [c.outChannels], scalars: rng.floats(c.outChannels))),
            ("lo", Tensor(shape: [], scalars: [Float(0)])), ("hi", Tensor(shape: [], scalars: [Float(0.5)])),
        ]
        var nodes = [Node(opType: "Conv", inputs: ["x", "w", "b"], outputs: [c.activation.isEmpty ? "c" : "c0"],
                          attributes: ["kernel_shape": .ints([Int64(k), Int64(k)]), "strides": .ints([Int64(c.stride), Int64(c.stride)]),
                                       "pads": .ints(Array(repeating: Int64(c.pad), count: 4))])]
        switch c.activation {
        case "Relu": nodes.append(Node(opType: "Relu", inputs: ["c0"], outputs: ["c"]))
        case "Clip": nodes.append(Node(opType: "Clip", inputs: ["c0", "lo", "hi"], outputs: ["c"]))
        default: break
        }
        nodes.append(Node(opType: "MaxPool", inputs: ["c"], outputs: ["y"],
                          attributes: ["kernel_shape": .ints([Int64(c.poolKernel), Int64(c.poolKernel)]),
                                       "strides": .ints([Int64(c.poolStride), Int64(c.poolStride)]),
                                       "pads": .ints(Array(repeating: Int64(c.poolPad), count: 4)), "ceil_mode": .int(Int64(c.ceil))]))
        let inputs = [ValueInfo(name: "x", elementType: .float32, shape: [.symbolic("N"), .fixed(c.inChannels), .symbolic("H"), .symbolic("W")])]
        let outputs = [ValueInfo(name: "y")] + (sharedConv ? [ValueInfo(name: "c")] : [])
        return Model(opsetImports: ["": 17], graph: Graph(name: "stem", nodes: nodes, initializers: inits, inputs: inputs, outputs: outputs))
    }

    /// `fusedStepKindsMatchingUnfused` on the case's model.
    private static func check(_ c: Case, sharedConv: Bool = false) throws -> Set<String> {
        try T.fusedStepKindsMatchingUnfused(model(c, sharedConv: sharedConv), seed: 7, label: "\(c)") { batch, rng in
            Tensor(shape: [batch, c.inChannels, c.height, c.width], scalars: rng.floats(batch * c.inChannels * c.height * c.width))
        }
    }

    static let cases: [Case] = [
        Case(),  // SqueezeNet 1.1's stem: 3x3 stride 2, no pads, then a 3x3 stride-2 ceil-mode pool
        Case(outChannels: 16, kernel: 7, pad: 3, poolPad: 1, ceil: 0),  // ResNet's: 7x7 stride 2 pad 3, pool pad 1
        Case(inChannels: 2, outChannels: 9, stride: 1, pad: 1, poolKernel: 2, ceil: 0, activation: "Clip", height: 30, width: 19),
        Case(inChannels: 4, outChannels: 8, kernel: 5, stride: 3, pad: 2, poolKernel: 3, poolStride: 1, poolPad: 1, activation: "",
             height: 52, width: 70),
    ]

    @Test(arguments: cases)
    func stemConvAndItsPoolFuse(_ c: Case) throws {
        let kinds = try Self.check(c)
        #expect(kinds.contains { $0.hasPrefix(convMaxPoolOp) } && !kinds.contains("MaxPool"), "\(kinds)")
    }

    /// A conv output read elsewhere too, or a conv with too many taps, keeps its MaxPool.
    @Test func sharedOrWideConvsKeepTheirPool() throws {
        #expect(try Self.check(Case(), sharedConv: true).contains("MaxPool"))
        #expect(try Self.check(Case(inChannels: 32, outChannels: 8, height: 17, width: 15)).contains("MaxPool"))
    }
}
