import ONNX
import Tensor

// com.microsoft MatMulNBits: the weight-only quantized MatMul that onnxruntime's `MatMulNBitsQuantizer` writes
// (4-bit RTN/GPTQ/HQQ weights of transformer Linear layers; 2 and 8 bits too). Y = A x dequantize(B)^T (+ bias).
// B is [N, blocks, blob]: row n holds column n of the weight matrix, K values in blocks of `block_size`, `bits` bits
// each, packed from the low bits of each byte up. Scales are [N * blocks]; zero points either packed like B (the
// default 2^(bits - 1) when absent) or floats shaped like the scales. g_idx (act-order GPTQ) names the block of each k.
//
// With 4 bits and no act-order g_idx the weights stay packed (`PackedNBitsMatrix`: a gemv over the nibbles for decode
// steps, panels dequantized into cache for prompts), so memory stays close to the file's size, as onnxruntime's CPU
// kernel computes at accuracy level 0-1 (float compute). 2 and 8 bits and act-order g_idx are dequantized once at load
// into a float matrix that the packed float GEMM multiplies; that path is also the 4-bit kernel's reference twin. At
// accuracy level 4 (what onnxruntime-genai's CPU builder writes) onnxruntime quantizes A to int8 per block and
// multiplies in integers, so its outputs move by about one A quantization step; Osprey does the same there for 4 bits,
// blocks of 32 or more and integer zero points (`NBitsInt8Product`), which is also faster than the float product.
// (With float zero points onnxruntime keeps the float product at level 4, and so does Osprey.)

/// Operators of this file, merged into the `com.microsoft` table.
let matMulNBitsOperators: OperatorTable = [
    "MatMulNBits": { ctx in
        let k = try ctx.int("K", 0), n = try ctx.int("N", 0), bits = try ctx.int("bits", 4), blockSize = try ctx.int("block_size", 0)
        let accuracyLevel = try ctx.int("accuracy_level", 0)
        guard k > 0, n > 0 else { throw ctx.error(.invalidModel, "attributes K and N must be positive, got K=\(k), N=\(n)") }
        guard [2, 4, 8].contains(bits) else { throw ctx.unsupported("bits", "= \(bits) (2, 4 and 8 are)") }
        guard blockSize >= 16, blockSize & (blockSize - 1) == 0 else {
            throw ctx.error(.invalidModel, "attribute block_size must be a power of two >= 16, got \(blockSize)")
        }
        for input in [1, 2, 3, 4, 5] where ctx.hasInput(input) && ctx.constants[input] == nil {
            throw ctx.error(.unsupportedOperator, "input \(input) ('\(ctx.node.inputs[input])') must be a constant initializer")
        }
        let layout = NBitsLayout(k: k, n: n, bits: bits, blockSize: blockSize)
        let (packed, scales) = (ctx.constants[1]!, ctx.constants[2]!)
        let parts = try layout.checked(packed: packed, scales: scales, zeros: ctx.constants[3], groups: ctx.constants[4], ctx)
        let bias = ctx.constants[5]
        if let bias, bias.count != n { throw ctx.error(.invalidModel, "bias has \(bias.count) elements, expected N = \(n)") }
        if bits == 4, parts.groups == nil || parts.groups!.enumerated().allSatisfy({ $0.element == $0.offset / blockSize }) {
            let bias = try bias.map { try floatValues(castTensor($0, to: .float32, ctx), "bias", ctx) }
            // Packed uint8 zero points stay integers: a byte per block where floats would add a quarter to a decode step's reads.
            let zeroTensor = ctx.constants[3]
            let integerZeros = zeroTensor.map { !$0.dtype.isFloatingPoint } ?? false
            let matrix = PackedNBitsMatrix(layout: layout, packed: packed, scales: parts.scales,
                                           zeros: zeroTensor != nil && !integerZeros ? parts.zeros : nil,
                                           zeroBytes: integerZeros ? parts.zeros.map { UInt8($0) } : nil, bias: bias,
                                           int8: accuracyLevel == 4 && blockSize >= 32 && (zeroTensor == nil || integerZeros))
            return packedNBitsKernel(matrix, activation: ctx.activation, ctx)
        }
        let weights = layout.dequantized(packed: packed, parts)
        // The float MatMul (packed B, bias and any fused activation in its epilogue) over the dequantized weights.
        var inputs = [ctx.node.inputs[0], ctx.node.inputs[1]]
        if bias != nil { inputs.append(ctx.node.inputs[5]) }
        let matmul = Node(name: ctx.node.name, opType: "MatMul", inputs: inputs, outputs: ctx.node.outputs)
        var known: [Int: Tensor] = [1: weights]
        if let bias { known[2] = try castTensor(bias, to: .float32, ctx) }
        let inner = OpContext(node: matmul, opset: ctx.opset, constants: known, activation: ctx.activation)
        let prepared = try matmulFactory(inner)
        inner.releaseConstants()
        let kernel = prepared.kernel
        return PreparedKernel(kernel: { outer in
            _ = try checkedA(outer, k: k, ctx)
            var args = KernelInputs(values: [outer.take(0), nil, nil])
            return try kernel(&args)
        })
    },
]

/// The storage geometry of MatMulNBits' B, scales and zero points.
struct NBitsLayout {
    let k: Int, n: Int, bits: Int, blockSize: Int
    /// Blocks per column: ceil(K / block_size).
    var blocks: Int { (k + blockSize - 1) / blockSize }
    /// Bytes of one block of B.
    var blob: Int { blockSize * bits / 8 }
    /// Bytes of one row of packed zero points: ceil(blocks * bits / 8).
    var zeroRow: Int { (blocks * bits + 7) / 8 }

    /// The `index`-th `bits`-bit value of `bytes` from `offset`, low bits first.
    func value(_ bytes: UnsafeRawBufferPointer, _ offset: Int, _ index: Int) -> Int {
        let perByte = 8 / bits
        let byte = Int(bytes[offset + index / perByte])
        return (byte >> ((index % perByte) * bits)) & ((1 << bits) - 1)
    }

    /// Scales, zero points and g_idx checked against this geometry (B's too), as one float or index per entry.
    func checked(packed: Tensor, scales: Tensor, zeros: Tensor?, groups: Tensor?, _ ctx: OpContext) throws -> NBitsParts {
        guard packed.dtype == .uint8, packed.count == n * blocks * blob else {
            throw ctx.error(.invalidModel, "B must be uint8 [N, blocks, blob] = [\(n), \(blocks), \(blob)], got \(packed.dtype) \(packed.shape)")
        }
        let scale = try floatValues(scales, "scales", ctx)
        guard scale.count == n * blocks else { throw ctx.error(.invalidModel, "scales must have N * blocks = \(n * blocks) elements, got \(scale.count)") }
        let group = try groups.map { g -> [Int] in
            let values = g.doubles.map { Int($0) }
            guard values.count == k, values.allSatisfy({ (0..<blocks).contains($0) }) else {
                throw ctx.error(.invalidModel, "g_idx must hold K = \(k) block indices below \(blocks), got \(g.shape)")
            }
            return values
        }
        return NBitsParts(scales: scale, zeros: try zeroPoints(zeros, ctx), groups: group)
    }

    /// The float32 [K, N] matrix (q - zero) * scale of every weight, in the layout MatMul's B takes.
    func dequantized(packed: Tensor, _ parts: NBitsParts) -> Tensor {
        let (scale, zero, group) = (parts.scales, parts.zeros, parts.groups)
        var out = [Float](repeating: 0, count: k * n)
        packed.withUnsafeBytes { b in
            for column in 0..<n {
                for row in 0..<k {
                    let block = group?[row] ?? row / blockSize
                    let q = Float(value(b, (column * blocks + row / blockSize) * blob, row % blockSize))
                    out[row * n + column] = (q - zero[column * blocks + block]) * scale[column * blocks + block]
                }
            }
        }
        return Tensor(shape: [k, n], scalars: out)
    }

    /// One zero point per (column, block): unpacked from uint8 rows, taken as floats, or 2^(bits - 1) when absent.
    private func zeroPoints(_ zeros: Tensor?, _ ctx: OpContext) throws -> [Float] {
        guard let zeros else { return [Float](repeating: Float(1 << (bits - 1)), count: n * blocks) }
        if zeros.dtype.isFloatingPoint {
            let values = try floatValues(zeros, "zero_points", ctx)
            guard values.count == n * blocks else { throw ctx.error(.invalidModel, "float zero_points must have N * blocks = \(n * blocks) elements, got \(values.count)") }
            return values
        }
        guard zeros.dtype == .uint8, zeros.count == n * zeroRow else {
            throw ctx.error(.invalidModel, "zero_points must be uint8 [N * \(zeroRow)] = \(n * zeroRow) bytes or float, got \(zeros.dtype) \(zeros.shape)")
        }
        return zeros.withUnsafeBytes { z in
            (0..<(n * blocks)).map { Float(value(z, ($0 / blocks) * zeroRow, $0 % blocks)) }
        }
    }
}

/// MatMulNBits' scales and zero points as floats ([N * blocks] each) and its g_idx when present.
struct NBitsParts {
    let scales: [Float]
    let zeros: [Float]
    let groups: [Int]?
}

/// The kernel over 4-bit weights kept packed: A [..., K] float32 to Y [..., N], with bias and `activation`.
private func packedNBitsKernel(_ matrix: PackedNBitsMatrix, activation: Activation, _ ctx: OpContext) -> PreparedKernel {
    let (k, n) = (matrix.layout.k, matrix.layout.n)
    return PreparedKernel(kernel: { inputs in
        let a = try checkedA(inputs, k: k, ctx)
        let rows = a.count / k
        var y = Tensor.pooled(.float32, shape: Array(a.shape.dropLast()) + [n])
        y.withUnsafeMutableBufferPointer(of: Float.self) { o in
            guard let out = o.baseAddress, rows > 0 else { return }
            a.floatPointer { matrix.multiply($0, rows: rows, out: out) }
            if case .none = activation {} else { activation.apply(out, count: rows * n) }
        }
        return [y]
    }, consumedInputs: [1, 2, 3, 4, 5])
}

/// Input A of a MatMulNBits, checked: float32 with K on its last axis.
private func checkedA(_ inputs: KernelInputs, k: Int, _ ctx: OpContext) throws -> Tensor {
    let a = try inputs.required(0, ctx)
    guard a.dtype == .float32 else { throw ctx.error(.unsupportedDType, "A must be float32, got \(a.dtype)") }
    guard a.rank >= 1, a.shape[a.rank - 1] == k else { throw ctx.error(.executionFailed, "A's last axis must be K = \(k), got shape \(a.shape)") }
    return a
}
