import HTTP

extension HTTPResponse {
    /// A response carrying JSON text with `Content-Type: application/json`.
    public static func json(_ body: [UInt8], status: Int = 200) -> HTTPResponse {
        HTTPResponse(status: status, headers: ["Content-Type": "application/json"], body: body)
    }

    /// A response carrying a JSON value.
    public static func json(_ value: JSONValue, status: Int = 200) -> HTTPResponse {
        json(value.serialized, status: status)
    }

    /// The error body `{"error": message}` with the given status.
    public static func jsonError(_ status: Int, _ message: String, headers extra: HTTPHeaders = HTTPHeaders()) -> HTTPResponse {
        var writer = JSONWriter(capacity: message.utf8.count + 16)
        writer.beginObject()
        writer.key("error")
        writer.string(message)
        writer.endObject()
        var response = json(writer.bytes, status: status)
        for field in extra { response.headers.add(field.name, field.value) }
        return response
    }
}
