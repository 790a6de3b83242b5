import Foundation
import Tensor

/// Operator factories by op type; each file contributes one table.
typealias OperatorTable = [String: @Sendable (OpContext) throws -> PreparedKernel]

/// Same-dtype arithmetic on the four dtypes models compute with.
@inline(__always)
func arithmetic(_ ctx: OpContext, _ a: Tensor, _ b: Tensor,
                _ f: @escaping (Float, Float) -> Float, _ d: @escaping (Double, Double) -> Double,
                _ l: @escaping (Int64, Int64) -> Int64, _ i: @escaping (Int32, Int32) -> Int32) throws -> Tensor {
    guard a.dtype == b.dtype else { throw ctx.error(.executionFailed, "operand dtypes differ: \(a.dtype) and \(b.dtype)") }
    switch a.dtype {
    case .float32: return try broadcastBinary(a, b, ctx, f)
    case .float64: return try broadcastBinary(a, b, ctx, d)
    case .int64: return try broadcastBinary(a, b, ctx, l)
    case .int32: return try broadcastBinary(a, b, ctx, i)
    case .uint8: return try broadcastBinary(a, b, ctx) { (x: UInt8, y: UInt8) in UInt8(truncatingIfNeeded: l(Int64(x), Int64(y))) }
    case .int8: return try broadcastBinary(a, b, ctx) { (x: Int8, y: Int8) in Int8(truncatingIfNeeded: l(Int64(x), Int64(y))) }
    case .int16, .uint16, .uint32, .uint64:
        // Rare widths compute in int64 and narrow back.
        let r = try broadcastBinary(castTensor(a, to: .int64, ctx), castTensor(b, to: .int64, ctx), ctx, l)
        return try castTensor(r, to: a.dtype, ctx)
    case .float16, .bfloat16:
        let r = try broadcastBinary(castTensor(a, to: .float32, ctx), castTensor(b, to: .float32, ctx), ctx, f)
        return try castTensor(r, to: a.dtype, ctx)
    default: throw ctx.error(.unsupportedDType, "dtype \(a.dtype) is not supported")
    }
}

/// Comparison producing bool.
func comparison(_ ctx: OpContext, _ a: Tensor, _ b: Tensor, _ cmp: @escaping (Double, Double) -> Bool) throws -> Tensor {
    guard a.dtype == b.dtype else { throw ctx.error(.executionFailed, "operand dtypes differ: \(a.dtype) and \(b.dtype)") }
    switch a.dtype {
    case .float32: return try broadcastBinary(a, b, ctx) { (x: Float, y: Float) in cmp(Double(x), Double(y)) }
    case .float64: return try broadcastBinary(a, b, ctx) { (x: Double, y: Double) in cmp(x, y) }
    case .int64: return try broadcastBinary(a, b, ctx) { (x: Int64, y: Int64) in x == y ? cmp(0, 0) : (x < y ? cmp(0, 1) : cmp(1, 0)) }
    case .int32: return try broadcastBinary(a, b, ctx) { (x: Int32, y: Int32) in cmp(Double(x), Double(y)) }
    case .int8: return try broadcastBinary(a, b, ctx) { (x: Int8, y: Int8) in cmp(Double(x), Double(y)) }
    case .uint8: return try broadcastBinary(a, b, ctx) { (x: UInt8, y: UInt8) in cmp(Double(x), Double(y)) }
    case .int16: return try broadcastBinary(a, b, ctx) { (x: Int16, y: Int16) in cmp(Double(x), Double(y)) }
    case .uint16: return try broadcastBinary(a, b, ctx) { (x: UInt16, y: UInt16) in cmp(Double(x), Double(y)) }
    case .uint32: return try broadcastBinary(a, b, ctx) { (x: UInt32, y: UInt32) in cmp(Double(x), Double(y)) }
    // Ordered by sign, not through Double (which rounds above 2^53).
    case .uint64: return try broadcastBinary(a, b, ctx) { (x: UInt64, y: UInt64) in x == y ? cmp(0, 0) : (x < y ? cmp(0, 1) : cmp(1, 0)) }
    case .bool: return try broadcastBinary(a, b, ctx) { (x: Bool, y: Bool) in cmp(x ? 1 : 0, y ? 1 : 0) }
    case .string: return try stringComparison(ctx, a, b) { x, y in x == y ? cmp(0, 0) : (x.lexicographicallyPrecedes(y) ? cmp(0, 1) : cmp(1, 0)) }
    default: throw ctx.error(.unsupportedDType, "dtype \(a.dtype) is not supported")
    }
}

/// `op` over the element pairs of two string tensors with NumPy broadcasting: the output shape and its values. The
/// numeric broadcast pairs the elements' positions (a's times b's count plus b's), then the pairs are looked up.
func broadcastStrings<R>(_ ctx: OpContext, _ a: Tensor, _ b: Tensor, _ op: ([UInt8], [UInt8]) -> R) throws -> (shape: [Int], values: [R]) {
    let width = Int64(b.count)
    let positionsA = Tensor(shape: a.shape, scalars: (0..<Int64(a.count)).map { $0 }), positionsB = Tensor(shape: b.shape, scalars: (0..<width).map { $0 })
    let pairs = try broadcastBinary(positionsA, positionsB, ctx) { (i: Int64, j: Int64) -> Int64 in i * width + j }
    return (pairs.shape, pairs.scalars(as: Int64.self).map { op(a.strings[Int($0 / width)], b.strings[Int($0 % width)]) })
}

/// A comparison of two string tensors (byte-wise order), as a bool tensor.
private func stringComparison(_ ctx: OpContext, _ a: Tensor, _ b: Tensor, _ cmp: ([UInt8], [UInt8]) -> Bool) throws -> Tensor {
    let (shape, values) = try broadcastStrings(ctx, a, b, cmp)
    return Tensor(shape: shape, scalars: values)
}

/// A float-only unary op (in place when possible); `intOp` adds signed-integer support.
func unaryFloat(_ name: String, int intOp: (@Sendable (Int64) -> Int64)? = nil,
                _ make: @escaping @Sendable (OpContext) throws -> @Sendable (Float) -> Float) -> (String, @Sendable (OpContext) throws -> PreparedKernel) {
    (name, { ctx in
        let f = try make(ctx)
        return PreparedKernel(kernel: { inputs in
            // Only the dtype is read here: holding the tensor would keep a second reference and defeat in-place writes.
            guard let dtype = inputs[0]?.dtype else { throw ctx.error(.invalidModel, "missing input") }
            switch dtype {
            case .float32: return [mapFloats(taking: 0, from: &inputs, f)]
            case .float64: return [mapElements(inputs[0]!) { (v: Double) in Double(f(Float(v))) }]
            case .int64 where intOp != nil: return [mapElements(inputs[0]!) { (v: Int64) in intOp!(v) }]
            case .int32 where intOp != nil: return [mapElements(inputs[0]!) { (v: Int32) in Int32(truncatingIfNeeded: intOp!(Int64(v))) }]
            default: throw ctx.error(.unsupportedDType, "input dtype \(dtype) is not supported (float32)")
            }
        })
    })
}

/// `x` as float32 for IsNaN / IsInf: float16, bfloat16 and float64 keep their NaNs and infinities when widened or
/// narrowed (a float64 beyond float32's range becomes infinite, which IsInf then reports: rare enough to accept).
func floatClassified(_ x: Tensor, _ name: String, _ ctx: OpContext) throws -> Tensor {
    switch x.dtype {
    case .float32: return x
    case .float16, .bfloat16, .float64: return try castTensor(x, to: .float32, ctx)
    default: throw ctx.error(.unsupportedDType, "\(name) needs a float input, got \(x.dtype)")
    }
}

/// NumPy's floating `mod` (fmod 0): the remainder takes the divisor's sign, so -3 mod inf is inf and 0 mod -2 is -0
/// (`a - floor(a / b) * b` gives NaN for an infinite divisor).
@inline(__always) func floorModulo<F: BinaryFloatingPoint>(_ a: F, _ b: F) -> F {
    var r = a.truncatingRemainder(dividingBy: b)
    if r != 0 && (r < 0) != (b < 0) { r += b }
    return r == 0 ? (b < 0 ? -0.0 : 0.0) : r
}

/// Round half to even, as ONNX Round specifies.
@inline(__always) func roundHalfEven(_ x: Float) -> Float { x.rounded(.toNearestOrEven) }

/// Exact Gelu via erf.
@inline(__always) func geluExact(_ x: Float) -> Float { 0.5 * x * (1 + Foundation.erf(x / 1.41421356237)) }

let elementwiseOperators: OperatorTable = {
    var table: OperatorTable = [:]
    let unaries: [(String, @Sendable (OpContext) throws -> PreparedKernel)] = [
        vectorUnary("Sqrt", vector: { $0.squareRoot() }, scalar: { Foundation.sqrt($0) }),
        vectorUnary("Exp", vector: { vectorExp($0) }, scalar: { Foundation.exp($0) }),
        unaryFloat("Log") { _ in { Foundation.log($0) } },
        unaryFloat("Neg", int: { 0 &- $0 }) { _ in { -$0 } },
        unaryFloat("Abs", int: { $0 < 0 ? 0 &- $0 : $0 }) { _ in { Swift.abs($0) } },
        unaryFloat("Reciprocal") { _ in { 1 / $0 } },
        vectorUnary("Erf", vector: { vectorErf($0) }, scalar: { Foundation.erf($0) }),
        activationUnary("Relu", { _ in .relu }, int: { max($0, 0) }),
        activationUnary("LeakyRelu") { ctx in .leakyRelu(alpha: try ctx.float("alpha", 0.01)) },
        activationUnary("Sigmoid") { _ in .sigmoid },
        activationUnary("HardSigmoid") { ctx in .hardSigmoid(alpha: try ctx.float("alpha", 0.2), beta: try ctx.float("beta", 0.5)) },
        activationUnary("HardSwish") { _ in .hardSwish },
        activationUnary("Tanh") { _ in .tanh },
        unaryFloat("Floor") { _ in { Foundation.floor($0) } },
        unaryFloat("Ceil") { _ in { Foundation.ceil($0) } },
        unaryFloat("Round") { _ in { roundHalfEven($0) } },
        unaryFloat("Sign", int: { $0 > 0 ? 1 : ($0 < 0 ? -1 : 0) }) { _ in { $0 > 0 ? 1 : ($0 < 0 ? -1 : ($0.isNaN ? $0 : 0)) } },
        unaryFloat("Softplus") { _ in { $0 > 20 ? $0 : Foundation.log1p(Foundation.exp($0)) } },
        unaryFloat("Softsign") { _ in { $0 / (1 + Swift.abs($0)) } },
        unaryFloat("Elu") { ctx in let a = try ctx.float("alpha", 1); return { $0 >= 0 ? $0 : a * (Foundation.exp($0) - 1) } },
        unaryFloat("Celu") { ctx in
            let a = try ctx.float("alpha", 1)
            return { Swift.max(0, $0) + Swift.min(0, a * (Foundation.exp($0 / a) - 1)) }
        },
        unaryFloat("Selu") { ctx in
            let a = try ctx.float("alpha", 1.67326319217681884765625), g = try ctx.float("gamma", 1.05070102214813232421875)
            return { $0 > 0 ? g * $0 : g * (a * Foundation.exp($0) - a) }
        },
        unaryFloat("ThresholdedRelu") { ctx in let a = try ctx.float("alpha", 1); return { $0 > a ? $0 : 0 } },
        activationUnary("Gelu") { ctx in
            switch try ctx.string("approximate", "none") {
            case "none": return .gelu
            case "tanh": return .geluTanh
            case let other: throw ctx.unsupported("approximate", "'\(other)'")
            }
        },
        activationUnary("Mish") { _ in .mish },
        // Swish (opset 24) is x * sigmoid(alpha * x): the fused SiLU when alpha is 1.
        ("Swish", { ctx in
            let alpha = try ctx.float("alpha", 1)
            if alpha == 1 { return try activationUnary("Swish") { _ in .silu }.1(ctx) }
            return try unaryFloat("Swish") { _ in { $0 / (1 + Foundation.exp(-alpha * $0)) } }.1(ctx)
        }),
        unaryFloat("Sin") { _ in { Foundation.sin($0) } },
        unaryFloat("Cos") { _ in { Foundation.cos($0) } },
        unaryFloat("Tan") { _ in { Foundation.tan($0) } },
        unaryFloat("Atan") { _ in { Foundation.atan($0) } },
        unaryFloat("Asin") { _ in { Foundation.asin($0) } },
        unaryFloat("Acos") { _ in { Foundation.acos($0) } },
        unaryFloat("Sinh") { _ in { Foundation.sinh($0) } },
        unaryFloat("Cosh") { _ in { Foundation.cosh($0) } },
        unaryFloat("Asinh") { _ in { Foundation.asinh($0) } },
        unaryFloat("Acosh") { _ in { Foundation.acosh($0) } },
        unaryFloat("Atanh") { _ in { Foundation.atanh($0) } },
    ]
    for (name, factory) in unaries { table[name] = factory }

    table["Add"] = { ctx in PreparedKernel { inputs in
        if let result = try floatArithmetic(.add, &inputs, ctx) { return [result] }
        return [try arithmetic(ctx, inputs.required(0, ctx), inputs.required(1, ctx), { $0 + $1 }, { $0 + $1 }, { $0 &+ $1 }, { $0 &+ $1 })]
    } }
    table["Sub"] = { ctx in PreparedKernel { inputs in
        if let result = try floatArithmetic(.subtract, &inputs, ctx) { return [result] }
        return [try arithmetic(ctx, inputs.required(0, ctx), inputs.required(1, ctx), { $0 - $1 }, { $0 - $1 }, { $0 &- $1 }, { $0 &- $1 })]
    } }
    table["Mul"] = { ctx in PreparedKernel { inputs in
        if let result = try floatArithmetic(.multiply, &inputs, ctx) { return [result] }
        return [try arithmetic(ctx, inputs.required(0, ctx), inputs.required(1, ctx), { $0 * $1 }, { $0 * $1 }, { $0 &* $1 }, { $0 &* $1 })]
    } }
    table["Div"] = { ctx in PreparedKernel { inputs in
        if let result = try floatArithmetic(.divide, &inputs, ctx) { return [result] }
        return [try arithmetic(ctx, inputs.required(0, ctx), inputs.required(1, ctx), { $0 / $1 }, { $0 / $1 },
                        { $1 == 0 ? 0 : $0 / $1 }, { $1 == 0 ? 0 : $0 / $1 })]
    } }
    table["Mod"] = { ctx in
        let fmod = try ctx.int("fmod", 0) == 1
        return PreparedKernel { inputs in
            [try arithmetic(ctx, inputs.required(0, ctx), inputs.required(1, ctx),
                            { fmod ? Foundation.fmod($0, $1) : floorModulo($0, $1) },
                            { fmod ? Foundation.fmod($0, $1) : floorModulo($0, $1) },
                            { a, b in b == 0 ? 0 : (fmod ? a % b : ((a % b) + b) % b) },
                            { a, b in b == 0 ? 0 : (fmod ? a % b : ((a % b) + b) % b) })]
        }
    }
    table["Pow"] = { ctx in PreparedKernel { inputs in
        let x = try inputs.required(0, ctx), y = try inputs.required(1, ctx)
        switch x.dtype {
        case .float32:
            // x^2 (decomposed LayerNorm and variance) is x * x on the fast path.
            if y.count == 1, y.doubleValue(at: 0) == 2, y.rank <= x.rank {
                var pair = KernelInputs(values: [x, x])
                if let square = try floatArithmetic(.multiply, &pair, ctx) { return [square] }
            }
            let yf = y.dtype == .float32 ? y : try castTensor(y, to: .float32, ctx)
            return [try broadcastBinary(x, yf, ctx) { (a: Float, b: Float) -> Float in
                b == 2 ? a * a : (b == 0.5 ? Foundation.sqrt(a) : Foundation.pow(a, b)) }]
        case .float64:
            let yd = try castTensor(y, to: .float64, ctx)
            return [try broadcastBinary(x, yd, ctx) { (a: Double, b: Double) in Foundation.pow(a, b) }]
        case .int64, .int32:
            let xd = try castTensor(x, to: .float64, ctx), yd = try castTensor(y, to: .float64, ctx)
            let r = try broadcastBinary(xd, yd, ctx) { (a: Double, b: Double) in Foundation.pow(a, b) }
            return [try castTensor(r, to: x.dtype, ctx)]
        default: throw ctx.error(.unsupportedDType, "dtype \(x.dtype) is not supported")
        }
    } }
    table["PRelu"] = { ctx in PreparedKernel { inputs in
        let x = try inputs.required(0, ctx), slope = try inputs.required(1, ctx)
        guard x.dtype == .float32, slope.dtype == .float32 else { throw ctx.error(.unsupportedDType, "PRelu needs float32, got \(x.dtype)") }
        return [try broadcastBinary(x, slope, ctx) { (v: Float, s: Float) in v >= 0 ? v : v * s }]
    } }
    table["Equal"] = { ctx in PreparedKernel { inputs in [try comparison(ctx, inputs.required(0, ctx), inputs.required(1, ctx)) { $0 == $1 }] } }
    table["Greater"] = { ctx in PreparedKernel { inputs in [try comparison(ctx, inputs.required(0, ctx), inputs.required(1, ctx)) { $0 > $1 }] } }
    table["Less"] = { ctx in PreparedKernel { inputs in [try comparison(ctx, inputs.required(0, ctx), inputs.required(1, ctx)) { $0 < $1 }] } }
    table["GreaterOrEqual"] = { ctx in PreparedKernel { inputs in [try comparison(ctx, inputs.required(0, ctx), inputs.required(1, ctx)) { $0 >= $1 }] } }
    table["LessOrEqual"] = { ctx in PreparedKernel { inputs in [try comparison(ctx, inputs.required(0, ctx), inputs.required(1, ctx)) { $0 <= $1 }] } }
    for (name, op) in [("And", { @Sendable (a: Bool, b: Bool) in a && b }), ("Or", { @Sendable (a: Bool, b: Bool) in a || b }), ("Xor", { @Sendable (a: Bool, b: Bool) in a != b })] as [(String, @Sendable (Bool, Bool) -> Bool)] {
        table[name] = { ctx in PreparedKernel { inputs in
            let a = try inputs.required(0, ctx), b = try inputs.required(1, ctx)
            guard a.dtype == .bool, b.dtype == .bool else { throw ctx.error(.unsupportedDType, "\(name) needs bool inputs, got \(a.dtype), \(b.dtype)") }
            return [try broadcastBinary(a, b, ctx, op)]
        } }
    }
    table["Not"] = { ctx in PreparedKernel { inputs in
        let a = try inputs.required(0, ctx)
        guard a.dtype == .bool else { throw ctx.error(.unsupportedDType, "Not needs bool, got \(a.dtype)") }
        return [mapElements(a) { (v: Bool) in !v }]
    } }
    table["IsNaN"] = { ctx in PreparedKernel { inputs in
        let a = try floatClassified(inputs.required(0, ctx), "IsNaN", ctx)
        return [mapElements(a) { (v: Float) in v.isNaN }]
    } }
    table["IsInf"] = { ctx in
        let pos = try ctx.int("detect_positive", 1) == 1, neg = try ctx.int("detect_negative", 1) == 1
        return PreparedKernel { inputs in
            let a = try floatClassified(inputs.required(0, ctx), "IsInf", ctx)
            return [mapElements(a) { (v: Float) in v.isInfinite && ((v > 0 && pos) || (v < 0 && neg)) }]
        }
    }

    // Variadic ops fold pairwise with broadcasting.
    func variadic(_ name: String, _ f: @escaping @Sendable (Float, Float) -> Float, _ d: @escaping @Sendable (Double, Double) -> Double,
                  _ l: @escaping @Sendable (Int64, Int64) -> Int64, _ i: @escaping @Sendable (Int32, Int32) -> Int32, mean: Bool = false) {
        table[name] = { ctx in PreparedKernel { inputs in
            var acc = try inputs.required(0, ctx)
            for k in 1..<max(1, inputs.count) {
                guard let next = inputs[k] else { continue }
                acc = try arithmetic(ctx, acc, next, f, d, l, i)
            }
            if inputs.count == 1 { acc = try arithmetic(ctx, acc, acc, { a, _ in a }, { a, _ in a }, { a, _ in a }, { a, _ in a }) }
            if mean {
                let n = Float(inputs.values.compactMap { $0 }.count)
                guard acc.dtype == .float32 else { throw ctx.error(.unsupportedDType, "Mean needs float32, got \(acc.dtype)") }
                acc = mapFloats(acc) { $0 / n }
            }
            return [acc]
        } }
    }
    variadic("Sum", { $0 + $1 }, { $0 + $1 }, { $0 &+ $1 }, { $0 &+ $1 })
    variadic("Mean", { $0 + $1 }, { $0 + $1 }, { $0 &+ $1 }, { $0 &+ $1 }, mean: true)
    variadic("Max", { $0.isNaN || $1.isNaN ? .nan : Swift.max($0, $1) }, { Swift.max($0, $1) }, { Swift.max($0, $1) }, { Swift.max($0, $1) })
    variadic("Min", { $0.isNaN || $1.isNaN ? .nan : Swift.min($0, $1) }, { Swift.min($0, $1) }, { Swift.min($0, $1) }, { Swift.min($0, $1) })

    table["Clip"] = { ctx in
        let attrMin = try ctx.float("min", -.greatestFiniteMagnitude), attrMax = try ctx.float("max", .greatestFiniteMagnitude)
        let legacy = ctx.opset < 11
        return PreparedKernel { inputs in
            guard let dtype = inputs[0]?.dtype else { throw ctx.error(.invalidModel, "missing input") }
            if legacy {
                guard dtype == .float32 else { throw ctx.error(.unsupportedDType, "dtype \(dtype) is not supported") }
                return [mapFloats(taking: 0, from: &inputs) { Swift.min(Swift.max($0, attrMin), attrMax) }]
            }
            let lo = inputs[1].map { $0.doubleValue(at: 0) }, hi = inputs[2].map { $0.doubleValue(at: 0) }
            if dtype == .float32 {
                let l = lo.map { Float($0) } ?? -.infinity, h = hi.map { Float($0) } ?? .infinity
                return [applyActivation(.clip(min: l, max: h), taking: 0, from: &inputs)]
            }
            let x = inputs[0]!
            switch x.dtype {
            case .int64:
                let l = lo.map { Int64($0) } ?? .min, h = hi.map { Int64($0) } ?? .max
                return [mapElements(x) { (v: Int64) in Swift.min(Swift.max(v, l), h) }]
            case .int32:
                let l = lo.map { Int32($0) } ?? .min, h = hi.map { Int32($0) } ?? .max
                return [mapElements(x) { (v: Int32) in Swift.min(Swift.max(v, l), h) }]
            case .float64, .int8, .uint8, .int16, .uint16, .uint32, .uint64:
                let l = lo ?? -.infinity, h = hi ?? .infinity
                let wide = try castTensor(x, to: .float64, ctx)
                return [try castTensor(mapElements(wide) { (v: Double) in Swift.min(Swift.max(v, l), h) }, to: x.dtype, ctx)]
            default: throw ctx.error(.unsupportedDType, "dtype \(x.dtype) is not supported")
            }
        }
    }
    table["Where"] = { ctx in PreparedKernel { inputs in
        try whereSelect(ctx, inputs.required(0, ctx), inputs.required(1, ctx), inputs.required(2, ctx))
    } }
    return table
}()

/// `Where(cond, x, y)` with three-way broadcasting; works on any fixed-size dtype.
func whereSelect(_ ctx: OpContext, _ cond: Tensor, _ x: Tensor, _ y: Tensor) throws -> [Tensor] {
    guard cond.dtype == .bool else { throw ctx.error(.unsupportedDType, "condition must be bool, got \(cond.dtype)") }
    guard x.dtype == y.dtype else { throw ctx.error(.executionFailed, "X is \(x.dtype) but Y is \(y.dtype)") }
    guard let s1 = broadcastShape(cond.shape, x.shape), let shape = broadcastShape(s1, y.shape) else {
        throw ctx.error(.executionFailed, "cannot broadcast \(cond.shape), \(x.shape), \(y.shape)")
    }
    let size = x.dtype.byteSize
    var out = Tensor(uninitialized: x.dtype, shape: shape)
    if out.count == 0 { return [out] }
    let strides = [broadcastStrides(cond.shape, to: shape), broadcastStrides(x.shape, to: shape),
                   broadcastStrides(y.shape, to: shape), Tensor.contiguousStrides(shape)]
    // Elements move as whole words of their width (a copyMemory call per element cost ~3 ns: the attention masks'
    // Where(IsNaN(softmax), 0, softmax) was 12% of MiniLM).
    switch size {
    case 1: selectElements(UInt8.self, cond, x, y, &out, shape: shape, strides: strides)
    case 2: selectElements(UInt16.self, cond, x, y, &out, shape: shape, strides: strides)
    case 4: selectElements(UInt32.self, cond, x, y, &out, shape: shape, strides: strides)
    case 8: selectElements(UInt64.self, cond, x, y, &out, shape: shape, strides: strides)
    default:
        cond.withUnsafeBytes { c in x.withUnsafeBytes { xb in y.withUnsafeBytes { yb in out.withUnsafeMutableBytes { ob in
            let cp = c.baseAddress!.assumingMemoryBound(to: UInt8.self)
            forEachRun(shape: shape, strides: strides) { off, n, inner in
                for i in 0..<n {
                    let pick = cp[off[0] + i * inner[0]] != 0
                    let src = pick ? xb.baseAddress! + (off[1] + i * inner[1]) * size : yb.baseAddress! + (off[2] + i * inner[2]) * size
                    (ob.baseAddress! + (off[3] + i * inner[3]) * size).copyMemory(from: src, byteCount: size)
                }
            }
        } } } }
    }
    return [out]
}

/// The broadcast select of `whereSelect` for elements of `Word`'s width, runs of the innermost axis at a time.
private func selectElements<Word>(_: Word.Type, _ cond: Tensor, _ x: Tensor, _ y: Tensor, _ out: inout Tensor, shape: [Int], strides: [[Int]]) {
    cond.withUnsafeBytes { c in x.withUnsafeBytes { xb in y.withUnsafeBytes { yb in out.withUnsafeMutableBytes { ob in
        let cp = c.baseAddress!.assumingMemoryBound(to: UInt8.self)
        let xp = xb.baseAddress!.assumingMemoryBound(to: Word.self), yp = yb.baseAddress!.assumingMemoryBound(to: Word.self)
        let op = ob.baseAddress!.assumingMemoryBound(to: Word.self)
        forEachRun(shape: shape, strides: strides) { off, n, inner in
            let cs = inner[0], xs = inner[1], ys = inner[2], os = inner[3]
            let cr = cp + off[0], xr = xp + off[1], yr = yp + off[2], or = op + off[3]
            for i in 0..<n { or[i * os] = cr[i * cs] != 0 ? xr[i * xs] : yr[i * ys] }
        }
    } } } }
}
