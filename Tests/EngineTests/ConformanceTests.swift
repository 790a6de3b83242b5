import Testing
import Tensor
import ONNX
import Engine
#if canImport(Glibc)
import Glibc
#endif

/// ONNX's own backend tests (Debian `libonnx-testdata`: node tests, plus the small pytorch and simple models) run through the engine.
///
/// A case runs when every node (subgraphs included) uses an operator in `CompiledModel.supportedOperators`;
/// cases listed in `conformance-known-unsupported.txt` are skipped with their reason. Floats must satisfy
/// `|a - b| <= 1e-4 * max|ref| + 1e-5`; integers, bools and strings must match exactly.
@Suite struct ConformanceTests {
    /// Where ONNX's node tests may live (the Debian package, or `OSPREY_ONNX_NODE_TESTS`).
    static func testDataRoot() -> String? {
        var candidates = ["/usr/share/libonnx-testdata/data/node", "/usr/share/onnx/backend/test/data/node"]
        if let custom = getenv("OSPREY_ONNX_NODE_TESTS") { candidates.insert(String(cString: custom), at: 0) }
        return candidates.first { access($0, R_OK) == 0 }
    }

    /// Case name -> reason, from the checked-in list (`name  # reason` per line).
    static func knownUnsupported() -> [String: String] {
        // Kept beside the ONNX fixtures: a .txt inside a test target directory would need a Package.swift exclude.
        let tests = String(#filePath.dropLast("EngineTests/ConformanceTests.swift".count))
        let path = tests + "Fixtures/onnx/conformance-known-unsupported.txt"
        guard let bytes = try? readWholeFile(path) else { return [:] }
        var list: [String: String] = [:]
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
            let parts = line.split(separator: "#", maxSplits: 1)
            let name = parts.first.map { $0.trimmingCharacters(in: " \t") } ?? ""
            guard !name.isEmpty else { continue }
            list[name] = parts.count > 1 ? parts[1].trimmingCharacters(in: " \t") : "listed as known unsupported"
        }
        return list
    }

    /// Missing test data is a skipped test, not a pass (`make test` installs libonnx-testdata, so CI never skips).
    static let missingData = "ONNX node tests not found (install Debian package libonnx-testdata; `make test` does)"

    @Test(.enabled(if: testDataRoot() != nil, Comment(rawValue: missingData)))
    func nodeTests() throws {
        Self.runSuite("node", roots: [try #require(Self.testDataRoot())])
    }

    /// The package's small whole-model tests: converted PyTorch modules/operators and the `simple` models.
    @Test(.enabled(if: testDataRoot() != nil, Comment(rawValue: missingData)))
    func smallModelTests() throws {
        let root = try #require(Self.testDataRoot())
        let parent = String(root.dropLast("/node".count))
        Self.runSuite("pytorch/simple", roots: ["pytorch-converted", "pytorch-operator", "simple"].map { parent + "/" + $0 })
    }

    /// The sequence / optional decoding the harness relies on reads real elements (not an empty container that would
    /// compare equal to an empty result).
    @Test(.enabled(if: testDataRoot() != nil, Comment(rawValue: missingData)))
    func containerValuesDecode() throws {
        let root = try #require(Self.testDataRoot())
        let sequence = try decodeContainerProto(readWholeFile(root + "/test_sequence_insert_at_back/test_data_set_0/output_0.pb"), optional: false)
        let elements = try #require(sequence.sequenceElements)
        #expect(elements.map(\.shape) == [[4], [3], [2], [3]])
        #expect(elements[3].scalars(as: Int64.self) == [10, 11, 12])
        let empty = try decodeContainerProto(readWholeFile(root + "/test_optional_has_element_empty/test_data_set_0/input_0.pb"), optional: true)
        guard case .emptyOptional? = empty.container else { Issue.record("expected an empty optional, got \(empty)"); return }
    }

    /// Runs every case under `roots`, prints the summary and per-failure lines, and fails on unlisted failures.
    static func runSuite(_ label: String, roots: [String]) {
        let exempt = knownUnsupported()
        var passed: [String] = [], failed: [String] = [], stale: [String] = []
        var skipped: [String: Int] = [:], wanted: [String: Int] = [:]
        for root in roots {
            for name in directories(root).filter({ $0.hasPrefix("test_") }) {
                let outcome = run(case: root + "/" + name)
                if exempt[name] != nil {
                    // Listed cases still run so stale entries get noticed, but their outcome never fails the suite.
                    if case .passed = outcome { stale.append(name) }
                    skipped["listed in conformance-known-unsupported.txt", default: 0] += 1
                    continue
                }
                switch outcome {
                case .passed: passed.append(name)
                case .skipped(let reason): skipped[reason, default: 0] += 1
                case .missing(let ops):
                    skipped["operator not supported", default: 0] += 1
                    for op in ops { wanted[op, default: 0] += 1 }
                case .failed(let reason): failed.append("FAIL \(name): \(reason)")
                }
            }
        }
        let skippedCount = skipped.values.reduce(0, +)
        print("conformance (\(label)): \(passed.count) passed, \(failed.count) failed, \(skippedCount) skipped")
        for line in failed { print("  " + line) }
        print("  skipped: " + skipped.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: "; "))
        let topWanted = wanted.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }.prefix(20)
        if !topWanted.isEmpty {
            print("  unsupported operators by cases blocked: " + topWanted.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
        }
        if !stale.isEmpty { print("  listed in conformance-known-unsupported.txt but passing (remove them): \(stale.joined(separator: ", "))") }
        #expect(failed.isEmpty, "\(failed.count) \(label) conformance failures (listed above); fix them or add them to conformance-known-unsupported.txt with a reason")
    }

    enum Outcome {
        case passed
        case failed(String)
        case skipped(String)
        case missing(Set<String>)
    }

    /// Loads, runs and checks one case directory (every `test_data_set_*` in it).
    static func run(case directory: String) -> Outcome {
        let model: Model
        do {
            model = try Model(contentsOf: directory + "/model.onnx")
        } catch let error as ONNXError where error.code == .unsupported {
            return .skipped("decoder: unsupported feature")
        } catch {
            return .failed("decode: \(error)")
        }
        let missing = Set(operators(model.graph).filter { !isSupported($0) }.map { $0.domain.isEmpty ? $0.op : "\($0.domain):\($0.op)" })
        guard missing.isEmpty else { return .missing(missing) }
        let values = model.graph.inputs + model.graph.outputs
        // Sequence and optional values are decoded from their SequenceProto / OptionalProto files; maps are not.
        guard values.allSatisfy({ $0.kind != .map }) else { return .skipped("map values") }
        let kinds = Dictionary(values.map { ($0.name, $0.kind) }, uniquingKeysWith: { a, _ in a })

        let compiled: CompiledModel
        do {
            // Sequence / optional graph values need the in-process entry point (the server refuses them).
            compiled = values.allSatisfy({ $0.kind == .tensor }) ? try CompiledModel(model: model, baseDirectory: directory)
                : try CompiledModel(model: model, allowingContainerValues: true)
        } catch {
            return .failed("compile: \(error)")
        }
        let initializers = Set(model.graph.initializers.map(\.name))
        let inputNames = model.graph.inputs.map(\.name).filter { !initializers.contains($0) }
        let outputNames = model.graph.outputs.map(\.name)
        let declared = Dictionary((model.graph.inputs + model.graph.outputs).map { ($0.name, $0.elementType) }, uniquingKeysWith: { a, _ in a })
        let sets = directories(directory).filter { $0.hasPrefix("test_data_set_") }
        guard !sets.isEmpty else { return .failed("no test_data_set_* directory") }
        for set in sets {
            let setPath = directory + "/" + set
            do {
                var feeds: [String: Tensor] = [:]
                for (index, name) in inputNames.enumerated() {
                    guard let bytes = try? readWholeFile("\(setPath)/input_\(index).pb") else { continue }
                    feeds[name] = try decodeValue(bytes, kind: kinds[name], declared: declared[name] ?? nil)
                }
                let results = try compiled.run(feeds)
                for (index, name) in outputNames.enumerated() {
                    guard let bytes = try? readWholeFile("\(setPath)/output_\(index).pb") else { continue }
                    let expected = try decodeValue(bytes, kind: kinds[name], declared: declared[name] ?? nil)
                    guard let actual = results[name] else { return .failed("\(set): output '\(name)' missing") }
                    if let mismatch = compareValue(actual, expected) { return .failed("\(set): output '\(name)': \(mismatch)") }
                }
            } catch {
                return .failed("\(set): \(error)")
            }
        }
        return .passed
    }

    /// A test-data value: a TensorProto, or for sequence / optional values a SequenceProto / OptionalProto.
    static func decodeValue(_ bytes: [UInt8], kind: ValueKind?, declared: DType?) throws -> Tensor {
        switch kind {
        case .sequence?: return try decodeContainerProto(bytes, optional: false)
        case .optional?: return try decodeContainerProto(bytes, optional: true)
        default: return retagged(try decodeTensorProto(bytes).tensor, as: declared)
        }
    }

    /// `compare` extended to sequences (same length, element by element) and empty optionals.
    static func compareValue(_ actual: Tensor, _ expected: Tensor) -> String? {
        switch expected.container {
        case .emptyOptional?:
            if case .emptyOptional? = actual.container { return nil }
            return "\(actual), expected an empty optional"
        case .sequence(let elements)?:
            guard let got = actual.sequenceElements else { return "\(actual), expected a sequence of \(elements.count)" }
            guard got.count == elements.count else { return "sequence of \(got.count), expected \(elements.count)" }
            for (index, (a, e)) in zip(got, elements).enumerated() {
                if let mismatch = compareValue(a, e) { return "sequence element \(index): \(mismatch)" }
            }
            return nil
        case nil:
            guard actual.container == nil else { return "\(actual), expected a tensor" }
            return compare(actual, expected)
        }
    }

    /// ONNX 1.12's generator stored bfloat16 test tensors as uint16 (NumPy has no bfloat16): same bits, declared type wins.
    static func retagged(_ tensor: Tensor, as declared: DType?) -> Tensor {
        guard let declared, declared != tensor.dtype, Set([declared, tensor.dtype]) == [.bfloat16, .uint16] else { return tensor }
        return Tensor(dtype: declared, shape: tensor.shape, storage: tensor.storage, byteOffset: tensor.byteOffset)
    }

    /// Every (domain, op_type) in `graph` and its subgraphs.
    static func operators(_ graph: Graph) -> [(domain: String, op: String)] {
        graph.nodes.flatMap { node -> [(domain: String, op: String)] in
            var ops = [(domain: node.domain, op: node.opType)]
            for attribute in node.attributes.values {
                switch attribute {
                case .graph(let subgraph): ops += operators(subgraph)
                case .graphs(let subgraphs): ops += subgraphs.flatMap(operators)
                default: break
                }
            }
            return ops
        }
    }

    /// Default-domain ops by name; other domains only when the engine lists them as `domain:OpType`.
    static func isSupported(_ op: (domain: String, op: String)) -> Bool {
        op.domain.isEmpty || op.domain == "ai.onnx"
            ? CompiledModel.supportedOperators.contains(op.op)
            : CompiledModel.supportedOperators.contains("\(op.domain):\(op.op)")
    }

    /// nil when `actual` matches `expected`, else what differs.
    static func compare(_ actual: Tensor, _ expected: Tensor) -> String? {
        guard actual.dtype == expected.dtype else { return "dtype \(actual.dtype), expected \(expected.dtype)" }
        guard actual.shape == expected.shape else { return "shape \(actual.shape), expected \(expected.shape)" }
        if expected.dtype == .string {
            return actual.strings == expected.strings ? nil : "strings differ"
        }
        if expected.dtype.isFloatingPoint {
            let a = floats(actual), e = floats(expected)
            let scale = e.reduce(0) { $1.isFinite ? max($0, abs($1)) : $0 }
            let tolerance = 1e-4 * scale + 1e-5
            for index in 0..<e.count {
                let (x, y) = (a[index], e[index])
                if x.isNaN && y.isNaN { continue }
                if x.isInfinite || y.isInfinite { if x == y { continue } else { return "element \(index): \(x), expected \(y)" } }
                if !(abs(x - y) <= tolerance) { return "element \(index): \(x), expected \(y) (tolerance \(tolerance))" }
            }
            return nil
        }
        let a: [UInt8] = actual.withUnsafeBytes { Array($0) }
        let e: [UInt8] = expected.withUnsafeBytes { Array($0) }
        if a == e { return nil }
        let width = max(expected.dtype.byteSize, 1)
        let firstByte = a.indices.first { $0 < e.count && a[$0] != e[$0] } ?? 0
        return "element \(firstByte / width) differs (exact match required for \(expected.dtype))"
    }

    /// The elements of a floating-point tensor widened to Double.
    static func floats(_ tensor: Tensor) -> [Double] {
        switch tensor.dtype {
        case .float32: return tensor.scalars(as: Float.self).map(Double.init)
        case .float64: return tensor.scalars(as: Double.self)
        case .float16:
            return tensor.withUnsafeBytes { raw in (0..<tensor.count).map { Double(halfToFloat(raw.load(fromByteOffset: $0 * 2, as: UInt16.self))) } }
        case .bfloat16:
            return tensor.withUnsafeBytes { raw in (0..<tensor.count).map { Double(Float(bitPattern: UInt32(raw.load(fromByteOffset: $0 * 2, as: UInt16.self)) << 16)) } }
        default: return []
        }
    }

    /// IEEE half to float, without relying on `Float16` being available on every platform.
    static func halfToFloat(_ bits: UInt16) -> Float {
        let sign: Float = bits & 0x8000 != 0 ? -1 : 1
        let exponent = Int((bits >> 10) & 0x1F)
        let mantissa = Float(bits & 0x3FF)
        if exponent == 31 { return mantissa == 0 ? sign * Float.infinity : Float.nan }
        if exponent == 0 {
            let subnormal: Float = mantissa * Float(sign: .plus, exponent: -24, significand: 1)
            return sign * subnormal
        }
        let scale: Float = Float(sign: .plus, exponent: exponent - 15, significand: 1)
        let fraction: Float = 1 + mantissa / 1024
        return sign * fraction * scale
    }

    /// Sorted entry names of a directory.
    static func directories(_ path: String) -> [String] {
        guard let dir = opendir(path) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafePointer(to: &entry.pointee.d_name) {
                // Read in place up to the NUL: the record can be shorter than the 256-byte field (ASan caught the copy).
                String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self))
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }
}

private extension Substring {
    func trimmingCharacters(in set: String) -> String {
        String(drop { set.contains($0) }.reversed().drop { set.contains($0) }.reversed())
    }
}
