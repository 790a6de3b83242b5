import Protobuf
import Tensor

/// `inference.InferTensorContents`: the typed repeated field that matches a datatype (bool #1, int32 #2 for INT8-32,
/// int64 #3, uint32 #4 for UINT8-32, uint64 #5, fp32 #6, fp64 #7, bytes #8); FP16 and BF16 have none.
enum GRPCTensorContents {
    /// The tensor `fields` (the contents message's fields) hold for `datatype`; other members must be empty.
    static func decode(_ fields: [WireField], datatype: V2Datatype, shape: [Int], count: Int, label: String) throws -> Tensor {
        guard let member = fieldNumber(datatype) else {
            throw V2CodecError(.unsupported, "\(label): \(datatype.rawValue) has no typed contents field: send it in raw_input_contents")
        }
        let mine = fields.filter { $0.number == member }
        if let other = fields.first(where: { $0.number != member && (1...8).contains($0.number) }) {
            throw V2CodecError(.datatypeMismatch, "\(label): \(datatype.rawValue) data goes in \(memberName(member)), got \(memberName(other.number))")
        }
        func checked(_ got: Int) throws {
            guard got == count else {
                throw V2CodecError(.shapeMismatch, "\(label): \(memberName(member)) has \(got) values, shape \(shape) needs \(count)")
            }
        }
        switch datatype {
        case .fp32:
            let values = try RepeatedFields.floats(mine, memberName(member))
            try checked(values.count)
            return Tensor(shape: shape, scalars: values)
        case .fp64:
            let values = try RepeatedFields.doubles(mine, memberName(member))
            try checked(values.count)
            return Tensor(shape: shape, scalars: values)
        case .bytes:
            var strings: [[UInt8]] = []
            for field in mine {
                try field.expect(.lengthDelimited, "bytes_contents")
                strings.append(Array(field.bytes))
            }
            try checked(strings.count)
            return Tensor(shape: shape, strings: strings)
        default:
            let values = try RepeatedFields.varints(mine, memberName(member))
            try checked(values.count)
            return try integerTensor(values, datatype: datatype, shape: shape, label: label)
        }
    }

    /// Varints as the datatype's element type; values that do not fit are refused, not wrapped.
    private static func integerTensor(_ values: [UInt64], datatype: V2Datatype, shape: [Int], label: String) throws -> Tensor {
        func narrow<T: FixedWidthInteger & TensorScalar>(_ type: T.Type, signed: Bool) throws -> Tensor {
            let scalars = try values.map { raw -> T in
                let value: T? = signed ? T(exactly: Int64(bitPattern: raw)) : T(exactly: raw)
                guard let value else {
                    throw V2CodecError(.invalidField, "\(label): value \(signed ? String(Int64(bitPattern: raw)) : String(raw)) does not fit \(datatype.rawValue)")
                }
                return value
            }
            return Tensor(shape: shape, scalars: scalars)
        }
        switch datatype {
        case .bool:
            var tensor = Tensor(uninitialized: .bool, shape: shape)
            tensor.withUnsafeMutableBytes { bytes in for (i, v) in values.enumerated() { bytes[i] = v != 0 ? 1 : 0 } }
            return tensor
        case .int8: return try narrow(Int8.self, signed: true)
        case .int16: return try narrow(Int16.self, signed: true)
        case .int32: return try narrow(Int32.self, signed: true)
        case .int64: return Tensor(shape: shape, scalars: values.map { Int64(bitPattern: $0) })
        case .uint8: return try narrow(UInt8.self, signed: false)
        case .uint16: return try narrow(UInt16.self, signed: false)
        case .uint32: return try narrow(UInt32.self, signed: false)
        case .uint64: return Tensor(shape: shape, scalars: values)
        default: preconditionFailure("integerTensor called for \(datatype)")
        }
    }

    /// The contents member that carries `datatype`, nil for FP16/BF16.
    static func fieldNumber(_ datatype: V2Datatype) -> Int? {
        switch datatype {
        case .bool: 1
        case .int8, .int16, .int32: 2
        case .int64: 3
        case .uint8, .uint16, .uint32: 4
        case .uint64: 5
        case .fp32: 6
        case .fp64: 7
        case .bytes: 8
        case .fp16, .bf16: nil
        }
    }

    private static func memberName(_ number: Int) -> String {
        ["", "bool_contents", "int_contents", "int64_contents", "uint_contents", "uint64_contents", "fp32_contents",
         "fp64_contents", "bytes_contents"][min(max(number, 0), 8)]
    }
}
