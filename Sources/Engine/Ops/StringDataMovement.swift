import Tensor

/// Operators that only move elements (no arithmetic on them) run on string tensors through their numeric kernels:
/// each string input is replaced by the int64 positions of its strings in one shared table, the kernel moves the
/// positions, and every int64 output is read back as the strings at those positions. Strings live out of line, so
/// the byte-copying kernels could not move them otherwise (they trapped on a string tensor).
let stringDataMovementOperators: Set<String> = [
    "Transpose", "Slice", "Expand", "Tile", "GatherElements", "GatherND", "Compress", "Split", "DepthToSpace",
    "SpaceToDepth", "ReverseSequence", "ScatterElements", "ScatterND", "Where", "Concat", "Squeeze", "Unsqueeze",
    "Reshape", "Flatten", "Identity",
]

/// `factory` with string inputs carried as positions (see `stringDataMovementOperators`).
func movingStrings(_ factory: @escaping @Sendable (OpContext) throws -> PreparedKernel) -> @Sendable (OpContext) throws -> PreparedKernel {
    { ctx in
        let prepared = try factory(ctx)
        let kernel = prepared.kernel
        return PreparedKernel(kernel: { inputs in
            guard inputs.values.contains(where: { $0?.dtype == .string }) else { return try kernel(&inputs) }
            var table: [[UInt8]] = []
            for (i, value) in inputs.values.enumerated() {
                guard let value, value.dtype == .string else { continue }
                let first = Int64(table.count)
                table += value.strings
                inputs.values[i] = Tensor(shape: value.shape, scalars: (0..<Int64(value.count)).map { first + $0 })
            }
            return try kernel(&inputs).map { output in
                guard output.dtype == .int64 else { return output }
                return Tensor(shape: output.shape, strings: output.scalars(as: Int64.self).map { table[Int($0)] })
            }
        }, consumedInputs: prepared.consumedInputs)
    }
}
