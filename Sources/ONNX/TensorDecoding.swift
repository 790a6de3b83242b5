import Protobuf
import Tensor

/// Decodes `TensorProto` and `SparseTensorProto` messages into dense `Tensor`s.
///
/// Float16, bfloat16 and float8 tensors keep their dtype and raw bit patterns; the engine decides how to widen them.
/// int4 / uint4 / float4e2m1 arrive packed two per byte, int2 / uint2 four per byte; each is unpacked to one byte per element.
/// Element bytes are copied as little-endian, which is the host order on every platform Osprey targets.
struct TensorDecoder {
    /// Directory that external-data locations are relative to (nil: external data is rejected).
    let externalDataDirectory: String?
    /// Told of each `raw_data` range once its bytes are copied (the serialized model is never read there again).
    var consumed: ((UnsafeRawBufferPointer) -> Void)? = nil

    /// The raw fields of one `TensorProto`, gathered before any allocation so sizes can be checked first.
    private struct Fields {
        var dims: [WireField] = []
        var dataType: Int64 = 0
        var name = ""
        var raw: UnsafeRawBufferPointer?
        var floatData: [WireField] = []
        var int32Data: [WireField] = []
        var int64Data: [WireField] = []
        var doubleData: [WireField] = []
        var uint64Data: [WireField] = []
        var stringData: [[UInt8]] = []
        var externalData: [(key: String, value: String)] = []
        var dataLocation: Int64 = 0
        var hasSegment = false
    }

    /// A `TensorProto` payload as a name and a dense tensor.
    func decodeTensor(_ bytes: UnsafeRawBufferPointer) throws -> (name: String, tensor: Tensor) {
        var fields = Fields()
        var reader = WireReader(bytes)
        while let field = try reader.next() {
            switch field.number {
            case 1: fields.dims.append(field)
            case 2: fields.dataType = try field.int64("data_type")
            case 3: fields.hasSegment = true
            case 4: fields.floatData.append(field)
            case 5: fields.int32Data.append(field)
            case 6: fields.stringData.append(try field.byteArray("string_data"))
            case 7: fields.int64Data.append(field)
            case 8: fields.name = try field.string("name")
            case 9: try field.expect(.lengthDelimited, "raw_data"); fields.raw = field.bytes
            case 10: fields.doubleData.append(field)
            case 11: fields.uint64Data.append(field)
            case 13: fields.externalData.append(try decodeStringPair(field, "external_data"))
            case 14: fields.dataLocation = try field.int64("data_location")
            default: break
            }
        }
        let name = fields.name
        let tensor = try withContext("tensor '\(name)'") { try build(fields) }
        return (name, tensor)
    }

    /// `packedCount`, when given, replaces the shape by [packedCount] (the packed bytes of a 4-bit tensor).
    private func build(_ fields: Fields, packedCount: Int? = nil) throws -> Tensor {
        guard !fields.hasSegment else { throw ONNXError(.unsupported, "segmented tensors are not supported") }
        let dtype = try Self.dtype(fields.dataType)
        let shape = try packedCount.map { [$0] } ?? checkedShape(try RepeatedFields.int64s(fields.dims, "dims"))
        let count = try elementCount(shape)
        let (byteCount, overflow) = count.multipliedReportingOverflow(by: dtype.byteSize)
        guard !overflow else { throw ONNXError(.invalidTensor, "shape \(shape) is too large") }

        if let bits = dtype.packedBits {
            // Several elements per byte on the wire: decode the packed bytes as uint8, then give each element its byte.
            var packedFields = fields
            packedFields.dataType = Int64(DType.uint8.rawValue)
            packedFields.dims = []
            let packed = try build(packedFields, packedCount: SubBytePacking.packedByteCount(count, bits: bits))
            var tensor = Tensor(uninitialized: dtype, shape: shape)
            packed.withUnsafeBytes { src in
                tensor.withUnsafeMutableBytes { SubBytePacking.unpack(src, count: count, bits: bits, signed: dtype.isSignedSubByte, into: $0) }
            }
            return tensor
        }
        if fields.dataLocation == 1 {
            guard dtype != .string else { throw ONNXError(.externalData, "string tensors cannot use external data") }
            return try ExternalData.load(entries: fields.externalData, directory: externalDataDirectory,
                                         dtype: dtype, shape: shape, byteCount: byteCount)
        }
        guard fields.dataLocation == 0 else { throw ONNXError(.malformed, "unknown data_location \(fields.dataLocation)") }

        if let raw = fields.raw {
            guard dtype != .string else { throw ONNXError(.invalidTensor, "string tensors cannot use raw_data") }
            guard raw.count == byteCount else {
                throw ONNXError(.invalidTensor, "\(dtype)\(shape) needs \(byteCount) bytes of raw_data, got \(raw.count)")
            }
            var tensor = Tensor(uninitialized: dtype, shape: shape)
            if byteCount > 0 {
                tensor.withUnsafeMutableBytes { $0.baseAddress!.copyMemory(from: raw.baseAddress!, byteCount: byteCount) }
                consumed?(raw)
            }
            return tensor
        }
        return try buildFromTypedFields(fields, dtype: dtype, shape: shape, count: count)
    }

    private func buildFromTypedFields(_ fields: Fields, dtype: DType, shape: [Int], count: Int) throws -> Tensor {
        func mismatch(_ got: Int, _ field: String) -> ONNXError {
            ONNXError(.invalidTensor, "\(dtype)\(shape) needs \(count) values, got \(got) in \(field)")
        }
        switch dtype {
        case .string:
            guard fields.stringData.count == count else { throw mismatch(fields.stringData.count, "string_data") }
            return Tensor(shape: shape, strings: fields.stringData)
        case .float32, .float64:
            let (source, name, width) = dtype == .float32 ? (fields.floatData, "float_data", 4) : (fields.doubleData, "double_data", 8)
            let got = try RepeatedFields.fixedCount(source, width: width, name)
            guard got == count else { throw mismatch(got, name) }
            var tensor = Tensor(uninitialized: dtype, shape: shape)
            tensor.withUnsafeMutableBytes { RepeatedFields.copyFixed(source, width: width, into: $0) }
            return tensor
        case .int64, .uint32, .uint64, .int32, .int16, .int8, .uint16, .uint8, .bool, .float16, .bfloat16,
             .float8e4m3fn, .float8e4m3fnuz, .float8e5m2, .float8e5m2fnuz, .uint4, .int4, .float4e2m1, .float8e8m0, .uint2, .int2:
            let (source, name): ([WireField], String)
            switch dtype {
            case .int64: (source, name) = (fields.int64Data, "int64_data")
            case .uint32, .uint64: (source, name) = (fields.uint64Data, "uint64_data")
            default: (source, name) = (fields.int32Data, "int32_data")
            }
            let got = try RepeatedFields.varintCount(source, name)
            guard got == count else { throw mismatch(got, name) }
            var tensor = Tensor(uninitialized: dtype, shape: shape)
            try tensor.withUnsafeMutableBytes { out in
                var offset = 0
                let width = dtype.byteSize
                let isBool = dtype == .bool
                try RepeatedFields.forEachVarint(source, name) { value in
                    // Narrow types travel widened in int32_data; keep the low bytes (bool normalised to 0/1).
                    let stored = isBool ? (value != 0 ? 1 : 0) : value
                    switch width {
                    case 1: out.storeBytes(of: UInt8(truncatingIfNeeded: stored), toByteOffset: offset, as: UInt8.self)
                    case 2: out.storeBytes(of: UInt16(truncatingIfNeeded: stored).littleEndian, toByteOffset: offset, as: UInt16.self)
                    case 4: out.storeBytes(of: UInt32(truncatingIfNeeded: stored).littleEndian, toByteOffset: offset, as: UInt32.self)
                    default: out.storeBytes(of: stored.littleEndian, toByteOffset: offset, as: UInt64.self)
                    }
                    offset += width
                }
            }
            return tensor
        }
    }

    /// Maps `TensorProto.DataType` to `DType`, naming the types Osprey does not handle.
    static func dtype(_ code: Int64) throws -> DType {
        if code >= 0, code <= Int64(Int32.max), let dtype = DType(rawValue: Int(code)) { return dtype }
        let names: [Int64: String] = [0: "UNDEFINED", 14: "COMPLEX64", 15: "COMPLEX128", 23: "FLOAT4E2M1", 24: "FLOAT8E8M0",
                                      25: "UINT2", 26: "INT2"]
        if code == 0 { throw ONNXError(.malformed, "data_type is missing (UNDEFINED)") }
        throw ONNXError(.unsupported, "data_type \(names[code] ?? String(code)) is not supported")
    }

    /// `dims` as `Int`s, rejecting negative sizes.
    func checkedShape(_ dims: [Int64]) throws -> [Int] {
        try dims.map { dim in
            guard dim >= 0, dim <= Int64(Int32.max) * 1024 else { throw ONNXError(.invalidTensor, "invalid dimension \(dim) in \(dims)") }
            return Int(dim)
        }
    }

    /// Product of `shape`, rejecting overflow.
    func elementCount(_ shape: [Int]) throws -> Int {
        var count = 1
        for dim in shape {
            let (product, overflow) = count.multipliedReportingOverflow(by: dim)
            guard !overflow else { throw ONNXError(.invalidTensor, "shape \(shape) is too large") }
            count = product
        }
        return count
    }
}

/// A `StringStringEntryProto` (key = 1, value = 2).
func decodeStringPair(_ field: WireField, _ name: String) throws -> (key: String, value: String) {
    var reader = try field.message(name)
    var key = "", value = ""
    while let entry = try reader.next() {
        switch entry.number {
        case 1: key = try entry.string("\(name).key")
        case 2: value = try entry.string("\(name).value")
        default: break
        }
    }
    return (key, value)
}
