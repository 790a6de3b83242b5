/// `osprey serve` flags that bound the work one request may cause (kept apart from ServeCommand to stay small).
extension ServeOptions {
    /// Value flags parsed by `parseRequestLimits`.
    static let requestLimitFlags: Set<String> = ["max-image-bytes", "max-bytes-elements", "max-decoded-bytes"]

    /// Reads `--max-image-bytes`, `--max-bytes-elements` and `--max-decoded-bytes` (each at least 1).
    mutating func parseRequestLimits(_ arguments: Arguments) throws {
        service.maxImageBytes = try positive(arguments.bytes("max-image-bytes", default: service.maxImageBytes), "max-image-bytes")
        service.decodeLimits.maxBytesElements = try arguments.int("max-bytes-elements", default: service.decodeLimits.maxBytesElements, minimum: 1)
        service.decodeLimits.maxDecodedBytes = try positive(arguments.bytes("max-decoded-bytes", default: service.decodeLimits.maxDecodedBytes),
                                                            "max-decoded-bytes")
    }

    private func positive(_ value: Int, _ name: String) throws -> Int {
        guard value >= 1 else { throw UsageError(description: "--\(name) expects a size of at least 1 byte, got \(value)") }
        return value
    }
}
