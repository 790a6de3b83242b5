import Foundation
import Infrastructure
import Tensor

/// xoshiro256** seeded through SplitMix64: fast, 2^256 - 1 period, and reproducible from a model's `seed` attribute.
struct RandomGenerator: Sendable {
    private var state: (UInt64, UInt64, UInt64, UInt64)

    /// A generator seeded from `seed` (a node's float `seed` attribute bit pattern, or fresh entropy).
    init(seed: UInt64) {
        var s = seed
        func splitMix() -> UInt64 {
            s &+= 0x9E37_79B9_7F4A_7C15
            var z = s
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        state = (splitMix(), splitMix(), splitMix(), splitMix())
    }

    /// The next 64 random bits.
    mutating func next() -> UInt64 {
        let result = ((state.1 &* 5) << 7 | (state.1 &* 5) >> 57) &* 9
        let t = state.1 << 17
        state.2 ^= state.0; state.3 ^= state.1; state.1 ^= state.2; state.0 ^= state.3
        state.2 ^= t
        state.3 = state.3 << 45 | state.3 >> 19
        return result
    }

    /// Uniform in [0, 1) with 53 random bits.
    mutating func unit() -> Double { Double(next() >> 11) * 0x1p-53 }

    /// Standard normal (Box-Muller; the log's argument stays in (0, 1]).
    mutating func normal() -> Double {
        let u = 1 - unit(), v = unit()
        return (-2 * log(u)).squareRoot() * cos(2 * Double.pi * v)
    }
}

/// The generator of one random node: seeded from the node's `seed` attribute when present (then the sequence of
/// draws is reproducible run after run, as onnxruntime's seeded kernels are), else from system entropy. The
/// generator advances across runs, so it lives behind a lock.
private func nodeGenerator(_ ctx: OpContext) throws -> Locked<RandomGenerator> {
    if ctx.has("seed") {
        let seed = try ctx.float("seed", 0)
        return Locked(RandomGenerator(seed: UInt64(seed.bitPattern)))
    }
    var system = SystemRandomNumberGenerator()
    return Locked(RandomGenerator(seed: system.next()))
}

/// A tensor of `dtype` (float16, float32, float64, bfloat16) and `shape` filled with `count` draws.
private func randomTensor(_ dtype: DType, shape: [Int], _ ctx: OpContext, _ draw: (inout RandomGenerator) -> Double,
                          _ generator: Locked<RandomGenerator>) throws -> Tensor {
    let count = Tensor.elementCount(shape)
    guard count <= 1 << 30 else { throw ctx.error(.executionFailed, "shape \(shape) is too large") }
    let values = generator.withLock { g in (0..<count).map { _ in draw(&g) } }
    return try castTensor(Tensor(shape: shape, scalars: values), to: dtype, ctx)
}

/// A floating-point output dtype from attribute `dtype`, or `fallback`.
private func floatDType(_ ctx: OpContext, _ fallback: DType?) throws -> DType? {
    guard ctx.has("dtype") else { return fallback }
    let dtype = try dtypeAttribute(ctx, "dtype", nil)
    guard [.float16, .float32, .float64, .bfloat16].contains(dtype) else { throw ctx.unsupported("dtype", "= \(dtype) (expected a floating-point type)") }
    return dtype
}

/// The `shape` attribute of RandomUniform / RandomNormal.
private func shapeAttribute(_ ctx: OpContext) throws -> [Int] {
    guard let shape = try ctx.ints("shape") else { throw ctx.error(.invalidModel, "attribute 'shape' is required") }
    guard shape.allSatisfy({ $0 >= 0 }) else { throw ctx.error(.invalidModel, "attribute 'shape' \(shape) has a negative dimension") }
    return shape
}

/// Operators whose outputs change from run to run (excluded from constant folding and per-shape caching).
let randomOperatorNames: Set<String> = ["RandomUniform", "RandomUniformLike", "RandomNormal", "RandomNormalLike", "Bernoulli", "Multinomial"]

let randomOperators: OperatorTable = [
    "RandomUniform": { ctx in
        let (low, high) = (Double(try ctx.float("low", 0)), Double(try ctx.float("high", 1)))
        let dtype = try floatDType(ctx, .float32)!, shape = try shapeAttribute(ctx), generator = try nodeGenerator(ctx)
        return PreparedKernel { _ in [try randomTensor(dtype, shape: shape, ctx, { low + (high - low) * $0.unit() }, generator)] }
    },
    "RandomUniformLike": { ctx in
        let (low, high) = (Double(try ctx.float("low", 0)), Double(try ctx.float("high", 1)))
        let dtype = try floatDType(ctx, nil), generator = try nodeGenerator(ctx)
        return PreparedKernel { inputs in
            let like = try inputs.required(0, ctx)
            return [try randomTensor(dtype ?? like.dtype, shape: like.shape, ctx, { low + (high - low) * $0.unit() }, generator)]
        }
    },
    "RandomNormal": { ctx in
        let (mean, scale) = (Double(try ctx.float("mean", 0)), Double(try ctx.float("scale", 1)))
        let dtype = try floatDType(ctx, .float32)!, shape = try shapeAttribute(ctx), generator = try nodeGenerator(ctx)
        return PreparedKernel { _ in [try randomTensor(dtype, shape: shape, ctx, { mean + scale * $0.normal() }, generator)] }
    },
    "RandomNormalLike": { ctx in
        let (mean, scale) = (Double(try ctx.float("mean", 0)), Double(try ctx.float("scale", 1)))
        let dtype = try floatDType(ctx, nil), generator = try nodeGenerator(ctx)
        return PreparedKernel { inputs in
            let like = try inputs.required(0, ctx)
            return [try randomTensor(dtype ?? like.dtype, shape: like.shape, ctx, { mean + scale * $0.normal() }, generator)]
        }
    },
    // Bernoulli: y = 1 with probability p (the input), else 0; any numeric or bool output dtype.
    "Bernoulli": { ctx in
        let dtype = ctx.has("dtype") ? try dtypeAttribute(ctx, "dtype", nil) : nil
        if let dtype, dtype == .string { throw ctx.unsupported("dtype", "= string") }
        let generator = try nodeGenerator(ctx)
        return PreparedKernel { inputs in
            let p = try inputs.required(0, ctx)
            guard p.dtype.isFloatingPoint else { throw ctx.error(.unsupportedDType, "probabilities must be floating point, got \(p)") }
            let probabilities = p.doubles
            let draws = generator.withLock { g in probabilities.map { g.unit() < $0 ? 1.0 : 0.0 } }
            return [try castTensor(Tensor(shape: p.shape, scalars: draws), to: dtype ?? p.dtype, ctx)]
        }
    },
    // Multinomial: sample_size draws per row of unnormalised log-probabilities [batch, classes].
    "Multinomial": { ctx in
        let dtype = try dtypeAttribute(ctx, "dtype", .int32)
        guard dtype == .int32 || dtype == .int64 else { throw ctx.unsupported("dtype", "= \(dtype) (expected int32 or int64)") }
        let samples = try ctx.int("sample_size", 1)
        guard samples >= 1, samples <= 1 << 24 else { throw ctx.unsupported("sample_size", "= \(samples)") }
        let generator = try nodeGenerator(ctx)
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            guard x.rank == 2, x.dtype.isFloatingPoint else { throw ctx.error(.executionFailed, "input must be floating point [batch, classes], got \(x)") }
            let (batch, classes) = (x.shape[0], x.shape[1])
            guard classes >= 1 else { throw ctx.error(.executionFailed, "input has no classes") }
            let logits = x.doubles
            var picks = [Double](repeating: 0, count: batch * samples)
            generator.withLock { g in
                for b in 0..<batch {
                    let row = logits[(b * classes)..<((b + 1) * classes)]
                    let top = row.max() ?? 0
                    var cumulative = [Double](repeating: 0, count: classes), total = 0.0
                    for (c, v) in row.enumerated() { total += exp(v - top); cumulative[c] = total }
                    for s in 0..<samples {
                        let target = g.unit() * total
                        var c = 0
                        while c < classes - 1 && cumulative[c] <= target { c += 1 }
                        picks[b * samples + s] = Double(c)
                    }
                }
            }
            return [try castTensor(Tensor(shape: [batch, samples], scalars: picks), to: dtype, ctx)]
        }
    },
]
