import Testing
import Tensor
@testable import ONNX

/// Every model and `.pb` tensor of ONNX's own backend tests (Debian `libonnx-testdata`) decodes:
/// the node tests plus the small pytorch-converted, pytorch-operator and simple models.
@Suite struct NodeTestDataTests {
    static let root = "/usr/share/libonnx-testdata/data/node"
    static let extraRoots = ["pytorch-converted", "pytorch-operator", "simple"].map { "/usr/share/libonnx-testdata/data/" + $0 }

    static func cases(in root: String = root) -> [String] {
        guard let dir = opendir(root) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafePointer(to: &entry.pointee.d_name) {
                // Read in place up to the NUL: the record can be shorter than the 256-byte field (ASan caught the copy).
                String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self))
            }
            if name.hasPrefix("test_") { names.append(name) }
        }
        return names.sorted()
    }

    /// Missing test data is a skipped test, not a pass (`make test` installs libonnx-testdata).
    @Test(.enabled(if: !cases().isEmpty, "\(root) not found (install Debian package libonnx-testdata; `make test` does)"))
    func everyNodeTestDecodes() throws {
        let cases = ([Self.root] + Self.extraRoots).flatMap { root in Self.cases(in: root).map { root + "/" + $0 } }
        var failures: [String] = []
        var tensorsDecoded = 0
        for dir in cases {
            let name = String(dir.dropFirst("/usr/share/libonnx-testdata/data/".count))
            let model: Model
            do {
                model = try Model(contentsOf: dir + "/model.onnx")
            } catch let error as ONNXError where error.code == .unsupported {
                continue  // e.g. TYPE_PROTO attributes, float8 / int4 tensors
            } catch {
                failures.append("\(name): \(error)")
                continue
            }
            // Sequence/optional inputs are stored as SequenceProto/OptionalProto, not TensorProto.
            let valueKinds = model.graph.inputs.map(\.kind) + model.graph.outputs.map(\.kind)
            guard valueKinds.allSatisfy({ $0 == .tensor }) else { continue }
            for (prefix, count) in [("input", model.graph.inputs.count), ("output", model.graph.outputs.count)] {
                for index in 0..<count {
                    let path = "\(dir)/test_data_set_0/\(prefix)_\(index).pb"
                    guard let bytes = try? readWholeFile(path) else { continue }
                    do {
                        _ = try decodeTensorProto(bytes)
                        tensorsDecoded += 1
                    } catch let error as ONNXError where error.code == .unsupported {
                        continue
                    } catch {
                        failures.append("\(name)/\(prefix)_\(index).pb: \(error)")
                    }
                }
            }
        }
        print("NodeTestDataTests: \(cases.count) models, \(tensorsDecoded) tensors decoded, \(failures.count) failures")
        #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
        #expect(tensorsDecoded > 1000)
    }
}

#if canImport(Glibc)
import Glibc
#endif
