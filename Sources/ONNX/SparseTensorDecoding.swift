import Protobuf
import Tensor

/// `SparseTensorProto` decoding: COO values and indices expanded into a dense tensor.
extension TensorDecoder {
    /// Largest dense tensor a sparse initializer may expand to: its size comes from `dims`, not from the bytes read.
    static let maxDensifiedBytes = 1 << 30

    /// A `SparseTensorProto` payload densified: COO indices either linear `[NNZ]` or per-axis `[NNZ, rank]`.
    func decodeSparseTensor(_ bytes: UnsafeRawBufferPointer) throws -> (name: String, tensor: Tensor) {
        var valuesBytes: UnsafeRawBufferPointer?
        var indicesBytes: UnsafeRawBufferPointer?
        var dimFields: [WireField] = []
        var reader = WireReader(bytes)
        while let field = try reader.next() {
            switch field.number {
            case 1: try field.expect(.lengthDelimited, "values"); valuesBytes = field.bytes
            case 2: try field.expect(.lengthDelimited, "indices"); indicesBytes = field.bytes
            case 3: dimFields.append(field)
            default: break
            }
        }
        guard let valuesBytes else { throw ONNXError(.invalidTensor, "sparse tensor has no 'values'") }
        let (name, values) = try decodeTensor(valuesBytes)
        let dense = try withContext("sparse tensor '\(name)'") { () throws -> Tensor in
            let shape = try checkedShape(try RepeatedFields.int64s(dimFields, "dims"))
            let denseCount = try elementCount(shape)
            guard values.rank == 1 else { throw ONNXError(.invalidTensor, "values must be rank 1, got shape \(values.shape)") }
            let nnz = values.count
            var linear: [Int] = []
            if nnz > 0 {
                guard let indicesBytes else { throw ONNXError(.invalidTensor, "has \(nnz) values but no 'indices'") }
                let indices = try decodeTensor(indicesBytes).tensor
                linear = try linearIndices(indices, nnz: nnz, shape: shape, denseCount: denseCount)
            }
            let byteSize = values.dtype.byteSize
            guard values.dtype == .string || denseCount <= Self.maxDensifiedBytes / max(byteSize, 1) else {
                throw ONNXError(.unsupported, "densified size \(shape) exceeds the \(Self.maxDensifiedBytes)-byte limit")
            }
            if values.dtype == .string {
                guard denseCount <= Self.maxDensifiedBytes / 16 else {
                    throw ONNXError(.unsupported, "densified size \(shape) exceeds the string element limit")
                }
                var strings = [[UInt8]](repeating: [], count: denseCount)
                for (k, index) in linear.enumerated() { strings[index] = values.strings[k] }
                return Tensor(shape: shape, strings: strings)
            }
            var dense = Tensor(dtype: values.dtype, shape: shape)
            dense.withUnsafeMutableBytes { out in
                values.withUnsafeBytes { src in
                    for (k, index) in linear.enumerated() {
                        (out.baseAddress! + index * byteSize).copyMemory(from: src.baseAddress! + k * byteSize, byteCount: byteSize)
                    }
                }
            }
            return dense
        }
        return (name, dense)
    }

    /// Converts COO indices (int64 or int32) to checked linear offsets.
    private func linearIndices(_ indices: Tensor, nnz: Int, shape: [Int], denseCount: Int) throws -> [Int] {
        let raw: [Int64]
        switch indices.dtype {
        case .int64: raw = indices.scalars(as: Int64.self)
        case .int32: raw = indices.scalars(as: Int32.self).map(Int64.init)
        default: throw ONNXError(.invalidTensor, "indices must be int64, got \(indices.dtype)")
        }
        if indices.shape == [nnz] {
            return try raw.map { value in
                guard value >= 0, value < Int64(denseCount) else {
                    throw ONNXError(.invalidTensor, "linear index \(value) out of range for shape \(shape)")
                }
                return Int(value)
            }
        }
        guard indices.shape == [nnz, shape.count] else {
            throw ONNXError(.invalidTensor, "indices shape \(indices.shape) must be [\(nnz)] or [\(nnz), \(shape.count)]")
        }
        let strides = Tensor.contiguousStrides(shape)
        return try (0..<nnz).map { k in
            var offset = 0
            for axis in 0..<shape.count {
                let value = raw[k * shape.count + axis]
                guard value >= 0, value < Int64(shape[axis]) else {
                    throw ONNXError(.invalidTensor, "index \(value) out of range for axis \(axis) of shape \(shape)")
                }
                offset += Int(value) * strides[axis]
            }
            return offset
        }
    }
}
