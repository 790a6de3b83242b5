import Testing
import Tensor
@testable import ONNX
import Protobuf
import TestSupport

/// Truncated, corrupted and hostile inputs must throw `ONNXError`, never crash, hang or over-allocate.
@Suite struct CorruptInputTests {
    /// Byte offset where the first top-level `opset_import` field ends: every shorter prefix lacks a required part.
    private func endOfFirstOpset(_ bytes: [UInt8]) throws -> Int {
        try bytes.withUnsafeBytes { buffer in
            var reader = WireReader(buffer)
            while let field = try reader.next() {
                if field.number == 8 { return field.bytes.baseAddress! + field.bytes.count - buffer.baseAddress! }
            }
            return buffer.count
        }
    }

    @Test(arguments: ["initializers.onnx", "attributes.onnx"])
    func everyTruncatedPrefixThrows(file: String) throws {
        let bytes = try Fixtures.bytes(file)
        let required = try endOfFirstOpset(bytes)
        for length in 0..<bytes.count {
            let prefix = Array(bytes[..<length])
            do {
                _ = try Model(serialized: prefix)
                // Protobuf has no end marker: a prefix ending on a field boundary after the required fields is a valid model.
                #expect(length >= required, "prefix of \(length) bytes decoded")
            } catch is ONNXError {
                continue
            }
        }
    }

    @Test(arguments: ["initializers.onnx", "attributes.onnx"])
    func randomByteFlipsNeverCrash(file: String) throws {
        let original = try Fixtures.bytes(file)
        var generator = SeededGenerator(seed: 0x05_9E_E7)
        var outcomes = (decoded: 0, rejected: 0)
        for _ in 0..<3000 {
            var bytes = original
            for _ in 0..<(1 + Int(generator.next() % 3)) {
                let index = Int(generator.next() % UInt64(bytes.count))
                bytes[index] ^= UInt8(truncatingIfNeeded: generator.next() | 1)
            }
            do {
                _ = try Model(serialized: bytes)
                outcomes.decoded += 1
            } catch is ONNXError {
                outcomes.rejected += 1
            }
        }
        #expect(outcomes.rejected > 0)
    }

    @Test func lengthPastTheEndThrowsTruncated() {
        // graph (field 7, length-delimited) claiming 1000 bytes with only 2 present.
        let bytes: [UInt8] = [0x08, 0x07, 0x3A, 0xE8, 0x07, 0x0A, 0x00]
        #expect(throws: ONNXError.self) { try Model(serialized: bytes) }
        do { _ = try Model(serialized: bytes) } catch let error as ONNXError {
            #expect(error.code == .truncated)
        } catch { Issue.record("\(error)") }
    }

    @Test func hugeLengthDoesNotAllocate() {
        // A 10-byte varint length of 2^63 must be compared, not converted or allocated.
        let bytes: [UInt8] = [0x3A, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01]
        #expect(throws: ONNXError.self) { try Model(serialized: bytes) }
    }

    @Test func overlongVarintIsMalformed() {
        let bytes: [UInt8] = [0x08] + Array(repeating: 0xFF, count: 11) + [0x01]
        do { _ = try Model(serialized: bytes); Issue.record("decoded") } catch let error as ONNXError {
            #expect(error.code == .malformed)
        } catch { Issue.record("\(error)") }
    }

    @Test func emptyAndNonONNXInputsThrow() {
        for bytes: [UInt8] in [[], Array("not a model at all".utf8), [0x0B], [0x08, 0x07]] {
            #expect(throws: ONNXError.self) { try Model(serialized: bytes) }
        }
    }

    @Test func rawDataSizeMismatchNamesTheTensor() throws {
        // TensorProto: dims [4], data_type FLOAT, name "w", raw_data of 8 bytes (needs 16).
        let tensor: [UInt8] = [0x08, 0x04, 0x10, 0x01, 0x42, 0x01, 0x77, 0x4A, 0x08] + Array(repeating: 0, count: 8)
        do { _ = try decodeTensorProto(tensor); Issue.record("decoded") } catch let error as ONNXError {
            #expect(error.code == .invalidTensor)
            #expect(error.message.contains("'w'") && error.message.contains("16"), "\(error)")
        }
    }

    @Test func hugeDimsWithLittleDataThrowBeforeAllocating() {
        // dims [2^40, 2^40] overflow; dims [2^33] with no data: count mismatch, no allocation.
        let overflow: [UInt8] = [0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20, 0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20, 0x10, 0x01]
        #expect(throws: ONNXError.self) { try decodeTensorProto(overflow) }
        let large: [UInt8] = [0x08, 0x80, 0x80, 0x80, 0x80, 0x20, 0x10, 0x01, 0x22, 0x04, 0, 0, 0x80, 0x3F]
        #expect(throws: ONNXError.self) { try decodeTensorProto(large) }
    }

    @Test func packedAndUnpackedRepeatedFieldsMix() throws {
        // dims packed [4]; data_type INT64; int64_data packed [1, 300] then unpacked 5 then unpacked -1.
        var bytes: [UInt8] = [0x0A, 0x01, 0x04, 0x10, 0x07, 0x3A, 0x03, 0x01, 0xAC, 0x02, 0x38, 0x05]
        bytes += [0x38, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]
        let tensor = try decodeTensorProto(bytes).tensor
        #expect(tensor.scalars(as: Int64.self) == [1, 300, 5, -1])
    }

    @Test func unknownFieldsOfEveryWireTypeAreSkipped() throws {
        // float tensor [1] = 2.0 surrounded by unknown fields 100 (varint), 101 (fixed64), 102 (bytes), 103 (fixed32).
        let unknown: [UInt8] = [0xA0, 0x06, 0x96, 0x01, 0xA9, 0x06, 1, 2, 3, 4, 5, 6, 7, 8, 0xB2, 0x06, 0x02, 0xAA, 0xBB, 0xBD, 0x06, 9, 9, 9, 9]
        let bytes: [UInt8] = unknown + [0x08, 0x01, 0x10, 0x01, 0x25, 0x00, 0x00, 0x00, 0x40] + unknown
        let tensor = try decodeTensorProto(bytes).tensor
        #expect(tensor.scalars(as: Float.self) == [2])
    }

    @Test func wrongWireTypeForAKnownFieldIsMalformed() {
        // data_type (field 2) sent as a length-delimited field.
        let bytes: [UInt8] = [0x12, 0x01, 0x01]
        do { _ = try decodeTensorProto(bytes); Issue.record("decoded") } catch let error as ONNXError {
            #expect(error.code == .malformed)
            #expect(error.message.contains("data_type"))
        } catch { Issue.record("\(error)") }
    }

    @Test func deeplyNestedSubgraphsAreRejected() {
        // Build graph { node { attribute { g: graph { ... } } } } nested 100 levels, inside-out.
        var graph: [UInt8] = []
        for _ in 0..<100 {
            let attribute = [0x0A, 0x01, 0x67, 0xA0, 0x01, 0x05] + field(6, graph)   // name "g", type GRAPH, g
            let node = [0x22, 0x02, 0x49, 0x66] + field(5, attribute)                    // op_type "If", attribute
            graph = field(1, node)
        }
        let model: [UInt8] = [0x08, 0x08] + field(7, graph) + field(8, [0x10, 0x0D])
        do { _ = try Model(serialized: model); Issue.record("decoded") } catch let error as ONNXError {
            #expect(error.code == .tooDeep)
        } catch { Issue.record("\(error)") }
    }

    @Test func segmentedTensorsAreUnsupported() {
        let bytes: [UInt8] = [0x08, 0x01, 0x10, 0x01, 0x1A, 0x04, 0x08, 0x00, 0x10, 0x01, 0x25, 0, 0, 0, 0]
        do { _ = try decodeTensorProto(bytes); Issue.record("decoded") } catch let error as ONNXError {
            #expect(error.code == .unsupported)
        } catch { Issue.record("\(error)") }
    }

    /// A length-delimited field with a one-byte key.
    private func field(_ number: UInt8, _ payload: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [number << 3 | 2]
        var length = payload.count
        repeat {
            out.append(UInt8(length & 0x7F) | (length > 0x7F ? 0x80 : 0))
            length >>= 7
        } while length > 0
        return out + payload
    }
}

