import Testing
@testable import Engine
import TestSupport

@Suite struct KernelActivationTests {
    @Test(arguments: allActivations)
    func vectorEpilogueMatchesScalar(_ activation: Activation) {
        var rng = SeededGenerator(seed: 7)
        for count in [1, 15, 16, 37, 100] {
            let input = rng.floats(count).map { $0 * 8 }
            let residual = rng.floats(count)
            var plain = input
            plain.withUnsafeMutableBufferPointer { activation.apply($0.baseAddress!, count: count) }
            expectClose(plain, input.map { activation($0) }, "\(activation) count \(count)")
            var fused = input
            fused.withUnsafeMutableBufferPointer { out in
                residual.withUnsafeBufferPointer { activation.apply(out.baseAddress!, count: count, adding: 0.5, residual: $0.baseAddress!) }
            }
            expectClose(fused, (0..<count).map { activation(input[$0] + 0.5 + residual[$0]) }, "\(activation) fused count \(count)")
        }
    }

    @Test(arguments: allActivations)
    func channelAndRowEpiloguesMatchScalar(_ activation: Activation) {
        var rng = SeededGenerator(seed: 11)
        let channels = 5, plane = 23
        let data = rng.floats(channels * plane).map { $0 * 4 }
        let bias = rng.floats(max(channels, plane))
        let residual = rng.floats(channels * plane)
        var out = data
        out.withUnsafeMutableBufferPointer { o in
            bias.withUnsafeBufferPointer { b in
                residual.withUnsafeBufferPointer { r in
                    applyChannelEpilogue(o.baseAddress!, channels: channels, planeSize: plane, bias: b.baseAddress, residual: r.baseAddress,
                                         activation: activation)
                }
            }
        }
        expectClose(out, (0..<(channels * plane)).map { activation(data[$0] + bias[$0 / plane] + residual[$0]) }, "\(activation) channels")
        var rows = data
        rows.withUnsafeMutableBufferPointer { o in
            bias.withUnsafeBufferPointer { b in
                residual.withUnsafeBufferPointer { r in
                    applyRowEpilogue(o.baseAddress!, rows: channels, columns: plane, bias: b.baseAddress, residual: r.baseAddress,
                                     activation: activation)
                }
            }
        }
        expectClose(rows, (0..<(channels * plane)).map { activation(data[$0] + bias[$0 % plane] + residual[$0]) }, "\(activation) rows")
    }

    /// The C shim's SiLU / Sigmoid (AVX-512F and AVX2 + FMA bodies) against the Swift SIMD path and the scalar definition: vector tails
    /// (masked), addend, residual, the clamped ends of exp and NaN.
    @Test(arguments: [Activation.sigmoid, .silu])
    func logisticKernelMatchesPortable(_ activation: Activation) {
        var rng = SeededGenerator(seed: 19)
        for count in [1, 7, 8, 9, 15, 16, 17, 31, 33, 100, 1000] {
            var input = rng.floats(count).map { $0 * 30 }
            if count >= 9 { input[0] = 100; input[1] = -100; input[2] = 88.5; input[3] = -88.5; input[4] = 0; input[5] = .infinity }
            let residual = rng.floats(count)
            for withResidual in [false, true] {
                forEachFloatKernelBody { body in
                    var fast = input, portable = input
                    residual.withUnsafeBufferPointer { r in
                        let res = withResidual ? r.baseAddress : nil
                        fast.withUnsafeMutableBufferPointer { activation.apply($0.baseAddress!, count: count, adding: 0.25, residual: res) }
                        portable.withUnsafeMutableBufferPointer { activation.applyPortable($0.baseAddress!, count: count, adding: 0.25, residual: res) }
                    }
                    expectClose(fast, portable, "\(body) \(activation) count \(count) residual \(withResidual)")
                    expectClose(fast, (0..<count).map { activation(input[$0] + 0.25 + (withResidual ? residual[$0] : 0)) },
                                "\(body) \(activation) scalar count \(count)")
                }
            }
        }
        forEachFloatKernelBody { body in
            var nan: [Float] = [.nan, 1, -1, .nan, 2, 3, 4, 5, 6, .nan, 7, 8, 9, 10, 11, 12, 13, .nan, 14]
            nan.withUnsafeMutableBufferPointer { activation.apply($0.baseAddress!, count: $0.count) }
            #expect(nan[0].isNaN && nan[3].isNaN && nan[9].isNaN && nan[17].isNaN && !nan[1].isNaN && !nan[18].isNaN, "\(body)")
        }
    }

    /// A lone GELU (no addend, no residual) runs in the C shim's erf kernel: against the Swift SIMD path and the scalar
    /// definition, vector tails, the clamped ends of erf and NaN.
    @Test func geluKernelMatchesPortable() { Self.checkLoneActivation(.gelu, seed: 23) }

    /// A lone tanh-GELU runs in the C shim (x * sigmoid(2u)): against the Swift SIMD path and the scalar tanh
    /// definition, vector tails, saturated ends and NaN.
    @Test func geluTanhKernelMatchesPortable() { Self.checkLoneActivation(.geluTanh, seed: 29) }

    /// `activation` applied alone by every float kernel body against its portable path and its scalar definition, on
    /// vector tails, both saturated ends, zero and NaN.
    private static func checkLoneActivation(_ activation: Activation, seed: UInt64) {
        var rng = SeededGenerator(seed: seed)
        for count in [1, 7, 8, 9, 15, 16, 17, 31, 33, 100, 1000] {
            var input = rng.floats(count).map { $0 * 8 }
            if count >= 9 { input[0] = 100; input[1] = -100; input[2] = 5.7; input[3] = -5.7; input[4] = 0 }
            forEachFloatKernelBody { body in
                var fast = input, portable = input
                fast.withUnsafeMutableBufferPointer { activation.apply($0.baseAddress!, count: count) }
                portable.withUnsafeMutableBufferPointer { activation.applyPortable($0.baseAddress!, count: count, adding: 0, residual: nil) }
                expectClose(fast, portable, "\(body) \(activation) count \(count)")
                expectClose(fast, input.map { activation($0) }, "\(body) \(activation) scalar count \(count)")
            }
        }
        var nan: [Float] = [.nan, 1, -1, .nan, 2, 3, 4, 5, 6, .nan, 7, 8, 9, 10, 11, 12, 13, .nan, 14]
        nan.withUnsafeMutableBufferPointer { activation.apply($0.baseAddress!, count: $0.count) }
        #expect(nan[0].isNaN && nan[3].isNaN && nan[9].isNaN && nan[17].isNaN && !nan[1].isNaN && !nan[18].isNaN)
    }
}
