import Testing
import Tensor
import ONNX
@testable import Engine

/// String tensors through the layout and indexing operators: each either moves the strings themselves or refuses them
/// with an error naming the dtype, never trapping (strings live out of line, so a byte copy would lose them).
@Suite struct StringTensorTests {
    typealias T = TestSupport

    /// `[2, 3]` strings "a" ... "f".
    static let words = Tensor(shape: [2, 3], strings: ["a", "b", "c", "d", "e", "f"].map { Array($0.utf8) })

    static func texts(_ t: Tensor) -> [String] { t.strings.map { String(decoding: $0, as: UTF8.self) } }

    /// Runs `op` and returns its strings, or nil when it refused the dtype with an engine error.
    static func run(_ op: String, _ inputs: [(String, Tensor)], attributes: [String: Attribute] = [:], constants: Set<String> = []) -> [String]? {
        do {
            let y = try T.runNode(op, inputs, attributes: attributes, constants: constants)[0]
            return y.dtype == .string ? texts(y) : nil
        } catch is EngineError {
            return nil
        } catch {
            Issue.record("\(op): unexpected error \(error)")
            return nil
        }
    }

    @Test func layoutOperatorsMoveStrings() {
        let x = Self.words
        #expect(Self.run("Transpose", [("x", x)]) == ["a", "d", "b", "e", "c", "f"])
        #expect(Self.run("Slice", [("x", x), ("s", T.i([1], [1])), ("e", T.i([1], [3])), ("a", T.i([1], [1]))], constants: ["s", "e", "a"])
                == ["b", "c", "e", "f"])
        #expect(Self.run("Concat", [("x", x), ("z", x)], attributes: ["axis": .int(0)]) == ["a", "b", "c", "d", "e", "f", "a", "b", "c", "d", "e", "f"])
        #expect(Self.run("Expand", [("x", Tensor(shape: [1, 3], strings: x.strings.prefix(3).map { $0 })), ("s", T.i([2], [2, 3]))], constants: ["s"])
                == ["a", "b", "c", "a", "b", "c"])
        #expect(Self.run("Tile", [("x", x), ("r", T.i([2], [1, 2]))], constants: ["r"]) == ["a", "b", "c", "a", "b", "c", "d", "e", "f", "d", "e", "f"])
        #expect(Self.run("Gather", [("x", x), ("i", T.i([2], [1, 0]))]) == ["d", "e", "f", "a", "b", "c"])
        #expect(Self.run("Reshape", [("x", x), ("s", T.i([2], [3, 2]))], constants: ["s"]) == ["a", "b", "c", "d", "e", "f"])
        #expect(Self.run("Flatten", [("x", x)]) == ["a", "b", "c", "d", "e", "f"])
        #expect(Self.run("Identity", [("x", x)]) == ["a", "b", "c", "d", "e", "f"])
    }

    @Test func otherOperatorsMoveOrRefuseStrings() {
        let x = Self.words
        let cases: [(String, [(String, Tensor)], [String: Attribute], Set<String>)] = [
            ("GatherElements", [("x", x), ("i", T.i([2, 1], [2, 0]))], ["axis": .int(1)], []),
            ("GatherND", [("x", x), ("i", T.i([1, 2], [1, 2]))], [:], []),
            ("Where", [("c", Tensor(shape: [3], scalars: [true, false, true])), ("x", x), ("z", x)], [:], []),
            ("Compress", [("x", x), ("c", Tensor(shape: [3], scalars: [false, true, true]))], ["axis": .int(1)], []),
            ("Pad", [("x", x), ("p", T.i([4], [0, 1, 0, 0]))], [:], ["p"]),
            ("Split", [("x", x)], ["axis": .int(1)], []),
            ("Squeeze", [("x", Tensor(shape: [1, 3], strings: x.strings.prefix(3).map { $0 }))], [:], []),
            ("Unsqueeze", [("x", x), ("a", T.i([1], [0]))], [:], ["a"]),
            ("DepthToSpace", [("x", Tensor(shape: [1, 4, 1, 1], strings: x.strings.prefix(4).map { $0 }))], ["blocksize": .int(2)], []),
            ("SpaceToDepth", [("x", Tensor(shape: [1, 1, 2, 2], strings: x.strings.prefix(4).map { $0 }))], ["blocksize": .int(2)], []),
            ("ReverseSequence", [("x", x), ("l", T.i([2], [3, 2]))], ["batch_axis": .int(0), "time_axis": .int(1)], []),
            ("ScatterElements", [("x", x), ("i", T.i([1, 1], [0])), ("u", Tensor(shape: [1, 1], strings: [Array("z".utf8)]))], [:], []),
            ("Unique", [("x", x)], [:], []),
            ("Size", [("x", x)], [:], []),
            ("Shape", [("x", x)], [:], []),
            ("Cast", [("x", x)], ["to": .int(1)], []),
        ]
        for (op, inputs, attributes, constants) in cases {
            _ = Self.run(op, inputs, attributes: attributes, constants: constants)
        }
    }
}
