import Tensor

/// ReduceSum and ReduceMean of float32 over trailing axes (ShuffleNetV2's mean over each 7x7 plane, a decomposed
/// LayerNorm's mean over the last axis): each output sums one contiguous run in vector lanes, the outputs split across
/// the compute pool. The generic `reduce`, the twin tests compare it with, called its closures per element (0.23 ms,
/// 9% of ShuffleNetV2 at batch 1). Nil when the reduction is of another kind (or empty).
func reduceTrailingFloats(_ x: Tensor, axes: Set<Int>, keepDims: Bool, mean: Bool) -> Tensor? {
    guard x.dtype == .float32, let first = axes.min(), axes.count == x.rank - first, x.count > 0 else { return nil }
    let outShape = reductionLayout(x.shape, axes: axes, keepDims: keepDims).outShape
    let run = axes.reduce(1) { $0 * x.shape[$1] }
    let outputs = x.count / run
    return Tensor.makeFloat(shape: outShape) { o in
        x.floatPointer { s in
            parallelRanges(outputs, minimumChunk: max(1, 16_384 / run)) { range in
                for i in range {
                    let total = sumFloats(s + i * run, run)
                    o[i] = mean ? total / Float(run) : total
                }
            }
        }
    }
}
