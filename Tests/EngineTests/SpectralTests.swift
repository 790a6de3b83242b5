import Foundation
import Testing
import Tensor
import ONNX
@testable import Engine

/// The FFT against its plain DFT twin, and the spectral / RoiAlign models of `Tests/Fixtures/audio` against
/// onnxruntime's outputs (made by `make_audio_fixtures.py`).
@Suite struct SpectralTests {
    typealias T = TestSupport

    /// `Tests/Fixtures/audio`.
    static let root = String(TestSupport.fixtures.dropLast("engine".count)) + "audio"

    /// Every case directory.
    static let cases: [String] = {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        return names.filter { FileManager.default.fileExists(atPath: root + "/" + $0 + "/model.onnx") }.sorted()
    }()

    /// Seeded values in [-1, 1).
    static func noise(_ count: Int, seed: UInt64) -> [Double] {
        var state = seed &* 6364136223846793005 &+ 1442695040888963407
        return (0..<count).map { _ in
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return Double(state >> 11) / Double(1 << 53) * 2 - 1
        }
    }

    static func fft(_ re: [Double], _ im: [Double], inverse: Bool) -> ([Double], [Double]) {
        let plan = FFTPlan(re.count)
        var outRe = [Double](repeating: 0, count: re.count), outIm = outRe
        re.withUnsafeBufferPointer { r in im.withUnsafeBufferPointer { i in
            outRe.withUnsafeMutableBufferPointer { or in outIm.withUnsafeMutableBufferPointer { oi in
                plan.transform(inRe: r.baseAddress!, inIm: i.baseAddress!, outRe: or.baseAddress!, outIm: oi.baseAddress!, inverse: inverse)
            } }
        } }
        return (outRe, outIm)
    }

    /// Mixed radix (powers of 2 and 4, 3, 5, 7, other primes up to 31) and Bluestein (larger prime factors) lengths.
    static let lengths = Array(1...70) + [96, 97, 128, 210, 243, 400, 401, 512, 625, 961, 1021, 2 * 211]

    @Test(arguments: lengths) func fftMatchesPlainDFT(_ n: Int) {
        let re = Self.noise(n, seed: UInt64(n)), im = Self.noise(n, seed: UInt64(n) + 1000)
        for inverse in [false, true] {
            let (fr, fi) = Self.fft(re, im, inverse: inverse)
            let (rr, ri) = referenceDFT(re: re, im: im, inverse: inverse)
            let scale = (rr + ri).reduce(0) { max($0, abs($1)) }
            let worst = zip(fr + fi, rr + ri).reduce(0) { max($0, abs($1.0 - $1.1)) }
            #expect(worst <= 1e-9 * max(scale, 1), "n \(n) inverse \(inverse): max diff \(worst)")
        }
    }

    @Test(arguments: [1, 2, 7, 16, 400]) func realSignalsInPairsMatchOneByOne(_ n: Int) {
        let plan = FFTPlan(n)
        let signals = (0..<5).map { Self.noise(n, seed: UInt64(40 + $0)) }
        var spectra = [[Double]](repeating: [], count: signals.count)
        forwardRealSignals(plan, count: signals.count, load: { s, buffer in
            for j in 0..<n { buffer[j] = signals[s][j] }
        }, store: { s, re, im in
            spectra[s] = (0..<n).map { re[$0] } + (0..<n).map { im[$0] }
        })
        for (s, signal) in signals.enumerated() {
            let (rr, ri) = referenceDFT(re: signal, im: [Double](repeating: 0, count: n), inverse: false)
            let worst = zip(spectra[s], rr + ri).reduce(0) { max($0, abs($1.0 - $1.1)) }
            #expect(worst <= 1e-9 * Double(n), "signal \(s) of \(n): max diff \(worst)")
        }
    }

    @Test func fixturesArePresent() {
        #expect(Self.cases.count >= 7, "run Tests/Fixtures/audio/make_audio_fixtures.py")
    }

    @Test(arguments: cases) func matchesOnnxRuntime(_ name: String) throws {
        let dir = Self.root + "/" + name
        let model = try CompiledModel(contentsOf: dir + "/model.onnx")
        let (feeds, expected) = try TestSupport.fixtureTensors(in: dir)
        #expect(!expected.isEmpty)
        let results = try model.run(feeds)
        for (output, reference) in expected {
            let actual = try #require(results[output], "\(name): output \(output) missing")
            #expect(actual.shape == reference.shape, "\(name).\(output) shape \(actual.shape) vs \(reference.shape)")
            #expect(actual.dtype == reference.dtype, "\(name).\(output) dtype \(actual.dtype) vs \(reference.dtype)")
            guard actual.count == reference.count else { continue }
            let a = actual.doubles, e = reference.doubles
            let scale = e.reduce(0) { max($0, abs($1)) }
            let worst = zip(a, e).map { abs($0 - $1) }.max() ?? 0
            #expect(worst <= 1e-4 * scale + 1e-5, "\(name).\(output): max diff \(worst) (max|ref| \(scale))")
        }
    }

    /// Attribute values the engine does not implement are refused when the model loads, naming the node.
    @Test func unsupportedAttributesFailAtLoad() {
        let x = T.f([1, 1, 4, 4], [Float](repeating: 1, count: 16))
        let rois = T.f([1, 4], [0, 0, 2, 2]), batch = T.i([1], [0])
        let cases: [(String, [(String, Tensor)], [String: Attribute])] = [
            ("RoiAlign", [("x", x), ("rois", rois), ("batch", batch)], ["mode": .string(Array("median".utf8))]),
            ("RoiAlign", [("x", x), ("rois", rois), ("batch", batch)], ["coordinate_transformation_mode": .string(Array("asymmetric".utf8))]),
            ("STFT", [("s", T.f([1, 8, 1], [Float](repeating: 0, count: 8))), ("step", T.i([], [2]))], ["onesided": .int(2)]),
            ("DFT", [("s", T.f([1, 8, 1], [Float](repeating: 0, count: 8)))], ["inverse": .int(3)]),
        ]
        for (op, inputs, attributes) in cases {
            #expect(throws: EngineError.self) { try T.runNode(op, inputs, attributes: attributes, opset: 17) }
            do {
                _ = try T.runNode(op, inputs, attributes: attributes, opset: 17)
            } catch let error as EngineError {
                #expect(error.code == .unsupportedAttribute && error.message.contains("\(op) node 'n'"), "\(error)")
            } catch {
                Issue.record("unexpected \(error)")
            }
        }
    }

    /// Half-precision input is computed wide and written back as float16.
    @Test func float16StaysFloat16() throws {
        let ones = Tensor(shape: [1, 4, 1], scalars: [UInt16](repeating: 0x3C00, count: 4))
        let half = Tensor(dtype: .float16, shape: ones.shape, storage: ones.storage, byteOffset: ones.byteOffset)
        let y = try T.runNode("DFT", [("x", half)])[0]
        #expect(y.dtype == .float16 && y.shape == [1, 4, 2])
        #expect(y.withUnsafeBytes { Array($0.bindMemory(to: UInt16.self)) } == [0x4400, 0, 0, 0, 0, 0, 0, 0])
    }

    /// Malformed runtime values are errors, never crashes.
    @Test func badValuesAreErrors() {
        let signal = T.f([1, 8, 1], [Float](repeating: 0, count: 8))
        #expect(throws: EngineError.self) { try T.runNode("STFT", [("s", signal), ("step", T.i([], [0]))]) }
        #expect(throws: EngineError.self) { try T.runNode("STFT", [("s", signal), ("step", T.i([], [2])), ("", T.f([1], [0])), ("len", T.i([], [9]))]) }
        #expect(throws: EngineError.self) { try T.runNode("DFT", [("s", signal), ("len", T.i([], [0]))]) }
        #expect(throws: EngineError.self) { try T.runNode("DFT", [("s", T.f([8], [Float](repeating: 0, count: 8)))]) }
        #expect(throws: EngineError.self) {
            try T.runNode("MelWeightMatrix", [("m", T.i([], [8])), ("n", T.i([], [64])), ("r", T.i([], [16000])),
                                               ("lo", T.f([], [0])), ("hi", T.f([], [20000]))])
        }
        let x = T.f([1, 1, 4, 4], [Float](repeating: 1, count: 16))
        #expect(throws: EngineError.self) { try T.runNode("RoiAlign", [("x", x), ("rois", T.f([1, 4], [0, 0, 2, 2])), ("b", T.i([1], [3]))]) }
        let nan = T.f([1, 4], [0, 0, .nan, .infinity])
        #expect(throws: Never.self) { try T.runNode("RoiAlign", [("x", x), ("rois", nan), ("b", T.i([1], [0]))], opset: 16) }
        #expect(throws: Never.self) { try T.runNode("RoiAlign", [("x", x), ("rois", nan), ("b", T.i([1], [0]))], attributes: ["sampling_ratio": .int(2)], opset: 16) }
    }
}
