import Foundation
import Tensor

/// The elements of a sequence input, or an error naming what arrived instead.
private func sequence(_ t: Tensor, _ ctx: OpContext) throws -> [Tensor] {
    guard let elements = t.sequenceElements else { throw ctx.error(.executionFailed, "input is a tensor \(t), expected a sequence") }
    return elements
}

/// A sequence position (negative counts from the end); `inclusiveEnd` allows `count` itself (SequenceInsert).
private func position(_ t: Tensor?, count: Int, inclusiveEnd: Bool, _ ctx: OpContext) throws -> Int? {
    guard let t else { return nil }
    guard t.count == 1, t.dtype == .int64 || t.dtype == .int32 else { throw ctx.error(.executionFailed, "position must be an int32/int64 scalar, got \(t)") }
    let raw = Int(t.doubleValue(at: 0))
    let p = raw < 0 ? raw + count : raw
    guard p >= 0, p < count || (inclusiveEnd && p == count) else { throw ctx.error(.executionFailed, "position \(raw) is out of range for a sequence of \(count)") }
    return p
}

/// Concatenates sequence elements along `axis` (negative counts from the end), strings included; numeric
/// tensors go through Concat's `concatenate`.
func concatenateElements(_ parts: [Tensor], axis: Int, _ ctx: OpContext) throws -> Tensor {
    guard let first = parts.first else { throw ctx.error(.executionFailed, "nothing to concatenate") }
    let a = try ctx.axis(axis, rank: first.rank)
    guard first.dtype == .string else { return try concatenate(parts, axis: a, ctx) }
    for p in parts {
        guard p.dtype == first.dtype, p.rank == first.rank, p.shape.indices.allSatisfy({ $0 == a || p.shape[$0] == first.shape[$0] }) else {
            throw ctx.error(.executionFailed, "cannot concatenate \(p) with \(first) along axis \(a)")
        }
    }
    var shape = first.shape
    shape[a] = parts.reduce(0) { $0 + $1.shape[a] }
    var strings: [[UInt8]] = []
    for o in 0..<first.shape[..<a].reduce(1, *) {
        for p in parts { let chunk = p.shape[a...].reduce(1, *); strings += p.strings[(o * chunk)..<((o + 1) * chunk)] }
    }
    return Tensor(shape: shape, strings: strings)
}

/// Slices [start, start + length) of `x` along `axis`.
private func slice(_ x: Tensor, axis: Int, start: Int, length: Int) -> Tensor {
    var shape = x.shape
    shape[axis] = length
    let strides = x.strides
    return stridedCopy(x, shape: shape, strides: strides, offset: start * strides[axis])
}

let sequenceOperators: OperatorTable = [
    "SequenceEmpty": { ctx in
        let dtype = try dtypeAttribute(ctx, "dtype", .float32)
        return PreparedKernel { _ in [Tensor(sequence: [], elementType: dtype)] }
    },
    "SequenceConstruct": { ctx in PreparedKernel { inputs in
        let elements = try (0..<inputs.count).map { try inputs.required($0, ctx) }
        guard let first = elements.first else { throw ctx.error(.invalidModel, "SequenceConstruct needs at least one input") }
        guard elements.allSatisfy({ $0.dtype == first.dtype && $0.container == nil }) else {
            throw ctx.error(.executionFailed, "sequence elements must be tensors of one dtype, got \(elements)")
        }
        return [Tensor(sequence: elements, elementType: first.dtype)]
    } },
    "SequenceAt": { ctx in PreparedKernel { inputs in
        let elements = try sequence(inputs.required(0, ctx), ctx)
        return [elements[try position(inputs.required(1, ctx), count: elements.count, inclusiveEnd: false, ctx)!]]
    } },
    "SequenceInsert": { ctx in PreparedKernel { inputs in
        let s = try inputs.required(0, ctx)
        var elements = try sequence(s, ctx)
        let t = try inputs.required(1, ctx)
        guard t.dtype == s.dtype, t.container == nil else { throw ctx.error(.executionFailed, "cannot insert \(t) into a sequence of \(s.dtype)") }
        elements.insert(t, at: try position(inputs[2], count: elements.count, inclusiveEnd: true, ctx) ?? elements.count)
        return [Tensor(sequence: elements, elementType: s.dtype)]
    } },
    "SequenceErase": { ctx in PreparedKernel { inputs in
        let s = try inputs.required(0, ctx)
        var elements = try sequence(s, ctx)
        guard !elements.isEmpty else { throw ctx.error(.executionFailed, "cannot erase from an empty sequence") }
        elements.remove(at: try position(inputs[1], count: elements.count, inclusiveEnd: false, ctx) ?? elements.count - 1)
        return [Tensor(sequence: elements, elementType: s.dtype)]
    } },
    "SequenceLength": { ctx in PreparedKernel { inputs in
        [Tensor(scalar: Int64(try sequence(inputs.required(0, ctx), ctx).count))]
    } },
    // Splits along `axis` into pieces of `split` (a scalar chunk size or a list of sizes), or into size-1 pieces
    // (squeezed when keepdims = 0) without it.
    "SplitToSequence": { ctx in
        let axisAttr = try ctx.int("axis", 0), keep = try ctx.int("keepdims", 1) != 0
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            guard x.rank >= 1 else { throw ctx.error(.executionFailed, "input must have rank >= 1, got \(x)") }
            let axis = try ctx.axis(axisAttr, rank: x.rank)
            let dim = x.shape[axis]
            var lengths: [Int]
            var squeeze = false
            if let split = inputs[1] {
                let values = split.ints
                if split.rank == 0 {
                    guard values[0] > 0 else { throw ctx.error(.executionFailed, "split size must be positive, got \(values[0])") }
                    lengths = stride(from: 0, to: dim, by: values[0]).map { min(values[0], dim - $0) }
                } else {
                    guard values.allSatisfy({ $0 >= 0 }), values.reduce(0, +) == dim else {
                        throw ctx.error(.executionFailed, "split \(values) does not sum to axis \(axis) size \(dim)")
                    }
                    lengths = values
                }
            } else {
                lengths = Array(repeating: 1, count: dim)
                squeeze = !keep
            }
            var start = 0
            var pieces: [Tensor] = []
            for length in lengths {
                var piece = slice(x, axis: axis, start: start, length: length)
                if squeeze { var shape = piece.shape; shape.remove(at: axis); piece = piece.reshaped(shape) }
                pieces.append(piece)
                start += length
            }
            return [Tensor(sequence: pieces, elementType: x.dtype)]
        }
    },
    // Concatenates along `axis`, or stacks along a new axis (new_axis = 1).
    "ConcatFromSequence": { ctx in
        let axis = try ctx.int("axis", 0), newAxis = try ctx.int("new_axis", 0) != 0
        return PreparedKernel { inputs in
            let elements = try sequence(inputs.required(0, ctx), ctx)
            guard let first = elements.first else { throw ctx.error(.executionFailed, "cannot concatenate an empty sequence") }
            guard newAxis else { return [try concatenateElements(elements, axis: axis, ctx)] }
            let a = try ctx.axis(axis, rank: first.rank + 1)
            let expanded = elements.map { e -> Tensor in var shape = e.shape; shape.insert(1, at: min(a, shape.count)); return e.reshaped(shape) }
            return [try concatenateElements(expanded, axis: a, ctx)]
        }
    },
    "Optional": { ctx in
        var elementType = DType.float32
        if case .tensor(let t)? = ctx.node.attributes["type"] { elementType = t.dtype }
        let declared = elementType
        return PreparedKernel { inputs in
            if let x = inputs[0] { return [x] }
            return [Tensor(emptyOptionalOf: declared)]
        }
    },
    "OptionalHasElement": { ctx in PreparedKernel { inputs in
        guard let x = inputs[0] else { return [Tensor(scalar: false)] }
        if case .emptyOptional? = x.container { return [Tensor(scalar: false)] }
        return [Tensor(scalar: true)]
    } },
    "OptionalGetElement": { ctx in PreparedKernel { inputs in
        let x = try inputs.required(0, ctx)
        if case .emptyOptional? = x.container { throw ctx.error(.executionFailed, "the optional holds no element") }
        return [x]
    } },
]
