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

/// Float ReduceSum/ReduceMean over a block of adjacent axes followed by kept inner axes (a [outer, reduced, inner]
/// view): each output row is the sum of `reduced` input rows, added lane by lane in row order (the generic loop's
/// order, so the result is the same), nil when the axes are not such a block. Mean pooling over tokens
/// ([batch, tokens, hidden] over axis 1) and NHWC global pooling (axes 1 and 2) took a closure call per element.
func reduceMiddleFloats(_ x: Tensor, axes: Set<Int>, keepDims: Bool, mean: Bool) -> Tensor? {
    guard x.dtype == .float32, let first = axes.min(), let last = axes.max(), last - first + 1 == axes.count,
          last < x.rank - 1, x.count > 0 else { return nil }
    let outer = x.shape[..<first].reduce(1, *), reduced = x.shape[first...last].reduce(1, *)
    let inner = x.shape[(last + 1)...].reduce(1, *)
    let lanes = 64, blocks = (inner + lanes - 1) / lanes
    return Tensor.makeFloat(shape: reductionLayout(x.shape, axes: axes, keepDims: keepDims).outShape) { o in
        x.floatPointer { s in
            parallelRanges(outer * blocks, minimumChunk: max(1, 16_384 / (reduced * lanes))) { range in
                for unit in range {
                    let (row, block) = unit.quotientAndRemainder(dividingBy: blocks)
                    let start = block * lanes, width = min(lanes, inner - start)
                    let target = o + row * inner + start
                    let source = s + row * reduced * inner + start
                    target.update(repeating: 0, count: width)
                    for r in 0..<reduced {
                        let line = source + r * inner
                        for j in 0..<width { target[j] += line[j] }
                    }
                    if mean { for j in 0..<width { target[j] /= Float(reduced) } }
                }
            }
        }
    }
}
