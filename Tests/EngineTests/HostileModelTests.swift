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
}
