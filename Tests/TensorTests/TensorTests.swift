import Testing
@testable import Tensor

@Suite struct TensorTests {
    @Test func stridesAreRowMajor() {
        #expect(Tensor.contiguousStrides([2, 3, 4]) == [12, 4, 1])
        #expect(Tensor.contiguousStrides([]) == [])
    }

    @Test func scalarsRoundTrip() {
        let t = Tensor(shape: [2, 2], scalars: [Float(1), 2, 3, 4])
        #expect(t.scalars(as: Float.self) == [1, 2, 3, 4])
        #expect(t.byteCount == 16)
        #expect(t.description == "float32[2, 2]")
    }

    @Test func writesCopyWhenShared() {
        let a = Tensor(shape: [3], scalars: [Int64(1), 2, 3])
        var b = a
        b.withUnsafeMutableBufferPointer(of: Int64.self) { $0[0] = 9 }
        #expect(a.scalars(as: Int64.self) == [1, 2, 3])
        #expect(b.scalars(as: Int64.self) == [9, 2, 3])
    }

    @Test func rowsShareAndConcatenateRestores() {
        let t = Tensor(shape: [3, 2], scalars: [Float(0), 1, 2, 3, 4, 5])
        let middle = t.rows(1..<2)
        #expect(middle.shape == [1, 2])
        #expect(middle.scalars(as: Float.self) == [2, 3])
        var written = middle
        written.withUnsafeMutableBufferPointer(of: Float.self) { $0[0] = 7 }
        #expect(t.scalars(as: Float.self)[2] == 2)
        let joined = Tensor.concatenatingRows([t.rows(0..<1), t.rows(1..<3)])
        #expect(joined.scalars(as: Float.self) == [0, 1, 2, 3, 4, 5])
    }

    @Test func rowsStackOnlyWithOneDtypeAndTrailingShape() {
        let t = Tensor(shape: [3, 2], scalars: [Float](repeating: 1, count: 6))
        #expect(Tensor.stackableRows([t.rows(0..<1), t.rows(1..<3)]))
        #expect(!Tensor.stackableRows([t, Tensor(shape: [1, 3], scalars: [Float](repeating: 1, count: 3))]), "another width")
        #expect(!Tensor.stackableRows([t, Tensor(shape: [1, 2], scalars: [Int32](repeating: 1, count: 2))]), "another dtype")
        #expect(!Tensor.stackableRows([t, t.reshaped([6])]), "another rank")
        #expect(!Tensor.stackableRows([]))
    }

    @Test func namedRowPartsStackOnlyWhenEveryPartMatches() {
        let a = Tensor(shape: [1, 2], scalars: [Float(1), 2]), b = Tensor(shape: [2, 2], scalars: [Float(3), 4, 5, 6])
        let merged = Tensor.stackingRows([["y": a], ["y": b]], rows: [1, 2])
        #expect(merged?["y"]?.shape == [3, 2])
        #expect(merged?["y"]?.scalars(as: Float.self) == [1, 2, 3, 4, 5, 6])
        #expect(Tensor.stackingRows([["y": a], ["y": b]], rows: [1, 1]) == nil, "a part with more rows than its range")
        #expect(Tensor.stackingRows([["y": a], ["z": a]], rows: [1, 1]) == nil, "other names")
        #expect(Tensor.stackingRows([["y": a], ["y": a, "z": a]], rows: [1, 1]) == nil, "an extra output")
        #expect(Tensor.stackingRows([["y": a], ["y": Tensor(shape: [1, 3], scalars: [Float](repeating: 0, count: 3))]], rows: [1, 1]) == nil,
                "rows of another width")
        #expect(Tensor.stackingRows([["s": Tensor(shape: [1], strings: [[1]])], ["s": Tensor(shape: [1], strings: [[2]])]], rows: [1, 1]) == nil,
                "strings")
    }

    @Test func stringTensorsSliceByRow() {
        let t = Tensor(shape: [2], strings: [[1], [2, 3]])
        #expect(t.rows(1..<2).strings == [[2, 3]])
        #expect(Tensor.concatenatingRows([t, t]).strings.count == 4)
    }
}
