import Synchronization

/// Request ids: the client's when it is sane, otherwise a per-process random prefix plus a counter (unique, cheap).
enum RequestID {
    /// Longest client id we echo back.
    static let maxLength = 128

    /// True when a client id is short and made only of characters safe in headers and logs.
    static func isSane<C: Collection<UInt8>>(_ bytes: C) -> Bool {
        guard !bytes.isEmpty, bytes.count <= maxLength else { return false }
        return bytes.allSatisfy { b in
            switch b {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: ":"), UInt8(ascii: "+"),
                 UInt8(ascii: "/"), UInt8(ascii: "="), UInt8(ascii: "@"): true
            default: false
            }
        }
    }

    /// Random per-process prefix so ids from restarts do not collide.
    private static let prefix: [UInt8] = {
        var generator = SystemRandomNumberGenerator()
        let hex = Array("0123456789abcdef".utf8)
        return (0..<8).map { _ in hex[Int(generator.next() & 15)] }
    }()

    private static let counter = Atomic<UInt64>(0)

    /// A new id like `3f9c2a1b-1a2f` (prefix, dash, hex counter), written straight into the string's storage.
    static func generate() -> String {
        let n = counter.add(1, ordering: .relaxed).newValue
        var digits = 0
        var rest = n
        repeat { digits += 1; rest >>= 4 } while rest > 0
        return String(unsafeUninitializedCapacity: 9 + digits) { buffer in
            prefix.withUnsafeBufferPointer { p in
                for i in 0..<8 { buffer[i] = p[i] }
            }
            buffer[8] = UInt8(ascii: "-")
            var value = n
            for i in stride(from: 8 + digits, to: 8, by: -1) {
                let nibble = UInt8(value & 15)
                buffer[i] = nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
                value >>= 4
            }
            return 9 + digits
        }
    }
}
