import Testing
@testable import API

@Suite struct DigestTests {
    @Test func sha256KnownAnswers() {
        #expect(DigestHeader.hex(SHA256Hash.hash([UInt8]())) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(DigestHeader.hex(SHA256Hash.hash(Array("abc".utf8))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(DigestHeader.hex(SHA256Hash.hash(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)))
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        let million = [UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)
        #expect(DigestHeader.hex(SHA256Hash.hash(million)) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test func incrementalMatchesOneShot() {
        let data = (0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        for split in [0, 1, 63, 64, 65, 500, 999, 1000] {
            var h = SHA256Hash()
            h.update(data[..<split])
            h.update(data[split...])
            #expect(h.finalize() == SHA256Hash.hash(data))
        }
    }

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

    @Test func digestHeader() throws {
        let body = Array("model bytes".utf8)
        let good = "sha-256=" + Base64.encode(SHA256Hash.hash(body))
        #expect(throws: Never.self) { try DigestHeader.verify(good, body: body) }
        #expect(throws: Never.self) { try DigestHeader.verify("md5=abc, SHA-256=" + Base64.encode(SHA256Hash.hash(body)), body: body) }
        #expect(throws: APIError.self) { try DigestHeader.verify(good, body: body + [0]) }
        #expect(throws: APIError.self) { try DigestHeader.verify("sha-256=short", body: body) }
        #expect(throws: APIError.self) { try DigestHeader.verify("md5=abc", body: body) }
    }
}
