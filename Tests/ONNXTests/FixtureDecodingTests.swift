import Testing
import Tensor
@testable import ONNX

/// Decodes the generated fixtures and compares with what onnx itself reads back.
@Suite struct FixtureDecodingTests {
    @Test func modelMetadata() throws {
        let model = try Model(contentsOf: Fixtures.path("initializers.onnx"))
        #expect(model.irVersion == 7)
        #expect(model.producerName == "osprey-fixtures")
        #expect(model.producerVersion == "1.0")
        #expect(model.domain == "ai.osprey.test")
        #expect(model.modelVersion == 3)
        #expect(model.docString == "decoder fixture")
        #expect(model.opsetImports == ["": 13, "com.example": 2])
        #expect(model.defaultOpset == 13)
        #expect(model.metadataProps.map { "\($0.key)=\($0.value)" }.sorted() == ["author=osprey", "license=MIT"])
    }

    @Test func graphStructureAndSymbolicDims() throws {
        let graph = try Model(contentsOf: Fixtures.path("initializers.onnx")).graph
        #expect(graph.name == "inits")
        #expect(graph.nodes.map(\.opType) == ["Mul", "Relu"])
        #expect(graph.nodes[0].name == "scale")
        #expect(graph.nodes[0].inputs == ["x", "w"])
        #expect(graph.nodes[0].outputs == ["mid"])
        #expect(graph.inputs.map(\.name) == ["x", "w"])
        #expect(graph.inputs[0].elementType == .float32)
        #expect(graph.inputs[0].shape == [.symbolic("batch"), .fixed(4)])
        #expect(graph.outputs[0].shape == [.symbolic("batch"), .symbolic("")])
        #expect(graph.valueInfo.map(\.name) == ["mid"])
    }

    @Test func initializersMatchOnnx() throws {
        let model = try Model(contentsOf: Fixtures.path("initializers.onnx"))
        let expected = try Fixtures.expected()["initializers"] as! [String: [String: Any]]
        let decoded = Dictionary(model.graph.initializers.map { ($0.name, $0.tensor) }, uniquingKeysWith: { a, _ in a })
        #expect(Set(decoded.keys) == Set(expected.keys))
        for (name, entry) in expected {
            let tensor = try #require(decoded[name], "missing initializer \(name)")
            #expect(tensor.dtype.rawValue == entry["dtype"] as? Int, "dtype of \(name)")
            #expect(tensor.shape == entry["dims"] as? [Int], "shape of \(name)")
            #expect(Fixtures.texts(tensor) == Fixtures.expectedTexts(entry["values"]!), "values of \(name)")
        }
    }

    @Test func everyAttributeType() throws {
        let model = try Model(contentsOf: Fixtures.path("attributes.onnx"))
        let node = model.graph.nodes[0]
        #expect(node.domain == "com.example")
        let a = node.attributes
        guard case .float(let f)? = a["f"] else { Issue.record("f"); return }
        #expect(f == 0.25)
        guard case .int(-3)? = a["i"] else { Issue.record("i"); return }
        guard case .string(let s)? = a["s"] else { Issue.record("s"); return }
        #expect(s == Array("text".utf8))
        guard case .tensor(let t)? = a["t"] else { Issue.record("t"); return }
        #expect(t.scalars(as: Int64.self) == [4, 5])
        guard case .graph(let g)? = a["g"] else { Issue.record("g"); return }
        #expect(g.name == "then_branch")
        #expect(g.nodes.first?.opType == "Constant")
        guard case .floats(let floats)? = a["floats"] else { Issue.record("floats"); return }
        #expect(floats == [1.0, 2.5])
        guard case .ints(let ints)? = a["ints"] else { Issue.record("ints"); return }
        #expect(ints == [-1, 0, 1 << 40])
        guard case .strings(let strings)? = a["strings"] else { Issue.record("strings"); return }
        #expect(strings == [Array("a".utf8), Array("bc".utf8)])
        guard case .tensors(let tensors)? = a["tensors"] else { Issue.record("tensors"); return }
        #expect(tensors.map(\.dtype) == [.float32, .int8])
        #expect(tensors[1].scalars(as: Int8.self) == [-2])
        guard case .graphs(let graphs)? = a["graphs"] else { Issue.record("graphs"); return }
        #expect(graphs.map(\.name) == ["then_branch", "else_branch"])
        guard case .tensor(let sparse)? = a["sp"] else { Issue.record("sp"); return }
        #expect(sparse.scalars(as: Float.self) == [0, 0, 9, 0])
        guard case .ints(let empty)? = a["empty_ints"] else { Issue.record("empty_ints"); return }
        #expect(empty.isEmpty)
        guard case .int(11)? = a["legacy_int"] else { Issue.record("legacy attribute without type"); return }
    }

    @Test func ifSubgraphsAndNonTensorTypes() throws {
        let graph = try Model(contentsOf: Fixtures.path("attributes.onnx")).graph
        let branch = graph.nodes[1]
        #expect(branch.opType == "If")
        guard case .graph(let thenGraph)? = branch.attributes["then_branch"],
              case .graph(let elseGraph)? = branch.attributes["else_branch"] else {
            Issue.record("If branches missing"); return
        }
        guard case .tensor(let value)? = thenGraph.nodes[0].attributes["value"] else { Issue.record("Constant value"); return }
        #expect(value.scalars(as: Float.self) == [1])
        #expect(elseGraph.outputs.map(\.name) == ["else_out"])
        #expect(graph.inputs[0].elementType == .bool)
        #expect(graph.inputs[0].shape == [])
        let sequence = graph.outputs[1]
        #expect(sequence.kind == .sequence)
        #expect(sequence.elementType == nil)
        #expect(sequence.shape == nil)
    }

    @Test func externalDataLoadsRelativeToModel() throws {
        let model = try Model(contentsOf: Fixtures.path("external/model.onnx"))
        let expected = try Fixtures.expected()["external"] as! [String: [String]]
        let tensors = Dictionary(model.graph.initializers.map { ($0.name, $0.tensor) }, uniquingKeysWith: { a, _ in a })
        #expect(tensors["W"]?.shape == [2, 3])
        #expect(tensors["W"].map(Fixtures.texts) == Fixtures.expectedTexts(expected["W"]!))
        #expect(tensors["B"].map(Fixtures.texts) == Fixtures.expectedTexts(expected["B"]!))
    }

    @Test func externalDataOutsideTheDirectoryIsRejected() throws {
        for (file, fragment) in [("external/escape.onnx", "escapes"), ("external/absolute.onnx", "must be relative"), ("external/past_end.onnx", "which has")] {
            do {
                _ = try Model(contentsOf: Fixtures.path(file))
                Issue.record("\(file) decoded")
            } catch let error as ONNXError {
                #expect(error.code == .externalData, "\(file): \(error)")
                #expect(error.message.contains(fragment), "\(file): \(error)")
                #expect(error.message.contains("'W'"), "error should name the tensor: \(error)")
            }
        }
    }

    @Test func externalDataNeedsADirectory() throws {
        let bytes = try Fixtures.bytes("external/model.onnx")
        #expect(throws: ONNXError.self) { try Model(serialized: bytes) }
        let model = try Model(serialized: bytes, externalDataDirectory: Fixtures.path("external"))
        #expect(model.graph.initializers.count == 2)
    }

    @Test func pathResolution() throws {
        #expect(try ExternalData.resolve("a/./b/../w.bin", in: "/tmp") == "/tmp/a/w.bin")
        for bad in ["../x", "a/../../x", "/etc/passwd", "C:\\w.bin", "", ".", "a/.."] {
            #expect(throws: ONNXError.self, "\(bad)") { try ExternalData.resolve(bad, in: "/tmp") }
        }
    }

    @Test func missingFileIsAnIOError() {
        do {
            _ = try Model(contentsOf: "/nonexistent/model.onnx")
            Issue.record("decoded a missing file")
        } catch let error as ONNXError {
            #expect(error.code == .io)
            #expect(error.message.contains("/nonexistent/model.onnx"))
        } catch {
            Issue.record("unexpected \(error)")
        }
    }
}

/// Model-local functions are inlined at decode time.
@Suite struct FunctionInliningTests {
    @Test func functionsExpandLikeOnnx() throws {
        let graph = try Model(contentsOf: Fixtures.path("functions.onnx")).graph
        let expected = try Fixtures.expected()["functions"] as! [[String: Any]]
        #expect(graph.nodes.map(\.opType) == expected.map { $0["op"] as! String })
        for (node, entry) in zip(graph.nodes, expected) {
            if let alpha = entry["alpha"] as? String {
                guard case .float(let value)? = node.attributes["alpha"] else { Issue.record("\(node.name) lacks alpha"); continue }
                #expect(Double(value) == Double(alpha), "\(node.name)")
            } else {
                #expect(node.attributes["alpha"] == nil, "\(node.name)")
            }
        }
    }

    @Test func inlinedValuesConnect() throws {
        let graph = try Model(contentsOf: Fixtures.path("functions.onnx")).graph
        // Every input is a graph input or produced earlier; the graph output is produced; names are unique.
        var available: Set<String> = Set(graph.inputs.map(\.name))
        for node in graph.nodes {
            for input in node.inputs where !input.isEmpty { #expect(available.contains(input), "\(node.name) reads unknown '\(input)'") }
            for output in node.outputs { #expect(available.insert(output).inserted, "'\(output)' produced twice") }
        }
        #expect(available.contains("y"))
        #expect(graph.nodes.allSatisfy { $0.domain.isEmpty })
    }

    @Test func recursiveFunctionsAreRejected() throws {
        let call = Node(opType: "Loopy", domain: "d", inputs: ["x"], outputs: ["y"])
        var function = LocalFunction()
        function.domain = "d"; function.name = "Loopy"; function.inputs = ["a"]; function.outputs = ["b"]
        function.body = [(Node(opType: "Loopy", domain: "d", inputs: ["a"], outputs: ["b"]), [:])]
        do {
            _ = try FunctionInliner(functions: [function]).inline(Graph(nodes: [call]))
            Issue.record("recursion not detected")
        } catch let error as ONNXError {
            #expect(error.code == .tooDeep)
        }
    }
}
