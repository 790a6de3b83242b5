import Testing
@testable import API

/// Parses a document and returns the error kind it fails with (nil when it parses).
private func failure(_ text: String) -> JSONError.Kind? {
    do {
        _ = try JSONValue.parse(text)
        return nil
    } catch let error as JSONError {
        return error.kind
    } catch {
        Issue.record("unexpected error \(error)")
        return nil
    }
}

@Suite struct JSONReaderTests {
    @Test func parsesEveryKindOfValue() throws {
        let value = try JSONValue.parse(#" { "a" : [1, -2.5, true, false, null, "x"], "b": {"c": {}}, "d": [] } "#)
        #expect(value["a"] == .array([.integer(1), .double(-2.5), .bool(true), .bool(false), .null, .string("x")]))
        #expect(value["b"]?["c"] == .object(JSONObject()))
        #expect(value["d"] == .array([]))
        #expect(value.objectValue?.keys == ["a", "b", "d"])
    }

    @Test func topLevelScalarsAreDocuments() throws {
        #expect(try JSONValue.parse("3") == .integer(3))
        #expect(try JSONValue.parse("\"s\"") == .string("s"))
        #expect(try JSONValue.parse(" null\n") == .null)
    }

    @Test(arguments: [
        ("", JSONError.Kind.unexpectedEnd),
        ("{", .unexpectedEnd),
        ("[1,", .unexpectedEnd),
        ("[1,]", .unexpectedCharacter),
        ("[,1]", .unexpectedCharacter),
        ("{\"a\":1,}", .unexpectedCharacter),
        ("{\"a\" 1}", .unexpectedCharacter),
        ("{a:1}", .unexpectedCharacter),
        ("[1 2]", .unexpectedCharacter),
        ("tru", .unexpectedEnd),
        ("trUe", .unexpectedCharacter),
        ("nul", .unexpectedEnd),
        ("01", .invalidNumber),
        ("-", .unexpectedEnd),
        ("-a", .invalidNumber),
        ("1.", .unexpectedEnd),
        ("1.e5", .invalidNumber),
        ("1e", .unexpectedEnd),
        ("1e+", .unexpectedEnd),
        (".5", .unexpectedCharacter),
        ("+1", .unexpectedCharacter),
        ("NaN", .unexpectedCharacter),
        ("Infinity", .unexpectedCharacter),
        ("1 2", .trailingData),
        ("{} x", .trailingData),
        ("\"abc", .unexpectedEnd),
        ("\"a\u{01}b\"", .invalidString),
        ("\"\\x\"", .invalidString),
        ("\"\\u12G4\"", .invalidString),
        ("\"\\uD800\"", .invalidString),
        ("\"\\uD800\\u0041\"", .invalidString),
        ("\"\\uDC00\"", .invalidString),
        ("{\"a\":1,\"a\":2}", .duplicateKey),
    ])
    func rejectsInvalidGrammar(text: String, kind: JSONError.Kind) {
        #expect(failure(text) == kind, "\(text)")
    }

    @Test func errorsCarryByteOffsets() {
        do {
            _ = try JSONValue.parse("[1, 2, x]")
            Issue.record("expected failure")
        } catch let error as JSONError {
            #expect(error.offset == 7)
            #expect(error.description.contains("at byte 7"))
        } catch { Issue.record("\(error)") }
    }

    @Test func depthIsLimited() throws {
        let deep = String(repeating: "[", count: 65) + String(repeating: "]", count: 65)
        #expect(failure(deep) == .tooDeep)
        let ok = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        #expect(throws: Never.self) { try JSONValue.parse(ok) }
    }

    @Test func stringEscapesAndSurrogatePairs() throws {
        #expect(try JSONValue.parse(#""a\"b\\c\/d\b\f\n\r\t""#) == .string("a\"b\\c/d\u{08}\u{0C}\n\r\t"))
        #expect(try JSONValue.parse(#""\u00e9\u4e2d\uD83D\uDE00""#) == .string("é中😀"))
        #expect(try JSONValue.parse("\"héllo 😀\"") == .string("héllo 😀"))
    }

    @Test func rejectsInvalidUTF8() {
        #expect(throws: JSONError.self) { try JSONValue.parse([0x22, 0xC3, 0x28, 0x22]) }
    }

    @Test func numbersKeepIntegersExact() throws {
        #expect(try JSONValue.parse("9223372036854775807") == .integer(Int64.max))
        #expect(try JSONValue.parse("-9223372036854775808") == .integer(Int64.min))
        #expect(try JSONValue.parse("9223372036854775808") == .double(9223372036854775808))
        #expect(try JSONValue.parse("-0") == .integer(0))
        #expect(try JSONValue.parse("-0.0") == .double(-0.0))
        #expect(try JSONValue.parse("1E2") == .double(100))
    }

    @Test func hugeExponentOverflowsCleanly() {
        #expect(failure("1e400") == .invalidNumber)
        #expect(throws: Never.self) { try JSONValue.parse("1e-400") }
    }

    @Test func writerRoundTripsValues() throws {
        let text = #"{"s":"q\"\\\n\u0001é","i":-42,"d":0.1,"b":[true,false,null],"o":{}}"#
        let value = try JSONValue.parse(text)
        #expect(String(decoding: value.serialized, as: UTF8.self) == text)
        #expect(try JSONValue.parse(value.serialized) == value)
    }

    @Test func writerFormatsFloats() {
        var w = JSONWriter()
        w.beginArray()
        for f: Float in [1, -0.0, 0.1, .leastNonzeroMagnitude, 3.4028235e38, .nan, .infinity, 16777216, 1.5] { w.float(f) }
        w.double(1e300)
        w.endArray()
        #expect(String(decoding: w.bytes, as: UTF8.self) == "[1,-0.0,0.1,1e-45,3.4028235e+38,null,null,16777216.0,1.5,1e+300]")
    }
}
