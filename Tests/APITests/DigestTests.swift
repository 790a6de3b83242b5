import Serving
import Testing
@testable import API

@Suite struct DigestTests {
    @Test func base64RoundTripAndRejects() {
        for n in 0..<10 {
            let bytes = (0..<n).map { UInt8($0 * 37 & 0xFF) }
            #expect(Base64.decode(Base64.encode(bytes)) == bytes)
        }
        #expect(Base64.encode(Array("foobar".utf8)) == "Zm9vYmFy")
        #expect(Base64.decode("Zm9vYg==") == Array("foob".utf8))
        #expect(Base64.decode("Zm9vYg=") == nil)
        #expect(Base64.decode("Zm9v!mFy") == nil)
        #expect(Base64.decode("Zm=vYmFy") == nil)
        #expect(Base64.decode("Zm9vYh==") == nil)
    }

    @Test func digestHeaderGivesTheHexServingVerifies() throws {
        let body = Array("model bytes".utf8)
        let hex = SHA256.hexDigest(body)
        let base64 = Base64.encode(stride(from: 0, to: hex.count, by: 2).map { i in
            UInt8(hex[hex.index(hex.startIndex, offsetBy: i)..<hex.index(hex.startIndex, offsetBy: i + 2)], radix: 16)!
        })
        #expect(DigestHeader.hex(try DigestHeader.expectedSHA256("sha-256=" + base64)) == hex)
        #expect(DigestHeader.hex(try DigestHeader.expectedSHA256("md5=abc, SHA-256=" + base64)) == hex)
        #expect(throws: APIError.self) { try DigestHeader.expectedSHA256("sha-256=short") }
        #expect(throws: APIError.self) { try DigestHeader.expectedSHA256("md5=abc") }
    }
}
