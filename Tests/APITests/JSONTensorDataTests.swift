import Testing
import Tensor
@testable import API

/// Decodes `text` as a data array of `datatype` for `shape`.
func decodeData(_ text: String, _ datatype: V2Datatype, _ shape: [Int]) throws -> Tensor {
    let bytes = Array(text.utf8)
    return try bytes.withUnsafeBufferPointer { buffer in
        var reader = JSONReader(buffer)
        let tensor = try reader.readTensorData(datatype, shape: shape, count: Tensor.elementCount(shape))
        try reader.expectEnd()
        return tensor
    }
}

private func dataError(_ text: String, _ datatype: V2Datatype, _ shape: [Int]) -> String? {
    do {
        _ = try decodeData(text, datatype, shape)
        return nil
    } catch {
        return "\(error)"
    }
}

@Suite struct JSONTensorDataTests {
    @Test func flatAndNestedArraysFlattenRowMajor() throws {
        let flat = try decodeData("[1,2,3,4,5,6]", .fp32, [2, 3])
        let nested = try decodeData("[[1,2,3],[4,5,6]]", .fp32, [2, 3])
        let ragged = try decodeData("[[1,[2]],[[3,4],5,[[6]]]]", .fp32, [2, 3])
        #expect(flat.scalars(as: Float.self) == [1, 2, 3, 4, 5, 6])
        #expect(nested.scalars(as: Float.self) == [1, 2, 3, 4, 5, 6])
        #expect(ragged.scalars(as: Float.self) == [1, 2, 3, 4, 5, 6])
        #expect(nested.shape == [2, 3])
    }

    @Test func countMustMatchShape() {
        #expect(dataError("[1,2,3]", .fp32, [2, 2])?.contains("3 elements, shape [2, 2] needs 4") == true)
        #expect(dataError("[1,2,3,4,5]", .fp32, [2, 2])?.contains("more than the 4 elements") == true)
        #expect(dataError("[]", .int64, [0]) == nil)
    }

    @Test func floatEdgeCases() throws {
        let t = try decodeData("[-0, -0.0, 1e-45, 1.4e-45, 3.4028235e38, 0.1, 1E1, 2.5e-3, 1e-50, 123456789012345678901234567890]", .fp32, [10])
        let v = t.scalars(as: Float.self)
        #expect(v[0] == 0 && v[0].sign == .minus)
        #expect(v[1].sign == .minus)
        #expect(v[2] == Float.leastNonzeroMagnitude)
        #expect(v[3] == Float.leastNonzeroMagnitude)
        #expect(v[4] == Float.greatestFiniteMagnitude)
        #expect(v[5] == Float(0.1))
        #expect(v[6] == 10)
        #expect(v[7] == Float(0.0025))
        #expect(v[8] == 0)
        #expect(v[9] == Float("123456789012345678901234567890")!)
    }

    @Test func fp32OverflowIsAnError() {
        let message = dataError("[1, 3.4e39]", .fp32, [2])
        #expect(message?.contains("element 1") == true)
        #expect(message?.contains("out of range for FP32") == true)
        #expect(dataError("[-1e39]", .fp32, [1]) != nil)
        #expect(dataError("[1e309]", .fp64, [1]) != nil)
        #expect(dataError("[65520]", .fp16, [1]) != nil)
    }

    @Test func floatParsingMatchesTheStandardLibrary() throws {
        // Shortest, 9-digit and 17-digit (numpy/Python double repr) forms of many floats, plus random decimals.
        var generator = SystemRandomNumberGenerator()
        var texts: [String] = []
        for _ in 0..<4000 {
            let f = Float(bitPattern: UInt32.random(in: 0..<0x7F80_0000, using: &generator))
            texts.append(f.description)
            texts.append(Double(f).description)
            let digits = Int.random(in: 1...22, using: &generator)
            var mantissa = String((1...digits).map { _ in "0123456789".randomElement()! })
            if mantissa.first == "0" { mantissa = "1" + mantissa.dropFirst() }
            texts.append("\(mantissa)e\(Int.random(in: -60...30, using: &generator))")
            texts.append("0.\(mantissa)")
        }
        // Exact float midpoints and their neighbours, where double rounding would go wrong.
        texts += ["1.00000005960464477539062500", "1.000000059604644775390625001", "1.000000059604644775390624999",
                  "0.100000001490116119384765625", "3.40282356779733661637539395458142568448e38"]
        let json = "[" + texts.joined(separator: ",") + "]"
        let expected: [Float?] = texts.map { Float($0).flatMap { $0.isFinite ? $0 : nil } }
        if expected.contains(where: { $0 == nil }) {
            // Overflowing samples are checked separately; keep only finite ones here.
            let finite = zip(texts, expected).filter { $0.1 != nil }
            let t = try decodeData("[" + finite.map(\.0).joined(separator: ",") + "]", .fp32, [finite.count])
            #expect(t.scalars(as: Float.self).map(\.bitPattern) == finite.map { $0.1!.bitPattern })
        } else {
            let t = try decodeData(json, .fp32, [texts.count])
            let got = t.scalars(as: Float.self)
            for (i, text) in texts.enumerated() where got[i].bitPattern != expected[i]!.bitPattern {
                Issue.record("\(text): got \(got[i]), expected \(expected[i]!)")
            }
        }
    }

    @Test func doubleParsingMatchesTheStandardLibrary() throws {
        var generator = SystemRandomNumberGenerator()
        var texts: [String] = []
        for _ in 0..<2000 {
            let d = Double(bitPattern: UInt64.random(in: 0..<0x7FF0_0000_0000_0000, using: &generator))
            texts.append(d.description)
            texts.append("\(Int.random(in: 1...99_999_999, using: &generator))e\(Int.random(in: -25...25, using: &generator))")
        }
        let t = try decodeData("[" + texts.joined(separator: ",") + "]", .fp64, [texts.count])
        #expect(t.scalars(as: Double.self).map(\.bitPattern) == texts.map { Double($0)!.bitPattern })
    }

    @Test func integerRanges() throws {
        #expect(try decodeData("[-128, 127]", .int8, [2]).scalars(as: Int8.self) == [-128, 127])
        #expect(dataError("[128]", .int8, [1])?.contains("out of range for INT8") == true)
        #expect(dataError("[-129]", .int8, [1]) != nil)
        #expect(try decodeData("[0, 255]", .uint8, [2]).scalars(as: UInt8.self) == [0, 255])
        #expect(dataError("[-1]", .uint8, [1]) != nil)
        #expect(dataError("[256]", .uint8, [1]) != nil)
        #expect(try decodeData("[-9223372036854775808, 9223372036854775807]", .int64, [2]).scalars(as: Int64.self) == [.min, .max])
        #expect(dataError("[9223372036854775808]", .int64, [1]) != nil)
        #expect(try decodeData("[18446744073709551615]", .uint64, [1]).scalars(as: UInt64.self) == [.max])
        #expect(dataError("[18446744073709551616]", .uint64, [1]) != nil)
        #expect(try decodeData("[-2147483648, 65535]", .int32, [2]).scalars(as: Int32.self) == [.min, 65535])
        #expect(try decodeData("[-0]", .uint32, [1]).scalars(as: UInt32.self) == [0])
        #expect(dataError("[1.0]", .int32, [1])?.contains("expected an integer") == true)
        #expect(dataError("[1e2]", .int64, [1]) != nil)
        #expect(dataError("[\"1\"]", .int64, [1])?.contains("expected a INT64 number") == true)
    }

    @Test func boolsAndBytes() throws {
        let b = try decodeData("[true, false, [true]]", .bool, [3])
        #expect(b.scalars(as: Bool.self) == [true, false, true])
        #expect(dataError("[1]", .bool, [1])?.contains("true or false") == true)
        let s = try decodeData(#"[["a", "h\u00e9"], [""]]"#, .bytes, [3])
        #expect(s.strings == [Array("a".utf8), Array("hé".utf8), []])
        #expect(dataError("[1]", .bytes, [1]) != nil)
        #expect(dataError(#"["a","b"]"#, .bytes, [1]) != nil)
    }

    @Test func halfPrecision() throws {
        let h = try decodeData("[1.5, -2, 65504]", .fp16, [3])
        h.withUnsafeBytes { raw in
            #expect(raw.loadUnaligned(fromByteOffset: 0, as: Float16.self) == 1.5)
            #expect(raw.loadUnaligned(fromByteOffset: 4, as: Float16.self) == 65504)
        }
        let bf = try decodeData("[1.0, -2.5]", .bf16, [2])
        bf.withUnsafeBytes { raw in
            #expect(raw.loadUnaligned(fromByteOffset: 0, as: UInt16.self) == 0x3F80)
            #expect(raw.loadUnaligned(fromByteOffset: 2, as: UInt16.self) == 0xC020)
        }
    }

    @Test func nestingDepthIsBounded() {
        let deep = String(repeating: "[", count: 100) + "1" + String(repeating: "]", count: 100)
        #expect(dataError(deep, .fp32, [1])?.contains("nesting deeper") == true)
    }
}
