import Testing
import Tensor
import ONNX
@testable import Engine

/// Small malformed models found by the fuzzer (Tests/Fuzz): each must fail with an EngineError, never trap or hang.
@Suite struct HostileModelTests {
    typealias T = TestSupport

    /// Fuzz input: Resize with `sizes` [N, C, 7017574068517863433, 116] spun building 7e18 taps (timeout).
    @Test func resizeToAbsurdSizesIsAnError() throws {
        let x = T.f([1, 1, 2, 2], [1, 2, 3, 4])
        let sizes = T.i([4], [1, 1, 7_017_574_068_517_863_433, 116])
        #expect(throws: EngineError.self) {
            try T.runNode("Resize", [("x", x), ("", T.f([0], [])), ("", T.f([0], [])), ("z", sizes)], opset: 13)
        }
        #expect(throws: EngineError.self) {
            try T.runNode("Resize", [("x", x), ("", T.f([0], [])), ("", T.f([0], [])), ("z", T.i([4], [1, 1, -3, 2]))], opset: 13)
        }
    }

    /// Scales that overflow `Int(_:)` (infinite, NaN) trapped in the float-to-int conversion.
    @Test func resizeAndUpsampleWithNonFiniteScalesAreErrors() throws {
        let x = T.f([1, 1, 2, 2], [1, 2, 3, 4])
        #expect(throws: EngineError.self) {
            try T.runNode("Resize", [("x", x), ("", T.f([0], [])), ("s", T.f([4], [1, 1, 3e38, 2]))], opset: 13)
        }
        #expect(throws: EngineError.self) {
            try T.runNode("Upsample", [("x", x), ("s", T.f([4], [1, 1, .nan, 2]))], opset: 9)
        }
    }

    /// A tf_crop_and_resize roi of infinity made the source coordinate infinite, and `Int(_:)` trapped on it.
    @Test func cropAndResizeWithInfiniteRoiExtrapolates() throws {
        let x = T.f([1, 1, 2, 2], [1, 2, 3, 4])
        let roi = T.f([8], [0, 0, .infinity, 0, 1, 1, 1, 1])
        let y = try T.runNode("Resize", [("x", x), ("roi", roi), ("s", T.f([4], [1, 1, 2, 2]))],
                              attributes: ["coordinate_transformation_mode": .string(Array("tf_crop_and_resize".utf8)),
                                           "mode": .string(Array("linear".utf8)), "extrapolation_value": .float(-7)], opset: 13)[0]
        #expect(y.shape == [1, 1, 4, 4])
        #expect(T.floats(y).prefix(4).allSatisfy { $0 == -7 })
    }

    /// GridSample grids come from requests: NaN, infinite or huge coordinates trapped converting to Int
    /// (bilinear) or inside reflection; they now sample as far outside the image.
    @Test func gridSampleWithNonFiniteGridDoesNotTrap() throws {
        let x = T.f([1, 1, 2, 2], [1, 2, 3, 4])
        let grid = T.f([1, 1, 2, 2], [.nan, 0.5, 1e30, -1e30])
        let zeros = try T.runNode("GridSample", [("x", x), ("g", grid)], opset: 16)[0]
        #expect(zeros.shape == [1, 1, 1, 2])
        #expect(T.floats(zeros) == [0, 0])
        for padding in ["border", "reflection"] {
            for mode in ["nearest", "bilinear", "bicubic"] {
                let y = try T.runNode("GridSample", [("x", x), ("g", T.f([1, 1, 2, 2], [.infinity, 0.5, 1e30, -.infinity]))],
                                      attributes: ["padding_mode": .string(Array(padding.utf8)), "mode": .string(Array(mode.utf8))], opset: 16)[0]
                #expect(y.shape == [1, 1, 1, 2])
            }
        }
    }

    /// Shapes read from data (pads, Expand/Tile/ConstantOfShape shapes, Range lengths, OneHot depth) overflowed
    /// `Int` arithmetic or asked for terabytes; each is now a typed error.
    @Test func dataDrivenShapesThatOverflowOrExplodeAreErrors() throws {
        let x = T.f([1, 1, 2, 2], [1, 2, 3, 4])
        #expect(throws: EngineError.self) { try T.runNode("Pad", [("x", x), ("p", T.i([8], [0, 0, 0, .max, 0, 0, 0, 5]))], opset: 13) }
        #expect(throws: EngineError.self) { try T.runNode("Expand", [("x", x), ("s", T.i([4], [1 << 40, 1 << 40, 2, 2]))], opset: 13) }
        #expect(throws: EngineError.self) { try T.runNode("Tile", [("x", x), ("r", T.i([4], [1 << 62, 4, 1, 1]))], opset: 13) }
        #expect(throws: EngineError.self) { try T.runNode("ConstantOfShape", [("s", T.i([3], [1 << 31, 1 << 31, 4]))], opset: 13) }
        #expect(throws: EngineError.self) {
            try T.runNode("Range", [("a", Tensor(shape: [], scalars: [0.0])), ("b", Tensor(shape: [], scalars: [2e9])),
                                    ("c", Tensor(shape: [], scalars: [1.0]))], opset: 11)
        }
        #expect(throws: EngineError.self) {
            try T.runNode("OneHot", [("i", T.i([1], [1])), ("d", T.f([1], [.infinity])), ("v", T.f([2], [0, 1]))], opset: 11)
        }
    }

    /// OneHot indices are request data: NaN and 1e300 trapped in `Int(_:)`; they are out of range, so all "off".
    @Test func oneHotWithNonFiniteIndicesDoesNotTrap() throws {
        let indices = Tensor(shape: [3], scalars: [Double.nan, 1e300, 1])
        let y = try T.runNode("OneHot", [("i", indices), ("d", T.f([1], [3])), ("v", T.f([2], [0, 1]))], opset: 11)[0]
        #expect(y.shape == [3, 3])
        #expect(T.floats(y) == [0, 0, 0, 0, 0, 0, 0, 1, 0])
    }

    /// SVM `kernel_params` degree NaN or 1e30 trapped in `Int(_:)` while compiling the model.
    @Test func svmWithNonFiniteDegreeCompiles() throws {
        for degree: Float in [.nan, 1e30, 2.7] {
            let node = Node(name: "svm", opType: "SVMRegressor", domain: "ai.onnx.ml", inputs: ["x"], outputs: ["y"],
                            attributes: ["n_supports": .int(1), "support_vectors": .floats([1, 2]), "coefficients": .floats([1]),
                                         "kernel_type": .string(Array("POLY".utf8)), "kernel_params": .floats([1, 0, degree])])
            let graph = Graph(name: "g", nodes: [node], inputs: [ValueInfo(name: "x", elementType: .float32, shape: [.fixed(1), .fixed(2)])],
                              outputs: [ValueInfo(name: "y")])
            let model = try CompiledModel(model: Model(opsetImports: ["": 17, "ai.onnx.ml": 1], graph: graph))
            let y = try model.run(["x": T.f([1, 2], [1, 1])])["y"]!
            #expect(y.count == 1)
        }
    }

    /// Fuzz input: Slice with a step of Int64.max overflowed computing the stride (and Int64.min negating the step).
    @Test func sliceWithExtremeStepsTakesOneElement() throws {
        let x = T.f([5], [1, 2, 3, 4, 5])
        let forward = try T.runNode("Slice", [("x", x), ("s", T.i([1], [0])), ("e", T.i([1], [5])), ("a", T.i([1], [0])), ("p", T.i([1], [.max]))],
                                    opset: 13)[0]
        #expect(T.floats(forward) == [1])
        let backward = try T.runNode("Slice", [("x", x), ("s", T.i([1], [4])), ("e", T.i([1], [.min])), ("a", T.i([1], [0])), ("p", T.i([1], [.min]))],
                                     opset: 13)[0]
        #expect(T.floats(backward) == [5])
    }

    /// Fuzz input: Einsum equation whose output repeats a label ("...->\0\0\0") read past the operand (index out of range).
    @Test func einsumWithRepeatedOutputLabelIsAnError() throws {
        let x = T.f([2, 3], [1, 2, 3, 4, 5, 6])
        #expect(throws: EngineError.self) {
            try T.runNode("Einsum", [("x", x)], attributes: ["equation": .string(Array("ij->jj".utf8))], opset: 12)
        }
        let y = try T.runNode("Einsum", [("x", x)], attributes: ["equation": .string(Array("ij->ji".utf8))], opset: 12)[0]
        #expect(T.floats(y) == [1, 4, 2, 5, 3, 6])
    }

    /// Fuzz input: an RNN whose W is float64 hit the precondition in `scalars(as: Float.self)`; weights are now
    /// read through a cast, so any float type works and the result matches float32 weights.
    @Test func recurrentWeightsOfAnotherDTypeAreConverted() throws {
        let x = T.f([1, 1, 2], [1, -1])
        let w32 = T.f([1, 1, 2], [0.5, 0.25]), r32 = T.f([1, 1, 1], [0.1])
        let w64 = Tensor(shape: [1, 1, 2], scalars: [0.5, 0.25] as [Double]), r64 = Tensor(shape: [1, 1, 1], scalars: [0.1] as [Double])
        let attributes: [String: Attribute] = ["hidden_size": .int(1)]
        let expected = try T.runNode("RNN", [("x", x), ("w", w32), ("r", r32)], outputs: ["y", "h"], attributes: attributes, opset: 14)
        let converted = try T.runNode("RNN", [("x", x), ("w", w64), ("r", r64)], outputs: ["y", "h"], attributes: attributes, opset: 14)
        #expect(T.floats(converted[1]) == T.floats(expected[1]))
    }

    /// Fuzz input: a depthwise Conv with group 64 over 8 output channels hit PackedConvolution's precondition.
    @Test func convWithGroupsThatDoNotDivideChannelsIsAnError() throws {
        let x = T.f([1, 8, 3, 3], [Float](repeating: 1, count: 72))
        let w = T.f([8, 1, 3, 3], [Float](repeating: 1, count: 72))
        #expect(throws: EngineError.self) {
            try T.runNode("Conv", [("x", x), ("w", w)], attributes: ["group": .int(64)], constants: ["w"])
        }
    }
}
