import Testing
import Protobuf

/// The writer's bytes match protobuf's encoding and the reader gets every value back, skipping unknown fields.
@Suite struct WireRoundTripTests {
    @Test func varintsMatchProtobufEncoding() {
        var writer = WireWriter()
        writer.uint64(1, 150)          // the protobuf documentation's example: 08 96 01
        writer.int32(2, -1)            // negative int32 is sign-extended to ten bytes
        writer.string(3, "hi")
        writer.uint64(4, 0)            // default: omitted
        #expect(writer.bytes == [0x08, 0x96, 0x01,
                                 0x10, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01,
                                 0x1A, 0x02, 0x68, 0x69])
    }

    @Test func readerReturnsWhatTheWriterWrote() throws {
        var writer = WireWriter()
        writer.int64(1, -5)
        writer.doubleAlways(2, 2.5)
        writer.float(3, 1.25)
        writer.message(4) { $0.string(1, "inner") }
        writer.packedInt64s(5, [1, -2, 300])
        writer.boolAlways(6, false)
        try writer.bytes.withUnsafeBytes { buffer in
            var reader = WireReader(buffer)
            var seen: [Int] = []
            while let field = try reader.next() {
                seen.append(field.number)
                switch field.number {
                case 1: #expect(try field.int64("a") == -5)
                case 2: #expect(try field.double("b") == 2.5)
                case 3: #expect(try field.float("c") == 1.25)
                case 4:
                    var inner = try field.message("d")
                    #expect(try inner.next()?.string("e") == "inner")
                case 5: #expect(try RepeatedFields.int64s([field], "f") == [1, -2, 300])
                case 6: #expect(try field.bool("g") == false)
                default: Issue.record("unexpected field \(field.number)")
                }
            }
            #expect(seen == [1, 2, 3, 4, 5, 6])
        }
    }

    @Test func everyPrefixEitherDecodesOrThrowsTruncated() throws {
        var writer = WireWriter()
        writer.string(1, "model")
        writer.int64(2, 1 << 40)
        writer.doubleAlways(3, -1)
        writer.bytesAlways(4, [UInt8](repeating: 7, count: 300))
        let full = writer.bytes
        for length in 0..<full.count {
            let prefix = Array(full[..<length])
            do {
                try prefix.withUnsafeBytes { buffer in
                    var reader = WireReader(buffer)
                    while try reader.next() != nil {}
                }
            } catch let error as ProtobufError {
                #expect(error.code == .truncated, "prefix \(length): \(error)")
            }
        }
    }

    @Test func wrongWireTypeAndHostileLengthsAreErrors() throws {
        // Field 1 as a varint read as a string; then a length that claims far more than remains.
        try [UInt8]([0x08, 0x01]).withUnsafeBytes { buffer in
            var reader = WireReader(buffer)
            let field = try #require(try reader.next())
            #expect(throws: ProtobufError.self) { try field.string("name") }
        }
        try [UInt8]([0x0A, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 0x00]).withUnsafeBytes { buffer in
            var reader = WireReader(buffer)
            #expect(throws: ProtobufError(.truncated, "field #1 declares 4294967295 bytes but only 1 remain")) { _ = try reader.next() }
        }
        // Wire type 3 (start group) is obsolete.
        try [UInt8]([0x0B]).withUnsafeBytes { buffer in
            var reader = WireReader(buffer)
            #expect(throws: ProtobufError.self) { _ = try reader.next() }
        }
    }
}
