// Fuzz target: multipart/form-data parsing. The first line of the input is the Content-Type header value
// (boundary parameter parsing), the rest is the body.
import API

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzMultipart(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    let newline = input.firstIndex(of: 0x0A) ?? input.count
    let contentType = String(decoding: input[..<newline], as: UTF8.self)
    let body = newline < input.count ? Array(input[(newline + 1)...]) : []
    let limits = MultipartLimits(maxParts: 16, maxHeaderBytes: 512)
    if let parts = try? Multipart.parse(body: body, contentType: contentType, limits: limits) {
        for part in parts { _ = part.body.count + part.name.utf8.count + (part.filename?.utf8.count ?? 0) }
    }
    return 0
}
