import XCTest
@testable import Serving

final class MetadataLabelsTests: XCTestCase {
    func testJSONArrayAndUltralyticsDict() {
        XCTAssertEqual(metadataLabels([("labels", #"["cat", "dog"]"#)]), ["cat", "dog"])
        XCTAssertEqual(metadataLabels([("names", "{0: 'person', 1: 'bicycle', 2: 'car'}")]), ["person", "bicycle", "car"])
        XCTAssertEqual(metadataLabels([("classes", "a\nb\nc")]), ["a", "b", "c"])
    }

    func testMissingOrMalformedGivesNoLabels() {
        XCTAssertEqual(metadataLabels([("author", "me")]), [])
        XCTAssertEqual(metadataLabels([("labels", "[1, 2")]), [])
        XCTAssertEqual(metadataLabels([("names", "{0: 'a', 2: 'c'}")]), [], "gaps in the indices are not a label list")
    }
}
