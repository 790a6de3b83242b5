import Testing
@testable import HTTP

/// gRPC's length-prefixed messages fed whole, byte by byte and split at every offset give the same messages;
/// the size limit, the compressed flag and truncation are typed errors.
@Suite struct GRPCFramingTests {
    private let messages: [[UInt8]] = [[], Array("hello".utf8), [UInt8](repeating: 0xAB, count: 300)]
    private var body: [UInt8] { messages.flatMap(GRPCMessageFramer.frame) }

    private func framed(_ chunks: [ArraySlice<UInt8>], limit: Int = 1 << 20) throws(GRPCFramingError) -> [[UInt8]] {
        var framer = GRPCMessageFramer(maxMessageBytes: limit)
        for chunk in chunks {
            let bytes = Array(chunk)
            var failure: GRPCFramingError?
            bytes.withUnsafeBytes { raw in
                do throws(GRPCFramingError) { try framer.append(raw) } catch { failure = error }
            }
            if let failure { throw failure }
        }
        try framer.finish()
        return framer.messages
    }

    @Test func wholeByteByByteAndEverySplitAgree() throws {
        let body = self.body
        #expect(try framed([body[...]]) == messages)
        #expect(try framed(body.indices.map { body[$0...$0] }) == messages)
        for split in 0...body.count {
            #expect(try framed([body[..<split], body[split...]]) == messages, "split at \(split)")
        }
    }

    @Test func prefixIsBigEndianWithAZeroFlag() {
        #expect(GRPCMessageFramer.frame([1, 2, 3]) == [0, 0, 0, 0, 3, 1, 2, 3])
        #expect(Array(GRPCMessageFramer.frame([UInt8](repeating: 0, count: 0x010203)).prefix(5)) == [0, 0x00, 0x01, 0x02, 0x03])
    }

    @Test func oversizedMessageIsRefusedFromItsPrefix() {
        // Only the 5-byte prefix arrives: the limit is enforced before any payload is buffered.
        #expect(throws: GRPCFramingError.messageTooLarge(declared: 1000, limit: 999)) {
            try framed([[0, 0, 0, 0x03, 0xE8][...]], limit: 999)
        }
        #expect(GRPCFramingError.messageTooLarge(declared: 1000, limit: 999).status.code == .resourceExhausted)
    }

    @Test func compressedFlagAndBadFlagsAndTruncation() {
        #expect(throws: GRPCFramingError.compressed) { try framed([[1, 0, 0, 0, 0][...]]) }
        #expect(GRPCFramingError.compressed.status.code == .unimplemented)
        #expect(throws: GRPCFramingError.invalidFlag(7)) { try framed([[7, 0, 0, 0, 0][...]]) }
        #expect(throws: GRPCFramingError.truncated(missing: 2)) { try framed([[0, 0, 0, 0, 5, 1, 2, 3][...]]) }
        #expect(throws: GRPCFramingError.truncated(missing: 3)) { try framed([[0, 0][...]]) }
    }

    @Test func timeoutHeaderUnits() {
        #expect(GRPCTimeout.parse("100m") == .milliseconds(100))
        #expect(GRPCTimeout.parse("2S") == .seconds(2))
        #expect(GRPCTimeout.parse("1H") == .seconds(3600))
        #expect(GRPCTimeout.parse("5M") == .seconds(300))
        #expect(GRPCTimeout.parse("250u") == .microseconds(250))
        #expect(GRPCTimeout.parse("99999999n") == .nanoseconds(99_999_999))
        #expect(GRPCTimeout.parse("123456789S") == nil)  // more than 8 digits
        #expect(GRPCTimeout.parse("10x") == nil)
        #expect(GRPCTimeout.parse("m") == nil)
        #expect(GRPCTimeout.parse("-1S") == nil)
    }

    @Test func messagesArePercentEncoded() {
        #expect(GRPCStatus.percentEncode("plain text: ok") == "plain text: ok")
        #expect(GRPCStatus.percentEncode("100% sure") == "100%25 sure")
        #expect(GRPCStatus.percentEncode("line\nbreak") == "line%0Abreak")
        #expect(GRPCStatus.percentEncode("é") == "%C3%A9")
    }
}
