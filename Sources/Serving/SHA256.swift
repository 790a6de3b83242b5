import CKernelShim

/// SHA-256 (FIPS 180-4): verifies uploaded model files and keys the response cache.
///
/// Whole blocks go through the x86 SHA extensions when the CPU has them (CKernelShim's sha256_blocks.c: a cache hit's
/// key over a 602 KB tensor took 8.2 ms with the Swift compressor, 0.56 ms with them), else through the Swift
/// compressor below, which the tests compare the fast path against.
public enum SHA256 {
    /// True when `osprey_sha256_blocks` may run on this CPU (checked once).
    static let hasSHAExtensions = osprey_sha256_has_sha_extensions() == 1

    /// An incremental digest: feed bytes in any pieces with `update`, then `finalize` once.
    public struct Hasher: Sendable {
        private var h: (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32) =
            (0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19)
        private var pending: [UInt8] = []  // fewer than 64 bytes not yet compressed
        private var length: UInt64 = 0
        private let usesSHAExtensions: Bool

        /// A hasher with the initial state.
        public init() { self.init(portable: false) }

        /// A hasher that never uses the SHA extensions when `portable` (the reference for tests).
        init(portable: Bool) {
            usesSHAExtensions = !portable && SHA256.hasSHAExtensions
            pending.reserveCapacity(64)
        }

        /// Adds `bytes` to the message.
        public mutating func update(_ bytes: UnsafeRawBufferPointer) {
            guard !bytes.isEmpty else { return }
            length &+= UInt64(bytes.count)
            var offset = 0
            if !pending.isEmpty {
                let take = min(64 - pending.count, bytes.count)
                pending.append(contentsOf: bytes[0..<take])
                offset = take
                guard pending.count == 64 else { return }
                pending.withUnsafeBytes { compress($0.baseAddress!, blocks: 1) }
                pending.removeAll(keepingCapacity: true)
            }
            let blocks = (bytes.count - offset) / 64
            if blocks > 0 {
                compress(bytes.baseAddress! + offset, blocks: blocks)
                offset += 64 * blocks
            }
            if offset < bytes.count { pending.append(contentsOf: bytes[offset...]) }
        }

        /// Adds `bytes` to the message.
        public mutating func update(_ bytes: [UInt8]) { bytes.withUnsafeBytes { update($0) } }

        /// Adds a length-prefixed string, so that ("ab", "c") and ("a", "bc") hash differently.
        public mutating func update(field text: String) {
            let utf8 = Array(text.utf8)
            update(integer: utf8.count)
            update(utf8)
        }

        /// Adds an integer as 8 little-endian bytes.
        public mutating func update(integer value: Int) {
            withUnsafeBytes(of: Int64(value).littleEndian) { update($0) }
        }

        /// The 32-byte digest of everything added.
        public consuming func finalize() -> [UInt8] {
            let bitLength = length &* 8
            var tail = pending
            tail.append(0x80)
            while tail.count % 64 != 56 { tail.append(0) }
            for shift in stride(from: 56, through: 0, by: -8) { tail.append(UInt8(truncatingIfNeeded: bitLength >> UInt64(shift))) }
            tail.withUnsafeBytes { buffer in
                compress(buffer.baseAddress!, blocks: buffer.count / 64)
            }
            var digest: [UInt8] = []
            digest.reserveCapacity(32)
            for word in [h.0, h.1, h.2, h.3, h.4, h.5, h.6, h.7] {
                digest.append(UInt8(truncatingIfNeeded: word >> 24))
                digest.append(UInt8(truncatingIfNeeded: word >> 16))
                digest.append(UInt8(truncatingIfNeeded: word >> 8))
                digest.append(UInt8(truncatingIfNeeded: word))
            }
            return digest
        }

        /// `blocks` consecutive 64-byte blocks into the state.
        private mutating func compress(_ data: UnsafeRawPointer, blocks: Int) {
            if usesSHAExtensions {
                withUnsafeMutableBytes(of: &h) { state in
                    osprey_sha256_blocks(state.baseAddress!.assumingMemoryBound(to: UInt32.self), data.assumingMemoryBound(to: UInt8.self), blocks)
                }
            } else {
                for block in 0..<blocks { compressPortably(data + 64 * block) }
            }
        }

        /// One 64-byte block into the state (the message schedule lives on the stack).
        private mutating func compressPortably(_ block: UnsafeRawPointer) {
            withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 64) { w in
                for t in 0..<16 { w[t] = UInt32(bigEndian: block.loadUnaligned(fromByteOffset: 4 * t, as: UInt32.self)) }
                for t in 16..<64 {
                    let s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3)
                    let s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10)
                    w[t] = w[t - 16] &+ s0 &+ w[t - 7] &+ s1
                }
                let k = osprey_sha256_round_constants()!
                var (a, b, c, d, e, f, g, hh) = h
                for t in 0..<64 {
                    let s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)
                    let ch = (e & f) ^ (~e & g)
                    let t1 = hh &+ s1 &+ ch &+ k[t] &+ w[t]
                    let s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)
                    let maj = (a & b) ^ (a & c) ^ (b & c)
                    (hh, g, f, e, d, c, b, a) = (g, f, e, d &+ t1, c, b, a, t1 &+ s0 &+ maj)
                }
                h = (h.0 &+ a, h.1 &+ b, h.2 &+ c, h.3 &+ d, h.4 &+ e, h.5 &+ f, h.6 &+ g, h.7 &+ hh)
            }
        }
    }

    /// The 32-byte digest of `bytes`.
    public static func hash(_ bytes: [UInt8]) -> [UInt8] {
        var hasher = Hasher()
        hasher.update(bytes)
        return hasher.finalize()
    }

    /// The digest of `bytes` as 64 lower-case hex characters.
    public static func hexDigest(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(64)
        for byte in hash(bytes) {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

@inline(__always)
private func rotr(_ x: UInt32, _ n: UInt32) -> UInt32 { (x >> n) | (x << (32 - n)) }
