import Foundation
import Testing
@testable import API

/// (method, path, operationId) triples from openapi.yaml's `paths:` section.
///
/// The file keeps a regular layout: paths at two spaces, methods at four, `operationId` at six.
func openAPIOperations(_ text: String) -> [(method: String, path: String, operationId: String?)] {
    let methods: Set<String> = ["get", "put", "post", "delete", "options", "head", "patch", "trace"]
    var result: [(method: String, path: String, operationId: String?)] = []
    var inPaths = false
    var path: String?
    for rawLine in text.split(separator: "\n", omittingEmptySubsequences: false) {
        let line = String(rawLine)
        let trimmed = line.trimmingCharacters(in: .whitespaces)
        if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
        let indent = line.prefix { $0 == " " }.count
        if indent == 0 {
            inPaths = trimmed == "paths:"
            continue
        }
        guard inPaths else { continue }
        if indent == 2 && trimmed.hasPrefix("/") && trimmed.hasSuffix(":") {
            path = String(trimmed.dropLast())
        } else if indent == 4, trimmed.hasSuffix(":"), methods.contains(String(trimmed.dropLast())), let path {
            result.append((method: String(trimmed.dropLast()).uppercased(), path: path, operationId: nil))
        } else if indent == 6, trimmed.hasPrefix("operationId:"), !result.isEmpty {
            result[result.count - 1].operationId = trimmed.dropFirst("operationId:".count).trimmingCharacters(in: .whitespaces)
        }
    }
    return result
}

@Suite struct OpenAPISpecTests {
    static let specURL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("openapi.yaml")

    @Test func specMatchesTheRouteTable() throws {
        let text = try String(contentsOf: Self.specURL, encoding: .utf8)
        let spec = openAPIOperations(text)
        #expect(spec.count == Routes.all.count)
        let fromSpec = Set(spec.map { "\($0.method) \($0.path) \($0.operationId ?? "<none>")" })
        let fromRoutes = Set(Routes.all.map { "\($0.method) \($0.pattern) \($0.operation.rawValue)" })
        #expect(fromSpec.subtracting(fromRoutes).isEmpty, "in openapi.yaml only: \(fromSpec.subtracting(fromRoutes).sorted())")
        #expect(fromRoutes.subtracting(fromSpec).isEmpty, "in Routes.all only: \(fromRoutes.subtracting(fromSpec).sorted())")
    }

    @Test func specIsOpenAPI31AndDocumentsErrors() throws {
        let text = try String(contentsOf: Self.specURL, encoding: .utf8)
        #expect(text.hasPrefix("openapi: 3.1"))
        for needle in ["Inference-Header-Content-Length", "multipart/form-data", "image/png", "image/jpeg",
                       "text/plain; version=0.0.4", "Retry-After", "Digest", "top_k"] {
            #expect(text.contains(needle), "\(needle)")
        }
    }

    @Test func everyResponseDocumentsTraceparentAndEveryOperationAcceptsIt() throws {
        let text = try String(contentsOf: Self.specURL, encoding: .utf8)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        func indent(_ line: String) -> Int { line.prefix { $0 == " " }.count }
        /// The lines under `lines[start]` that are indented deeper than it.
        func block(at start: Int) -> ArraySlice<String> {
            let base = indent(lines[start])
            var end = start + 1
            while end < lines.count, lines[end].trimmingCharacters(in: .whitespaces).isEmpty || indent(lines[end]) > base { end += 1 }
            return lines[(start + 1)..<end]
        }
        guard let components = lines.firstIndex(of: "components:"),
              let responses = lines[components...].firstIndex(of: "  responses:") else { Issue.record("no components/responses"); return }
        var documented: Set<String> = []
        for index in block(at: responses).indices where indent(lines[index]) == 4 {
            if block(at: index).contains("        traceparent:") { documented.insert(lines[index].trimmingCharacters(in: .whitespaces).dropLast().description) }
        }
        #expect(lines.contains("    Traceparent:"), "components define the header and the parameter")
        var operations = 0, responsesChecked = 0
        guard let paths = lines.firstIndex(of: "paths:") else { Issue.record("no paths"); return }
        for index in block(at: paths).indices where indent(lines[index]) == 4 && lines[index].hasSuffix(":") {
            let operation = block(at: index)
            operations += 1
            #expect(operation.contains("        - $ref: '#/components/parameters/Traceparent'"), "\(lines[index]) at line \(index + 1)")
            for code in operation.indices where indent(lines[code]) == 8 && lines[code].hasPrefix("        '") {
                responsesChecked += 1
                let response = block(at: code)
                if let reference = response.first(where: { $0.hasPrefix("          $ref: '#/components/responses/") }) {
                    let name = reference.split(separator: "/").last.map { String($0.dropLast()) } ?? ""
                    #expect(documented.contains(name), "components/responses/\(name) lacks traceparent")
                } else {
                    #expect(response.contains("            traceparent:"), "response at line \(code + 1) lacks traceparent")
                }
            }
        }
        #expect(operations == Routes.all.count)
        #expect(responsesChecked > operations)
    }

    @Test func extractorReadsTheRegularLayout() {
        let sample = """
        openapi: 3.1.0
        paths:
          /a/{x}:
            parameters: []
            get:
              operationId: one
            post:
              operationId: two
          /b:
            delete:
              operationId: three
        components:
          schemas:
            get:
              operationId: nope
        """
        let ops = openAPIOperations(sample)
        #expect(ops.map { "\($0.method) \($0.path) \($0.operationId ?? "")" } == ["GET /a/{x} one", "POST /a/{x} two", "DELETE /b three"])
    }
}
