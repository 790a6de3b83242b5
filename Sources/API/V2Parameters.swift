/// Reading typed values out of a V2 `parameters` object.
extension JSONObject {
    /// The integer parameter `key`, or nil when absent; anything but an integer in `range` is an invalid field that
    /// names `label`, the key, what was `expected` and the value sent.
    func integer(_ key: String, in range: ClosedRange<Int64>, expected: String, label: String) throws -> Int? {
        guard let value = self[key] else { return nil }
        guard let number = value.intValue, range.contains(number) else {
            throw V2CodecError(.invalidField, "\(label): \(key) must be \(expected), got \(String(decoding: value.serialized, as: UTF8.self))")
        }
        return Int(number)
    }
}
