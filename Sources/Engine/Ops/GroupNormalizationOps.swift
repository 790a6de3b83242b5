import Tensor

/// GroupNormalization (opsets 18 and 21) and RMSNormalization (opset 23), the normalizations newer exporters emit
/// as single nodes instead of InstanceNormalization or ReduceMean chains.
let normalizationOperators: OperatorTable = [
    "GroupNormalization": { ctx in
        let epsilon = try ctx.float("epsilon", 1e-5)
        let groups = try ctx.int("num_groups", 0)
        guard groups > 0 else { throw ctx.error(.invalidModel, "num_groups must be positive, got \(groups)") }
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            guard x.dtype == .float32, x.rank >= 2 else { throw ctx.error(.unsupportedDType, "X must be float32 [N, C, ...], got \(x)") }
            let scale = try inputs.required(1, ctx).scalars(as: Float.self), bias = try inputs.required(2, ctx).scalars(as: Float.self)
            let n = x.shape[0], c = x.shape[1], inner = x.shape[2...].reduce(1, *)
            guard c % groups == 0 else { throw ctx.error(.executionFailed, "\(c) channels do not split into \(groups) groups") }
            // Opset 21 scales each channel; opset 18 scaled each group (the spec's mistake it later fixed).
            let perGroup = ctx.opset < 21 && scale.count == groups && bias.count == groups && groups != c
            guard perGroup || (scale.count == c && bias.count == c) else {
                throw ctx.error(.executionFailed, "scale and bias must have \(c) values (one per channel), got \(scale.count) and \(bias.count)")
            }
            let perChannels = c / groups, span = perChannels * inner
            var y = Tensor.pooled(.float32, shape: x.shape)
            y.withUnsafeMutableBufferPointer(of: Float.self) { out in
                x.withUnsafeBufferPointer(of: Float.self) { source in
                    guard let p = source.baseAddress, let q = out.baseAddress else { return }
                    for block in 0..<(n * groups) {
                        let base = block * span
                        var sum: Double = 0
                        for i in 0..<span { sum += Double(p[base + i]) }
                        let mean = sum / Double(max(span, 1))
                        var squares: Double = 0
                        for i in 0..<span { let d = Double(p[base + i]) - mean; squares += d * d }
                        let inverse = 1 / (squares / Double(max(span, 1)) + Double(epsilon)).squareRoot()
                        let group = block % groups
                        for k in 0..<perChannels {
                            let channel = group * perChannels + k
                            let a = Float(inverse) * (perGroup ? scale[group] : scale[channel])
                            let b = (perGroup ? bias[group] : bias[channel]) - Float(mean) * a
                            let row = base + k * inner
                            for i in 0..<inner { q[row + i] = p[row + i] * a + b }
                        }
                    }
                }
            }
            return [y]
        }
    },
    "RMSNormalization": { ctx in
        let axis = try ctx.int("axis", -1), epsilon = try ctx.float("epsilon", 1e-5)
        return PreparedKernel { inputs in
            [try layerNormalization(inputs, axis: axis, epsilon: epsilon, simplified: true, ctx).y]
        }
    },
]
