import Foundation
import Tensor
@testable import ONNX

/// Paths and readers for the fixtures made by Tests/Fixtures/onnx/make_fixtures.py.
enum Fixtures {
    /// Tests/Fixtures/onnx, found from this source file so tests run from any working directory.
    static let directory: String = {
        let here = URL(fileURLWithPath: #filePath)
        return here.deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fixtures/onnx").path
    }()

    /// Absolute path of a fixture.
    static func path(_ name: String) -> String { directory + "/" + name }

    /// The bytes of a fixture.
    static func bytes(_ name: String) throws -> [UInt8] { try readWholeFile(path(name)) }

    /// `expected.json`: what onnx itself reads back from the fixtures.
    static func expected() throws -> [String: Any] {
        let data = try Data(contentsOf: URL(fileURLWithPath: path("expected.json")))
        return try JSONSerialization.jsonObject(with: data) as! [String: Any]
    }

    /// The elements of a numeric tensor as exact text comparable with the generator's (`repr` floats, integer text).
    static func texts(_ tensor: Tensor) -> [String] {
        func floats<T: BinaryFloatingPoint & TensorScalar>(_ type: T.Type) -> [String] {
            tensor.scalars(as: T.self).map { Double($0) }.map { $0 == 0 && $0.sign == .minus ? "-0.0" : pythonRepr($0) }
        }
        switch tensor.dtype {
        case .float32: return floats(Float.self)
        case .float64: return floats(Double.self)
        case .int8, .int4, .int2: return tensor.withUnsafeBytes { $0.map { String(Int8(bitPattern: $0)) } }
        case .uint8, .uint4, .uint2, .float8e4m3fn, .float8e4m3fnuz, .float8e5m2, .float8e5m2fnuz, .float4e2m1, .float8e8m0:
            return tensor.withUnsafeBytes { $0.map { String($0) } }
        case .bool: return tensor.withUnsafeBytes { $0.map { String($0) } }
        case .int16: return tensor.scalars(as: Int16.self).map { String($0) }
        case .uint16, .float16, .bfloat16:
            return tensor.withUnsafeBytes { raw in (0..<tensor.count).map { String(raw.load(fromByteOffset: $0 * 2, as: UInt16.self)) } }
        case .int32: return tensor.scalars(as: Int32.self).map { String($0) }
        case .uint32: return tensor.scalars(as: UInt32.self).map { String($0) }
        case .int64: return tensor.scalars(as: Int64.self).map { String($0) }
        case .uint64: return tensor.scalars(as: UInt64.self).map { String($0) }
        case .string: return tensor.strings.map { $0.map(String.init).joined(separator: ",") }
        }
    }

    /// The expected values in the same text form (`values` is a list of strings, or of byte lists for strings).
    static func expectedTexts(_ values: Any) -> [String] {
        if let texts = values as? [String] {
            return texts.map { text in text.contains(".") || text.contains("e") ? Double(text).map(pythonRepr) ?? text : text }
        }
        let lists = values as? [[Int]] ?? []
        return lists.map { $0.map(String.init).joined(separator: ",") }
    }

    /// Round-trip text of a double, normalised so Swift and Python spellings compare equal.
    static func pythonRepr(_ value: Double) -> String {
        if value == 0 { return value.sign == .minus ? "-0.0" : "0.0" }
        return String(value)
    }
}
