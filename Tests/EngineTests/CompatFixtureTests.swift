import Foundation
import Testing
import Tensor
import ONNX
@testable import Engine

/// Models from real exporters (skl2onnx) and hand-built ai.onnx.ml graphs, compared with onnxruntime outputs made by
/// `Tests/Fixtures/compat/make_compat_fixtures.py`.
@Suite struct CompatFixtureTests {
    /// `Tests/Fixtures/compat`.
    static let root = String(TestSupport.fixtures.dropLast("engine".count)) + "compat"

    /// Every case directory with reference outputs.
    static let cases: [String] = {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        return names.filter { FileManager.default.fileExists(atPath: root + "/" + $0 + "/model.onnx") && $0 != "zipmap" }.sorted()
    }()

    @Test func fixturesArePresent() {
        #expect(Self.cases.count >= 20, "run Tests/Fixtures/compat/make_compat_fixtures.py")
    }

    @Test(arguments: cases) func matchesOnnxRuntime(_ name: String) throws {
        let dir = Self.root + "/" + name
        let model = try CompiledModel(contentsOf: dir + "/model.onnx")
        var feeds: [String: Tensor] = [:]
        var expected: [String: Tensor] = [:]
        var expectedStrings: [String: [String]] = [:]
        for file in try FileManager.default.contentsOfDirectory(atPath: dir) {
            if file.hasPrefix("input_"), file.hasSuffix(".npy") {
                feeds[String(file.dropFirst(6).dropLast(4))] = try TestSupport.npy(dir + "/" + file)
            } else if file.hasPrefix("input_"), file.hasSuffix(".txt") {
                // String inputs: a "#shape D0 D1 ..." line, then one value per line.
                let lines = try String(contentsOfFile: dir + "/" + file, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
                let shape = lines[0].split(separator: " ").dropFirst().compactMap { Int($0) }
                let values = lines.dropFirst().prefix(shape.reduce(1, *)).map { Array($0.utf8) }
                feeds[String(file.dropFirst(6).dropLast(4))] = Tensor(shape: shape, strings: values)
            } else if file.hasPrefix("output_"), file.hasSuffix(".npy") {
                expected[String(file.dropFirst(7).dropLast(4))] = try TestSupport.npy(dir + "/" + file)
            } else if file.hasPrefix("output_"), file.hasSuffix(".txt") {
                let text = try String(contentsOfFile: dir + "/" + file, encoding: .utf8)
                expectedStrings[String(file.dropFirst(7).dropLast(4))] = text.split(separator: "\n").map(String.init)
            }
        }
        #expect(!expected.isEmpty || !expectedStrings.isEmpty)
        let results = try model.run(feeds)
        for (output, reference) in expected {
            let actual = try #require(results[output], "\(name): output \(output) missing")
            #expect(actual.shape == reference.shape, "\(name).\(output) shape \(actual.shape) vs \(reference.shape)")
            #expect(actual.dtype == reference.dtype, "\(name).\(output) dtype \(actual.dtype) vs \(reference.dtype)")
            switch reference.dtype {
            case .float32:
                #expect(TestSupport.close(actual.scalars(as: Float.self), reference.scalars(as: Float.self)),
                        "\(name).\(output): \(actual.scalars(as: Float.self)) vs \(reference.scalars(as: Float.self))")
            case .int64:
                #expect(actual.scalars(as: Int64.self) == reference.scalars(as: Int64.self), "\(name).\(output) values")
            default:
                #expect(actual.doubles == reference.doubles, "\(name).\(output) values")
            }
        }
        for (output, reference) in expectedStrings {
            let actual = try #require(results[output], "\(name): output \(output) missing")
            #expect(actual.strings.map { String(decoding: $0, as: UTF8.self) } == reference, "\(name).\(output) labels")
        }
    }

    @Test func zipMapIsRejectedWithAdvice() throws {
        #expect { try CompiledModel(contentsOf: Self.root + "/zipmap/model.onnx") } throws: {
            guard let e = $0 as? EngineError else { return false }
            return e.code == .unsupportedOperator && e.message.contains("ZipMap") && e.message.contains("zipmap")
        }
    }

    @Test func mlOperatorsAreListedWithTheirDomain() {
        for op in ["Scaler", "Normalizer", "Binarizer", "Imputer", "ArrayFeatureExtractor", "LinearClassifier", "LinearRegressor",
                   "TreeEnsembleClassifier", "TreeEnsembleRegressor", "TreeEnsemble", "SVMClassifier", "SVMRegressor",
                   "LabelEncoder", "CategoryMapper", "OneHotEncoder", "FeatureVectorizer"] {
            #expect(CompiledModel.supportedOperators.contains("ai.onnx.ml:\(op)"), "\(op)")
            #expect(!CompiledModel.supportedOperators.contains(op), "\(op) must not be listed as an ai.onnx operator")
        }
        #expect(!CompiledModel.supportedOperators.contains("ai.onnx.ml:ZipMap"))
    }

    @Test func unknownDomainNamesTheDomain() throws {
        let node = Node(name: "n", opType: "Thing", domain: "com.example", inputs: ["x"], outputs: ["y"])
        let graph = Graph(name: "g", nodes: [node], inputs: [ValueInfo(name: "x", elementType: .float32, shape: [.fixed(1)])],
                          outputs: [ValueInfo(name: "y")])
        #expect { try CompiledModel(model: Model(opsetImports: ["": 17], graph: graph)) } throws: {
            ($0 as? EngineError)?.message.contains("com.example") == true
        }
    }
}
