import Foundation
import Tensor

/// Largest element count a kernel may produce from a shape it read out of data (sizes, scales, repeats, pads):
/// 2^28 elements (1 GiB of float32) is far beyond the models this engine serves, and hostile shapes must end in
/// an error rather than an overflow trap, an unbounded loop or an allocation that exhausts memory.
let maxDataDrivenElements = 1 << 28

extension OpContext {
    /// `shape` when every dimension is non-negative and the element count stays within `maxDataDrivenElements`.
    func checkedShape(_ shape: [Int], _ what: String = "output") throws -> [Int] {
        var count = 1
        for d in shape {
            guard d >= 0 else { throw error(.executionFailed, "\(what) shape \(shape) has a negative dimension") }
            let (product, overflow) = count.multipliedReportingOverflow(by: d)
            guard !overflow, product <= maxDataDrivenElements else {
                throw error(.executionFailed, "\(what) shape \(shape) has more than \(maxDataDrivenElements) elements")
            }
            count = product
        }
        return shape
    }

    /// A dimension computed in floating point (`size * scale`), refused when not finite or out of range instead of trapping in `Int(_:)`.
    func dimension(_ value: Float, _ what: String) throws -> Int {
        guard value.isFinite, value >= 0, value <= Float(maxDataDrivenElements) else {
            throw error(.executionFailed, "\(what) \(value) is not a valid dimension (expected 0...\(maxDataDrivenElements))")
        }
        return Int(value)
    }
}

/// Largest sampling coordinate magnitude kept as is: beyond 2^24 a Float has no fractional part and every tap is
/// outside any real input, so clamping changes no result, while `Int(_:)` of NaN, infinity or 1e30 would trap.
let coordinateLimit: Float = 16_777_216

/// A sampling coordinate computed from data (grids, roi, scales) made safe to convert to `Int`: NaN counts as far outside.
@inline(__always)
func saneCoordinate(_ value: Float) -> Float {
    value.isNaN ? -coordinateLimit : Swift.min(Swift.max(value, -coordinateLimit), coordinateLimit)
}

extension Tensor {
    /// The elements as Float whatever the numeric dtype (models may declare float16 or float64 weights), instead of
    /// the precondition in `scalars(as:)` on a dtype mismatch.
    func floatScalars(_ ctx: OpContext) throws -> [Float] {
        dtype == .float32 ? scalars(as: Float.self) : try castTensor(self, to: .float32, ctx).scalars(as: Float.self)
    }
}
