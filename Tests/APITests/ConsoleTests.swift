import Foundation
import Testing
@testable import API

/// The console page and the spec are embedded in the binary; these check that what is served is what the repo holds.
@Suite struct ConsoleTests {
    static let repositoryRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test func embeddedSpecIsOpenAPIYAMLByteForByte() throws {
        let file = try Data(contentsOf: Self.repositoryRoot.appendingPathComponent("openapi.yaml"))
        let same = EmbeddedSpec.text.utf8.elementsEqual(file)
        #expect(same, "openapi.yaml changed: run `make spec` (.ci/embed-spec)")
    }

    @Test func pageLoadsNothingFromOutside() {
        let page = String(decoding: ConsolePage.bytes, as: UTF8.self)
        // No CDN, font or script from another origin: the page must work on clusters with no internet.
        for external in ["http://", "https://", "//cdn", "<script src", "<link rel=\"stylesheet\""] {
            #expect(!page.contains(external), "page references \(external)")
        }
        #expect(page.hasPrefix("<!doctype html>"))
        #expect(page.contains("</html>"))
    }

    @Test func pageUsesOnlyRoutesTheServerHas() {
        let page = String(decoding: ConsolePage.bytes, as: UTF8.self)
        let patterns = Set(Routes.all.map(\.pattern))
        // Every fixed path the script fetches is a documented route.
        for path in ["/v2/models", "/v2/health/ready", "/v2/repository/index", "/metrics"] {
            #expect(page.contains("\"\(path)\""), "page no longer fetches \(path)")
            #expect(patterns.contains(path), "\(path) is not a route")
        }
    }
}
