import Tensor

/// BitwiseAnd, BitwiseOr, BitwiseXor and BitwiseNot (opset 18) over every integer dtype, with NumPy broadcasting.
let bitwiseOperators: OperatorTable = {
    var table: OperatorTable = [:]
    let binaries: [(String, @Sendable (UInt64, UInt64) -> UInt64)] = [("BitwiseAnd", { $0 & $1 }), ("BitwiseOr", { $0 | $1 }),
                                                                        ("BitwiseXor", { $0 ^ $1 })]
    for (name, op) in binaries {
        table[name] = { ctx in PreparedKernel { inputs in
            let a = try inputs.required(0, ctx), b = try inputs.required(1, ctx)
            guard a.dtype == b.dtype else { throw ctx.error(.executionFailed, "operand dtypes differ: \(a.dtype) and \(b.dtype)") }
            return [try bitwise(a, b, ctx, op)]
        } }
    }
    table["BitwiseNot"] = { ctx in PreparedKernel { inputs in
        let x = try inputs.required(0, ctx)
        return [try bitwise(x, x, ctx) { a, _ in ~a }]
    } }
    return table
}()

/// `op` on the two's-complement bits of each element pair (signed values sign-extended, results truncated back).
private func bitwise(_ a: Tensor, _ b: Tensor, _ ctx: OpContext, _ op: @escaping (UInt64, UInt64) -> UInt64) throws -> Tensor {
    func on<T: FixedWidthInteger & TensorScalar>(_: T.Type) throws -> Tensor {
        try broadcastBinary(a, b, ctx) { (x: T, y: T) -> T in
            T(truncatingIfNeeded: op(UInt64(truncatingIfNeeded: x), UInt64(truncatingIfNeeded: y)))
        }
    }
    switch a.dtype {
    case .int8: return try on(Int8.self)
    case .int16: return try on(Int16.self)
    case .int32: return try on(Int32.self)
    case .int64: return try on(Int64.self)
    case .uint8: return try on(UInt8.self)
    case .uint16: return try on(UInt16.self)
    case .uint32: return try on(UInt32.self)
    case .uint64: return try on(UInt64.self)
    default: throw ctx.error(.unsupportedDType, "bitwise operators need integers, got \(a.dtype)")
    }
}
