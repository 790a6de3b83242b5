import Foundation
import ONNX
import Tensor

/// Reads and writes NumPy `.npy` files (format versions 1, 2 and 3; C order; little-endian).
public enum NumpyFormat {
    /// Decodes `.npy` bytes into a tensor (float32/64/16, int8..64, uint8..64, bool).
    public static func decode(_ bytes: [UInt8], name: String = "array") throws -> Tensor {
        func fail(_ why: String) -> EngineError { EngineError(.invalidInput, "\(name): not a usable .npy file: \(why)") }
        let magic: [UInt8] = [0x93, 0x4E, 0x55, 0x4D, 0x50, 0x59]
        guard bytes.count >= 10, Array(bytes[0..<6]) == magic else { throw fail("missing the \\x93NUMPY magic") }
        let major = bytes[6]
        let headerLength: Int, headerStart: Int
        switch major {
        case 1:
            headerLength = Int(bytes[8]) | Int(bytes[9]) << 8
            headerStart = 10
        case 2, 3:
            guard bytes.count >= 12 else { throw fail("truncated header") }
            headerLength = Int(bytes[8]) | Int(bytes[9]) << 8 | Int(bytes[10]) << 16 | Int(bytes[11]) << 24
            headerStart = 12
        default: throw fail("unsupported format version \(major) (expected 1, 2 or 3)")
        }
        guard bytes.count >= headerStart + headerLength else { throw fail("truncated header") }
        let header = String(decoding: bytes[headerStart..<(headerStart + headerLength)], as: UTF8.self)
        guard let descr = headerValue(header, key: "descr") else { throw fail("header has no 'descr'") }
        if let fortran = headerValue(header, key: "fortran_order"), fortran.hasPrefix("True") {
            throw fail("fortran_order=True is not supported (save with np.ascontiguousarray)")
        }
        guard let shapeText = headerValue(header, key: "shape") else { throw fail("header has no 'shape'") }
        let descrValue = descr.trimmingCharacters(in: CharacterSet(charactersIn: "'\" "))
        guard let dtype = dtypeFor(descr: descrValue) else {
            throw fail("dtype '\(descrValue)' is not supported (float32, float64, float16, int8/16/32/64, uint8/16/32/64, bool; little-endian)")
        }
        let shapeBody = shapeText.drop { $0 != "(" }.dropFirst().prefix { $0 != ")" }
        var shape: [Int] = []
        for part in shapeBody.split(separator: ",") {
            let trimmed = part.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: "L", with: "")
            if trimmed.isEmpty { continue }
            guard let d = Int(trimmed), d >= 0 else { throw fail("bad shape \(shapeText)") }
            shape.append(d)
        }
        let dataStart = headerStart + headerLength
        let byteCount = Tensor.elementCount(shape) * dtype.byteSize
        guard bytes.count - dataStart >= byteCount else {
            throw fail("shape \(shape) of \(dtype) needs \(byteCount) data bytes, file has \(bytes.count - dataStart)")
        }
        var tensor = Tensor(uninitialized: dtype, shape: shape)
        tensor.withUnsafeMutableBytes { dst in
            bytes.withUnsafeBytes { src in
                if byteCount > 0 { dst.baseAddress!.copyMemory(from: src.baseAddress! + dataStart, byteCount: byteCount) }
            }
        }
        return tensor
    }

    /// Encodes a tensor as a version-1 `.npy` file (version 2 when the header is too long).
    public static func encode(_ tensor: Tensor) throws -> [UInt8] {
        guard let descr = descrFor(tensor.dtype) else {
            throw EngineError(.unsupportedDType, "cannot write \(tensor.dtype) to .npy")
        }
        let shape = tensor.shape.count == 1 ? "(\(tensor.shape[0]),)" : "(" + tensor.shape.map(String.init).joined(separator: ", ") + ")"
        var header = "{'descr': '\(descr)', 'fortran_order': False, 'shape': \(shape), }"
        let v2 = header.utf8.count + 11 > 65535
        let prefix = v2 ? 12 : 10
        let total = prefix + header.utf8.count + 1
        header += String(repeating: " ", count: (64 - total % 64) % 64) + "\n"
        var out: [UInt8] = [0x93, 0x4E, 0x55, 0x4D, 0x50, 0x59, v2 ? 2 : 1, 0]
        let length = header.utf8.count
        out += v2 ? [UInt8(length & 0xff), UInt8(length >> 8 & 0xff), UInt8(length >> 16 & 0xff), UInt8(length >> 24 & 0xff)]
            : [UInt8(length & 0xff), UInt8(length >> 8)]
        out += Array(header.utf8)
        tensor.withUnsafeBytes { out += $0 }
        return out
    }

    /// Reads a `.npy` file.
    public static func read(path: String) throws -> Tensor {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw EngineError(.io, "cannot read '\(path)'")
        }
        return try decode([UInt8](data), name: path)
    }

    /// Writes a `.npy` file.
    public static func write(_ tensor: Tensor, path: String) throws {
        let bytes = try encode(tensor)
        guard FileManager.default.createFile(atPath: path, contents: Data(bytes)) else {
            throw EngineError(.io, "cannot write '\(path)'")
        }
    }

    private static func headerValue(_ header: String, key: String) -> String? {
        for quote in ["'", "\""] {
            guard let range = header.range(of: "\(quote)\(key)\(quote)") else { continue }
            var rest = header[range.upperBound...].drop { $0 == " " || $0 == ":" }
            if rest.first == "(" { return String(rest.prefix { $0 != ")" }) + ")" }
            if rest.first == "'" || rest.first == "\"" {
                let q = rest.removeFirst()
                return String(rest.prefix { $0 != q })
            }
            return String(rest.prefix { $0 != "," && $0 != "}" })
        }
        return nil
    }

    private static func dtypeFor(descr: String) -> DType? {
        guard let order = descr.first, descr.count >= 3 else { return nil }
        let code = String(descr.dropFirst())
        let singleByte = ["u1", "i1", "b1"].contains(code)
        guard order == "<" || order == "|" || (order == "=" && 1.littleEndian == 1) || (singleByte && order == ">") else { return nil }
        switch code {
        case "f4": return .float32
        case "f8": return .float64
        case "f2": return .float16
        case "i8": return .int64
        case "i4": return .int32
        case "i2": return .int16
        case "i1": return .int8
        case "u1": return .uint8
        case "u2": return .uint16
        case "u4": return .uint32
        case "u8": return .uint64
        case "b1": return .bool
        default: return nil
        }
    }

    private static func descrFor(_ dtype: DType) -> String? {
        switch dtype {
        case .float32: return "<f4"
        case .float64: return "<f8"
        case .float16: return "<f2"
        case .int64: return "<i8"
        case .int32: return "<i4"
        case .int16: return "<i2"
        case .int8: return "|i1"
        case .uint8: return "|u1"
        case .uint16: return "<u2"
        case .uint32: return "<u4"
        case .uint64: return "<u8"
        case .bool: return "|b1"
        default: return nil
        }
    }
}

extension Tensor {
    /// This tensor converted to `dtype` with ONNX Cast semantics (floats to integers truncate toward zero, nonzero becomes true).
    public func converted(to dtype: DType) throws -> Tensor {
        let ctx = OpContext(node: Node(opType: "Cast", inputs: [], outputs: []), opset: 21, constants: [:], activation: .none)
        do {
            return try castTensor(self, to: dtype, ctx)
        } catch {
            throw EngineError(.unsupportedDType, "cannot convert \(self.dtype) to \(dtype)")
        }
    }
}
