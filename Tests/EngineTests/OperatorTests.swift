import Testing
import Tensor
import ONNX
@testable import Engine

/// Single-node checks against hand-computed values.
@Suite struct OperatorTests {
    typealias T = TestSupport

    @Test func addBroadcastsPerChannel() throws {
        let x = T.f([1, 2, 2, 2], [1, 2, 3, 4, 5, 6, 7, 8])
        let b = T.f([2, 1, 1], [10, 20])
        let y = try T.runNode("Add", [("x", x), ("b", b)])[0]
        #expect(y.shape == [1, 2, 2, 2])
        #expect(T.floats(y) == [11, 12, 13, 14, 25, 26, 27, 28])
    }

    @Test func integerArithmeticAndComparison() throws {
        let a = T.i([3], [7, -7, 9]), b = T.i([1], [2])
        #expect(try T.runNode("Div", [("a", a), ("b", b)])[0].scalars(as: Int64.self) == [3, -3, 4])
        #expect(try T.runNode("Mul", [("a", a), ("b", b)])[0].scalars(as: Int64.self) == [14, -14, 18])
        #expect(try T.runNode("Equal", [("a", a), ("b", T.i([3], [7, 0, 9]))])[0].scalars(as: Bool.self) == [true, false, true])
        #expect(try T.runNode("Greater", [("a", a), ("b", b)])[0].scalars(as: Bool.self) == [true, false, true])
    }

    @Test func unaryActivations() throws {
        let x = T.f([4], [-2, -0.5, 0.5, 3])
        #expect(T.floats(try T.runNode("Relu", [("x", x)])[0]) == [0, 0, 0.5, 3])
        #expect(T.floats(try T.runNode("LeakyRelu", [("x", x)], attributes: ["alpha": .float(0.1)])[0]) == [-0.2, -0.05, 0.5, 3])
        #expect(T.close(T.floats(try T.runNode("HardSwish", [("x", x)])[0]), [-2 * (1.0 / 6 * -2 + 0.5), -0.5 * (-0.5 / 6 + 0.5), 0.5 * (0.5 / 6 + 0.5), 3]))
        #expect(T.close(T.floats(try T.runNode("Sigmoid", [("x", x)])[0]), [0.11920292, 0.37754067, 0.62245933, 0.95257413]))
        #expect(T.floats(try T.runNode("Round", [("x", T.f([4], [0.5, 1.5, -0.5, 2.6]))])[0]) == [0, 2, -0, 3])
    }

    @Test func clipAttributeAndInputForms() throws {
        let x = T.f([4], [-3, -1, 2, 9])
        #expect(T.floats(try T.runNode("Clip", [("x", x)], attributes: ["min": .float(-1.5), "max": .float(6)], opset: 6)[0]) == [-1.5, -1, 2, 6])
        let y = try T.runNode("Clip", [("x", x), ("lo", Tensor(scalar: Float(0))), ("", Tensor(scalar: Float(0)))], opset: 13, constants: ["lo"])[0]
        #expect(T.floats(y) == [0, 0, 2, 9])
    }

    @Test func softmaxLegacyFlattensAndNewUsesOneAxis() throws {
        let x = T.f([1, 2, 2], [0, 0, 0, 0])
        #expect(T.close(T.floats(try T.runNode("Softmax", [("x", x)], attributes: ["axis": .int(1)], opset: 11)[0]), [0.25, 0.25, 0.25, 0.25]))
        #expect(T.close(T.floats(try T.runNode("Softmax", [("x", x)], attributes: ["axis": .int(1)], opset: 13)[0]), [0.5, 0.5, 0.5, 0.5]))
        let l = try T.runNode("LogSoftmax", [("x", T.f([2], [1, 1]))], opset: 13)[0]
        #expect(T.close(T.floats(l), [-0.6931472, -0.6931472]))
    }

    @Test func gemmTransposesAlphaBetaAndBroadcastsC() throws {
        let a = T.f([2, 2], [1, 2, 3, 4])            // A^T = [[1,3],[2,4]]
        let b = T.f([2, 2], [1, 0, 0, 1])
        let c = T.f([2], [100, 200])
        let y = try T.runNode("Gemm", [("a", a), ("b", b), ("c", c)], attributes: ["transA": .int(1), "alpha": .float(2), "beta": .float(0.5)])[0]
        let expected: [Float] = [52, 106, 54, 108]
        #expect(T.floats(y) == expected)
    }

    @Test func matmulBatchedBroadcastAndVectors() throws {
        let a = T.f([2, 1, 2], [1, 2, 3, 4]), b = T.f([2, 1], [10, 1])
        let y = try T.runNode("MatMul", [("a", a), ("b", b)])[0]
        #expect(y.shape == [2, 1, 1] && T.floats(y) == [12, 34])
        let v = try T.runNode("MatMul", [("a", T.f([2], [1, 1])), ("b", T.f([2, 3], [1, 2, 3, 4, 5, 6]))])[0]
        #expect(v.shape == [3] && T.floats(v) == [5, 7, 9])
        let batched = try T.runNode("MatMul", [("a", T.f([1, 2, 2], [1, 0, 0, 1])), ("b", T.f([3, 2, 1], [1, 2, 3, 4, 5, 6]))])[0]
        #expect(batched.shape == [3, 2, 1] && T.floats(batched) == [1, 2, 3, 4, 5, 6])
    }

    @Test func convWithPaddingStrideGroupsAndAutoPad() throws {
        let x = T.f([1, 1, 3, 3], [1, 2, 3, 4, 5, 6, 7, 8, 9])
        let w = T.f([1, 1, 2, 2], [1, 1, 1, 1])
        let valid = try T.runNode("Conv", [("x", x), ("w", w)], constants: ["w"])[0]
        #expect(valid.shape == [1, 1, 2, 2] && T.floats(valid) == [12, 16, 24, 28])
        let same = try T.runNode("Conv", [("x", x), ("w", w)], attributes: ["auto_pad": .string(Array("SAME_UPPER".utf8))], constants: ["w"])[0]
        #expect(same.shape == [1, 1, 3, 3] && T.floats(same) == [12, 16, 9, 24, 28, 15, 15, 17, 9])
        let lower = try T.runNode("Conv", [("x", x), ("w", w)], attributes: ["auto_pad": .string(Array("SAME_LOWER".utf8))], constants: ["w"])[0]
        #expect(T.floats(lower) == [1, 3, 5, 5, 12, 16, 11, 24, 28])
        let strided = try T.runNode("Conv", [("x", x), ("w", w)], attributes: ["strides": .ints([2, 2]), "pads": .ints([1, 1, 1, 1])], constants: ["w"])[0]
        #expect(T.floats(strided) == [1, 5, 11, 28])
        // Depthwise: two channels, each its own 1x1 weight and a bias; weights fed at run time use the reference path.
        let x2 = T.f([1, 2, 1, 2], [1, 2, 3, 4]), w2 = T.f([2, 1, 1, 1], [2, -1]), b2 = T.f([2], [0.5, 0])
        let dw = try T.runNode("Conv", [("x", x2), ("w", w2), ("b", b2)], attributes: ["group": .int(2)])[0]
        #expect(T.floats(dw) == [2.5, 4.5, -3, -4])
    }

    @Test func conv1DWithDilation() throws {
        let x = T.f([1, 1, 5], [1, 2, 3, 4, 5]), w = T.f([1, 1, 2], [1, -1])
        let y = try T.runNode("Conv", [("x", x), ("w", w)], attributes: ["dilations": .ints([2])], constants: ["w"])[0]
        #expect(y.shape == [1, 1, 3] && T.floats(y) == [-2, -2, -2])
    }

    @Test func convTransposeStrideOutputPaddingAndShape() throws {
        let x = T.f([1, 1, 2, 2], [1, 2, 3, 4]), w = T.f([1, 1, 2, 2], [1, 1, 1, 1])
        let y = try T.runNode("ConvTranspose", [("x", x), ("w", w)], attributes: ["strides": .ints([2, 2])])[0]
        #expect(y.shape == [1, 1, 4, 4])
        #expect(T.floats(y) == [1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4])
        let padded = try T.runNode("ConvTranspose", [("x", x), ("w", w)], attributes: ["strides": .ints([2, 2]), "output_padding": .ints([1, 1])])[0]
        #expect(padded.shape == [1, 1, 5, 5])
        let overlapped = try T.runNode("ConvTranspose", [("x", x), ("w", w)])[0]
        #expect(T.floats(overlapped) == [1, 3, 2, 4, 10, 6, 3, 7, 4])
        let shaped = try T.runNode("ConvTranspose", [("x", x), ("w", w)], attributes: ["strides": .ints([2, 2]), "output_shape": .ints([3, 3])])[0]
        #expect(shaped.shape == [1, 1, 3, 3])
    }

    @Test func poolingCeilModePaddingAndGlobal() throws {
        let x = T.f([1, 1, 3, 3], [1, 2, 3, 4, 5, 6, 7, 8, 9])
        let mp = try T.runNode("MaxPool", [("x", x)], attributes: ["kernel_shape": .ints([2, 2]), "strides": .ints([2, 2]), "ceil_mode": .int(1)])[0]
        #expect(mp.shape == [1, 1, 2, 2] && T.floats(mp) == [5, 6, 8, 9])
        let ap = try T.runNode("AveragePool", [("x", x)], attributes: ["kernel_shape": .ints([2, 2]), "pads": .ints([1, 1, 0, 0])])[0]
        #expect(T.floats(ap) == [1, 1.5, 2.5, 2.5, 3, 4, 5.5, 6, 7])
        let apInclude = try T.runNode("AveragePool", [("x", x)], attributes: ["kernel_shape": .ints([2, 2]), "pads": .ints([1, 1, 0, 0]), "count_include_pad": .int(1)])[0]
        #expect(T.floats(apInclude)[0] == 0.25)
        #expect(T.floats(try T.runNode("GlobalAveragePool", [("x", x)])[0]) == [5])
        #expect(T.floats(try T.runNode("GlobalMaxPool", [("x", x)])[0]) == [9])
    }

    @Test func normalizations() throws {
        let x = T.f([1, 2, 1, 2], [1, 3, 5, 7])
        let one = T.f([2], [1, 1]), zero = T.f([2], [0, 0]), mean = T.f([2], [2, 6]), variance = T.f([2], [1, 1])
        let bn = try T.runNode("BatchNormalization", [("x", x), ("s", one), ("b", zero), ("m", mean), ("v", variance)], attributes: ["epsilon": .float(0)])[0]
        #expect(T.floats(bn) == [-1, 1, -1, 1])
        let ln = try T.runNode("LayerNormalization", [("x", T.f([2, 2], [1, 3, 5, 9])), ("s", T.f([2], [1, 2])), ("b", T.f([2], [0, 1]))], attributes: ["epsilon": .float(0)])[0]
        #expect(T.close(T.floats(ln), [-1, 3, -1, 3]))
    }

    @Test func reshapeFlattenSqueezeUnsqueeze() throws {
        let x = T.f([2, 3, 4], Array(repeating: 1, count: 24))
        #expect(try T.runNode("Reshape", [("x", x), ("s", T.i([2], [0, -1]))])[0].shape == [2, 12])
        #expect(try T.runNode("Reshape", [("x", T.f([0, 3], [])), ("s", T.i([2], [3, 0]))], attributes: ["allowzero": .int(1)], opset: 14)[0].shape == [3, 0])
        #expect(try T.runNode("Flatten", [("x", x)], attributes: ["axis": .int(-1)])[0].shape == [6, 4])
        #expect(try T.runNode("Flatten", [("x", x)], attributes: ["axis": .int(0)])[0].shape == [1, 24])
        let u = try T.runNode("Unsqueeze", [("x", x), ("a", T.i([2], [0, -1]))], opset: 13)[0]
        #expect(u.shape == [1, 2, 3, 4, 1])
        #expect(try T.runNode("Unsqueeze", [("x", x)], attributes: ["axes": .ints([1])], opset: 11)[0].shape == [2, 1, 3, 4])
        #expect(try T.runNode("Squeeze", [("x", u)], opset: 13)[0].shape == [2, 3, 4])
        #expect(throws: EngineError.self) { try T.runNode("Squeeze", [("x", x), ("a", T.i([1], [0]))], opset: 13) }
    }

    @Test func sliceNegativeStepsAndClamping() throws {
        let x = T.f([5], [0, 1, 2, 3, 4])
        let r = try T.runNode("Slice", [("x", x), ("s", T.i([1], [-1])), ("e", T.i([1], [Int64.min])), ("a", T.i([1], [0])), ("p", T.i([1], [-2]))])[0]
        #expect(T.floats(r) == [4, 2, 0])
        let clamp = try T.runNode("Slice", [("x", x), ("s", T.i([1], [1])), ("e", T.i([1], [Int64.max]))])[0]
        #expect(T.floats(clamp) == [1, 2, 3, 4])
        let legacy = try T.runNode("Slice", [("x", x)], attributes: ["starts": .ints([-2]), "ends": .ints([100])], opset: 9)[0]
        #expect(T.floats(legacy) == [3, 4])
    }

    /// A channel split at batch 1 is a view of the input; at batch 2 (strided), or a small part, it is a copy.
    @Test func contiguousSlicesAreViews() throws {
        let x = Tensor(shape: [1, 4, 2, 3], scalars: (0..<24).map { Float($0) })
        let upper = try #require(contiguousView(x, shape: [1, 2, 2, 3], strides: x.strides, offset: 12))
        let upperValues: [Float] = (12..<24).map { Float($0) }
        #expect(upper.storage === x.storage)
        #expect(T.floats(upper) == upperValues)
        let pair = x.reshaped([2, 2, 2, 3])
        #expect(contiguousView(pair, shape: [2, 1, 2, 3], strides: pair.strides, offset: 6) == nil)
        #expect(contiguousView(x, shape: [1, 1, 2, 3], strides: x.strides, offset: 6) == nil)
        for batch in [1, 2] {
            let input = Tensor(shape: [batch, 4, 2, 3], scalars: (0..<(batch * 24)).map { Float($0) })
            let r = try T.runNode("Slice", [("x", input), ("s", T.i([1], [2])), ("e", T.i([1], [4])), ("a", T.i([1], [1]))])[0]
            #expect(r.shape == [batch, 2, 2, 3])
            var expected: [Float] = []
            for n in 0..<batch { expected += (12..<24).map { Float(n * 24 + $0) } }
            #expect(T.floats(r) == expected)
        }
    }

    @Test func padModesAndNegativePads() throws {
        let x = T.f([3], [1, 2, 3])
        func pad(_ mode: String, _ pads: [Int64]) throws -> [Float] {
            T.floats(try T.runNode("Pad", [("x", x), ("p", T.i([2], pads))], attributes: ["mode": .string(Array(mode.utf8))])[0])
        }
        #expect(try pad("constant", [1, 2]) == [0, 1, 2, 3, 0, 0])
        #expect(try pad("reflect", [2, 2]) == [3, 2, 1, 2, 3, 2, 1])
        #expect(try pad("edge", [2, 1]) == [1, 1, 1, 2, 3, 3])
        #expect(try pad("constant", [-1, 1]) == [2, 3, 0])
        let valued = try T.runNode("Pad", [("x", x), ("p", T.i([2], [1, 0])), ("v", Tensor(scalar: Float(9)))])[0]
        #expect(T.floats(valued) == [9, 1, 2, 3])
        let legacy = try T.runNode("Pad", [("x", x)], attributes: ["pads": .ints([0, 1]), "value": .float(7)], opset: 2)[0]
        #expect(T.floats(legacy) == [1, 2, 3, 7])
    }

    @Test func concatSplitTransposeGather() throws {
        let a = T.f([2, 1], [1, 2]), b = T.f([2, 2], [3, 4, 5, 6])
        let c = try T.runNode("Concat", [("a", a), ("b", b)], attributes: ["axis": .int(-1)])[0]
        #expect(T.floats(c) == [1, 3, 4, 2, 5, 6])
        let parts = try T.runNode("Split", [("c", c), ("s", T.i([2], [2, 1]))], outputs: ["p", "q"], attributes: ["axis": .int(1)], opset: 13)
        #expect(T.floats(parts[0]) == [1, 3, 2, 5] && T.floats(parts[1]) == [4, 6])
        let even = try T.runNode("Split", [("c", c)], outputs: ["p", "q"], attributes: ["axis": .int(0)], opset: 11)
        #expect(T.floats(even[1]) == [2, 5, 6])
        let t = try T.runNode("Transpose", [("b", b)])[0]
        #expect(T.floats(t) == [3, 5, 4, 6])
        let g = try T.runNode("Gather", [("b", b), ("i", T.i([2], [-1, 0]))], attributes: ["axis": .int(1)])[0]
        #expect(g.shape == [2, 2] && T.floats(g) == [4, 3, 6, 5])
        #expect(throws: EngineError.self) { try T.runNode("Gather", [("b", b), ("i", T.i([1], [2]))]) }
    }

    @Test func shapeConstantOfShapeRangeExpandWhereCast() throws {
        let x = T.f([2, 3, 4], Array(repeating: 0, count: 24))
        #expect(try T.runNode("Shape", [("x", x)], attributes: ["start": .int(1)], opset: 15)[0].scalars(as: Int64.self) == [3, 4])
        let filled = try T.runNode("ConstantOfShape", [("s", T.i([2], [2, 2]))], attributes: ["value": .tensor(T.i([1], [7]))])[0]
        #expect(filled.dtype == .int64 && filled.scalars(as: Int64.self) == [7, 7, 7, 7])
        let r = try T.runNode("Range", [("a", Tensor(scalar: Int64(10))), ("b", Tensor(scalar: Int64(4))), ("d", Tensor(scalar: Int64(-3)))])[0]
        #expect(r.scalars(as: Int64.self) == [10, 7])
        let e = try T.runNode("Expand", [("x", T.f([2, 1], [1, 2])), ("s", T.i([3], [2, 1, 3]))])[0]
        #expect(e.shape == [2, 2, 3] && T.floats(e) == [1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2])
        let w = try T.runNode("Where", [("c", Tensor(shape: [2], scalars: [true, false])), ("p", T.f([1], [1])), ("q", T.f([2], [5, 6]))])[0]
        #expect(T.floats(w) == [1, 6])
        let cast = try T.runNode("Cast", [("x", T.f([3], [-1.7, 0, 2.9]))], attributes: ["to": .int(Int64(DType.int64.rawValue))])[0]
        #expect(cast.scalars(as: Int64.self) == [-1, 0, 2])
        let half = try T.runNode("Cast", [("x", T.f([2], [1.5, -65504]))], attributes: ["to": .int(Int64(DType.float16.rawValue))])[0]
        let back = try T.runNode("Cast", [("h", half)], attributes: ["to": .int(1)])[0]
        #expect(T.floats(back) == [1.5, -65504])
    }

    @Test func reductionsArgMaxTopK() throws {
        let x = T.f([2, 3], [1, 5, 3, 4, 2, 6])
        #expect(T.floats(try T.runNode("ReduceSum", [("x", x), ("a", T.i([1], [1]))], attributes: ["keepdims": .int(0)], opset: 13)[0]) == [9, 12])
        #expect(T.floats(try T.runNode("ReduceMean", [("x", x)], attributes: ["axes": .ints([0])], opset: 13)[0]) == [2.5, 3.5, 4.5])
        #expect(T.floats(try T.runNode("ReduceMax", [("x", x), ("a", T.i([1], [-1]))], opset: 18)[0]) == [5, 6])
        let noop = try T.runNode("ReduceSum", [("x", x), ("a", T.i([0], []))], attributes: ["noop_with_empty_axes": .int(1)], opset: 13)[0]
        #expect(noop.shape == [2, 3])
        #expect(T.floats(try T.runNode("ReduceSum", [("x", x)], attributes: ["keepdims": .int(0)], opset: 13)[0]) == [21])
        let am = try T.runNode("ArgMax", [("x", T.f([4], [1, 3, 3, 0]))], attributes: ["select_last_index": .int(1)])[0]
        #expect(am.scalars(as: Int64.self) == [2])
        let top = try T.runNode("TopK", [("x", x), ("k", T.i([1], [2]))], outputs: ["v", "i"])
        #expect(T.floats(top[0]) == [5, 3, 6, 4] && top[1].scalars(as: Int64.self) == [1, 2, 2, 0])
    }

    @Test func resizeNearestAndLinear() throws {
        let x = T.f([1, 1, 2, 2], [1, 2, 3, 4])
        let scales = T.f([4], [1, 1, 2, 2])
        let nearest = try T.runNode("Resize", [("x", x), ("", T.f([0], [])), ("s", scales)], opset: 13)[0]
        #expect(nearest.shape == [1, 1, 4, 4] && T.floats(nearest) == [1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4])
        let linear = try T.runNode("Resize", [("x", x), ("", T.f([0], [])), ("s", scales)], attributes: ["mode": .string(Array("linear".utf8)),
                                   "coordinate_transformation_mode": .string(Array("align_corners".utf8))], opset: 13)[0]
        #expect(T.close(Array(T.floats(linear)[0..<4]), [1, 1.3333334, 1.6666666, 2]))
        let sized = try T.runNode("Resize", [("x", x), ("", T.f([0], [])), ("", T.f([0], [])), ("z", T.i([4], [1, 1, 1, 1]))], opset: 13)[0]
        #expect(sized.shape == [1, 1, 1, 1])
        // Antialiased downsampling (values from the ONNX reference implementation).
        let grid = T.f([1, 1, 4, 4], (1...16).map { Float($0) }), down = T.f([4], [1, 1, 0.6, 0.6])
        for (mode, expected) in [("linear", [2.875, 4.5, 9.375, 11.0] as [Float]), ("cubic", [2.5180695, 4.2858858, 9.5893354, 11.357152])] {
            let y = try T.runNode("Resize", [("x", grid), ("", T.f([0], [])), ("s", down)],
                                  attributes: ["mode": .string(Array(mode.utf8)), "antialias": .int(1)], opset: 18)[0]
            #expect(y.shape == [1, 1, 2, 2] && T.close(T.floats(y), expected), "\(mode)")
        }
        let up = try T.runNode("Upsample", [("x", x), ("s", scales)], opset: 9)[0]
        #expect(T.floats(up) == T.floats(nearest))
    }

    @Test func dropoutIsIdentityWithMask() throws {
        let x = T.f([2], [1, 2])
        let out = try T.runNode("Dropout", [("x", x)], outputs: ["y", "m"], opset: 13)
        #expect(T.floats(out[0]) == [1, 2] && out[1].scalars(as: Bool.self) == [true, true])
    }

    @Test func unsupportedOperatorNamesNodeAndOp() throws {
        let node = Node(name: "weird", opType: "NoSuchOp", inputs: ["x"], outputs: ["y"])
        let graph = Graph(nodes: [node], inputs: [ValueInfo(name: "x", elementType: .float32, shape: [.fixed(1)])], outputs: [ValueInfo(name: "y")])
        #expect { try CompiledModel(model: Model(graph: graph)) } throws: {
            guard let e = $0 as? EngineError else { return false }
            return e.code == .unsupportedOperator && e.message.contains("weird") && e.message.contains("NoSuchOp")
        }
        let custom = Node(name: "c", opType: "Relu", domain: "com.microsoft", inputs: ["x"], outputs: ["y"])
        #expect(throws: EngineError.self) { try CompiledModel(model: Model(graph: Graph(nodes: [custom], inputs: graph.inputs, outputs: graph.outputs))) }
    }

    @Test func supportedOperatorsCoverTheBrief() {
        let required = ["Conv", "ConvTranspose", "Gemm", "MatMul", "Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Exp", "Log", "Neg", "Abs",
                        "Reciprocal", "Erf", "Relu", "LeakyRelu", "PRelu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Softmax",
                        "LogSoftmax", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "BatchNormalization", "LayerNormalization",
                        "Flatten", "Reshape", "Transpose", "Concat", "Split", "Slice", "Squeeze", "Unsqueeze", "Pad", "Resize", "ReduceMean",
                        "ReduceSum", "ReduceMax", "ArgMax", "Identity", "Dropout", "Constant", "ConstantOfShape", "Shape", "Gather", "Expand",
                        "Range", "Cast", "Equal", "Where"]
        #expect(Set(required).isSubset(of: CompiledModel.supportedOperators))
    }
}

/// If and Loop with subgraphs that read outer-scope values.
@Suite struct ControlFlowTests {
    @Test func ifPicksABranchThatReadsOuterValues() throws {
        let thenGraph = Graph(name: "then", nodes: [Node(opType: "Add", inputs: ["x", "x"], outputs: ["t"])], outputs: [ValueInfo(name: "t")])
        let elseGraph = Graph(name: "else", nodes: [Node(opType: "Neg", inputs: ["x"], outputs: ["e"])], outputs: [ValueInfo(name: "e")])
        let graph = Graph(nodes: [Node(opType: "Greater", inputs: ["x0", "zero"], outputs: ["c"]),
                                  Node(opType: "Relu", inputs: ["v"], outputs: ["x"]),
                                  Node(opType: "If", inputs: ["c"], outputs: ["y"], attributes: ["then_branch": .graph(thenGraph), "else_branch": .graph(elseGraph)])],
                          initializers: [(name: "zero", tensor: Tensor(scalar: Float(0)))],
                          inputs: [ValueInfo(name: "x0", elementType: .float32, shape: []), ValueInfo(name: "v", elementType: .float32, shape: [.fixed(2)])],
                          outputs: [ValueInfo(name: "y", elementType: .float32, shape: [.fixed(2)])])
        let model = try CompiledModel(model: Model(graph: graph))
        let v = TestSupport.f([2], [1, -3])
        #expect(try model.run(["x0": Tensor(scalar: Float(1)), "v": v])["y"]!.scalars(as: Float.self) == [2, 0])
        #expect(try model.run(["x0": Tensor(scalar: Float(-1)), "v": v])["y"]!.scalars(as: Float.self) == [-1, 0])
    }

    @Test func loopCarriesStateAndStacksScanOutputs() throws {
        // body(i, cond, acc) -> (cond, acc + step, acc + step as a scan output); `step` comes from the outer graph.
        let body = Graph(name: "body", nodes: [Node(opType: "Add", inputs: ["acc", "step"], outputs: ["next"]),
                                               Node(opType: "Identity", inputs: ["cond_in"], outputs: ["cond_out"]),
                                               Node(opType: "Identity", inputs: ["next"], outputs: ["scan"])],
                         inputs: [ValueInfo(name: "i", elementType: .int64, shape: []), ValueInfo(name: "cond_in", elementType: .bool, shape: []),
                                  ValueInfo(name: "acc", elementType: .float32, shape: [.fixed(1)])],
                         outputs: [ValueInfo(name: "cond_out"), ValueInfo(name: "next"), ValueInfo(name: "scan")])
        let graph = Graph(nodes: [Node(opType: "Loop", inputs: ["trips", "", "start"], outputs: ["final", "history"], attributes: ["body": .graph(body)])],
                          initializers: [(name: "trips", tensor: Tensor(scalar: Int64(3))), (name: "step", tensor: TestSupport.f([1], [2]))],
                          inputs: [ValueInfo(name: "start", elementType: .float32, shape: [.fixed(1)])],
                          outputs: [ValueInfo(name: "final"), ValueInfo(name: "history")])
        let model = try CompiledModel(model: Model(graph: graph))
        let out = try model.run(["start": TestSupport.f([1], [1])])
        #expect(out["final"]!.scalars(as: Float.self) == [7])
        #expect(out["history"]!.shape == [3, 1] && out["history"]!.scalars(as: Float.self) == [3, 5, 7])
    }
}
