import XCTest
@testable import Serving

final class SHA256Tests: XCTestCase {
    func testKnownVectors() {
        let vectors: [([UInt8], String)] = [
            ([], "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
            (Array("abc".utf8), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
            (Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8),
             "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
            // Padding boundaries: 55 bytes fit one block, 56 need two, 64 is exactly one.
            (Array(repeating: 0x61, count: 55), "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"),
            (Array(repeating: 0x61, count: 56), "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"),
            (Array(repeating: 0x61, count: 64), "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"),
            (Array(repeating: 0x61, count: 1000), "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3"),
            (Array((0..<768).map { UInt8($0 % 256) }), "f3a25aa93aa2fbba28d79260535bbd6a5eb0fc1c24a8b0f04e12b484c1dfe363"),
        ]
        for (input, expected) in vectors {
            XCTAssertEqual(SHA256.hexDigest(input), expected, "length \(input.count)")
        }
        XCTAssertEqual(SHA256.hash(Array("abc".utf8)).count, 32)
    }
}

final class SHA256HasherTests: XCTestCase {
    /// Any split of the message into pieces gives the one-shot digest.
    func testPiecesGiveTheOneShotDigest() {
        let message = (0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        let expected = SHA256.hash(message)
        for pieceSize in [1, 3, 55, 56, 63, 64, 65, 127, 500, 1000] {
            var hasher = SHA256.Hasher()
            var offset = 0
            while offset < message.count {
                let end = min(offset + pieceSize, message.count)
                hasher.update(Array(message[offset..<end]))
                offset = end
            }
            XCTAssertEqual(hasher.finalize(), expected, "pieces of \(pieceSize)")
        }
    }

    /// The SHA-extension path (when this CPU has it) and the Swift compressor agree on every length and split.
    func testTheSHAExtensionPathMatchesTheSwiftCompressor() {
        var generator = SystemRandomNumberGenerator()
        for length in [0, 1, 55, 56, 63, 64, 65, 127, 128, 129, 1000, 4096, 65_537, 602_112] {
            let message = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            var portable = SHA256.Hasher(portable: true)
            portable.update(message)
            let expected = portable.finalize()
            XCTAssertEqual(SHA256.hash(message), expected, "length \(length)")
            var pieces = SHA256.Hasher()
            for start in stride(from: 0, to: length, by: 1000) { pieces.update(Array(message[start..<min(start + 1000, length)])) }
            XCTAssertEqual(pieces.finalize(), expected, "length \(length) in pieces of 1000")
        }
        print("SHA-256 uses the SHA extensions: \(SHA256.hasSHAExtensions)")
    }

    /// Fields are length-prefixed: moving a byte from one field to the next changes the digest.
    func testFieldsAreUnambiguous() {
        var a = SHA256.Hasher(), b = SHA256.Hasher()
        a.update(field: "ab"); a.update(field: "c")
        b.update(field: "a"); b.update(field: "bc")
        XCTAssertNotEqual(a.finalize(), b.finalize())
    }
}
