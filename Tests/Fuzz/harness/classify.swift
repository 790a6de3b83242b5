// Fuzz target: /classify request decoding (media type sniffing, multipart image parts, top_k from query or form).
// Line 1 of the input is the query string, line 2 the Content-Type, the rest is the body.
import API
import HTTP

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzClassifyRequest(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    var rest = Array(UnsafeBufferPointer(start: data, count: size))[...]
    func line() -> String {
        let end = rest.firstIndex(of: 0x0A) ?? rest.endIndex
        defer { rest = end < rest.endIndex ? rest[(end + 1)...] : rest[end...] }
        return String(decoding: rest[..<end], as: UTF8.self)
    }
    let query = line()
    let contentType = line()
    var headers = HTTPHeaders()
    if !contentType.isEmpty { headers.add("Content-Type", contentType) }
    let request = HTTPRequest(method: "POST", path: "/v2/models/m/classify", query: query, headers: headers, body: Array(rest))
    _ = try? ClassifyCodec.decodeRequest(request, limits: MultipartLimits(maxParts: 16, maxHeaderBytes: 512))
    return 0
}
