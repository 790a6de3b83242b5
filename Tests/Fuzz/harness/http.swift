// Fuzz target: the HTTP/1.x request parser (http-parser callbacks, our limits, header/framing checks).
// Compiled into the HTTP module itself (RequestParser is internal). The same bytes are fed whole and split at an
// offset taken from the input: both must give the same event kinds, since TCP may cut a request anywhere; and a third
// parser that suspends after every request (backpressure) and is fed the rest again must agree too.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHTTPRequestParser(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    let whole = RequestParser(maxHeaderBytes: 2048, maxBodyBytes: 4096)
    whole.feed(bytes)
    let split = RequestParser(maxHeaderBytes: 2048, maxBodyBytes: 4096)
    let cut = size == 0 ? 0 : Int(data[0]) % (size + 1)
    split.feed(UnsafeRawBufferPointer(rebasing: bytes[..<cut]))
    split.feed(UnsafeRawBufferPointer(rebasing: bytes[cut...]))
    let a = whole.events.map(fuzzSummary), b = split.events.map(fuzzSummary)
    if a != b { fatalError("whole vs split at \(cut) differ:\n\(a)\n\(b)") }
    // Suspended after every request (backpressure) and fed the rest again: still the same events.
    let suspended = RequestParser(maxHeaderBytes: 2048, maxBodyBytes: 4096)
    suspended.shouldSuspend = { true }
    var offset = 0
    while offset < size {
        let consumed = suspended.feed(UnsafeRawBufferPointer(rebasing: bytes[offset...]))
        if consumed <= 0 { fatalError("suspended parser consumed nothing at \(offset)") }
        offset += consumed
    }
    let c = suspended.events.map(fuzzSummary)
    if a != c { fatalError("whole vs suspended differ:\n\(a)\n\(c)") }
    return 0
}

private func fuzzSummary(_ event: ParserEvent) -> String {
    switch event {
    case .request(let parsed):
        let r = parsed.request
        return "request \(r.method) \(r.path)?\(r.query) \(r.version) \(r.headers.fields.map { "\($0.name):\($0.value)" }) body \(r.body.count) keepAlive \(parsed.keepAlive) id \(r.requestID)"
    case .expectContinue: return "continue"
    case .error(let error): return "error \(error)"
    case .refused(let response): return "refused \(response.status)"
    }
}
