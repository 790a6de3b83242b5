import Foundation
import Tensor

// Support vector machine operators of `ai.onnx.ml`: SVMClassifier and SVMRegressor.


/// Kernel of an SVM (`kernel_type` with `kernel_params` = [gamma, coef0, degree]).
private struct SVMKernel: Sendable {
    enum Kind: String, Sendable { case linear = "LINEAR", poly = "POLY", rbf = "RBF", sigmoid = "SIGMOID" }
    let kind: Kind, gamma: Float, coef0: Float, degree: Float

    init(_ ctx: OpContext, forceLinear: Bool) throws {
        let name = try ctx.string("kernel_type", "LINEAR").uppercased()
        guard let k = Kind(rawValue: name) else { throw ctx.unsupported("kernel_type", "'\(name)'") }
        let p = try ctx.floats("kernel_params") ?? []
        kind = forceLinear ? .linear : k
        gamma = p.count > 0 ? p[0] : 0
        coef0 = p.count > 1 ? p[1] : 0
        degree = p.count > 2 ? p[2].rounded(.towardZero) : 0  // Int(_:) would trap on a NaN or huge attribute
    }

    /// k(a, b) over `n` features.
    func callAsFunction(_ a: UnsafePointer<Float>, _ b: UnsafePointer<Float>, _ n: Int) -> Float {
        switch kind {
        case .rbf:
            var s: Float = 0
            for i in 0..<n { let d = a[i] - b[i]; s += d * d }
            return Foundation.exp(-gamma * s)
        default:
            var s: Float = 0
            for i in 0..<n { s += a[i] * b[i] }
            switch kind {
            case .poly: return Foundation.pow(s * gamma + coef0, degree)
            case .sigmoid: return Foundation.tanh(s * gamma + coef0)
            default: return s
            }
        }
    }
}

/// libsvm's pairwise-coupling estimate of class probabilities from the pairwise matrix `r` (k x k).
private func multiclassProbability(_ k: Int, _ r: [[Float]]) -> [Float] {
    var q = [[Float]](repeating: [Float](repeating: 0, count: k), count: k)
    var p = [Float](repeating: 1 / Float(k), count: k), qp = [Float](repeating: 0, count: k)
    let eps = 0.005 / Float(k)
    for t in 0..<k {
        q[t][t] = 0
        for j in 0..<t { q[t][t] += r[j][t] * r[j][t]; q[t][j] = q[j][t] }
        for j in (t + 1)..<max(k, t + 1) { q[t][t] += r[j][t] * r[j][t]; q[t][j] = -r[j][t] * r[t][j] }
    }
    for _ in 0..<max(100, k) {
        var pqp: Float = 0
        for t in 0..<k {
            qp[t] = 0
            for j in 0..<k { qp[t] += q[t][j] * p[j] }
            pqp += p[t] * qp[t]
        }
        var maxError: Float = 0
        for t in 0..<k { maxError = max(maxError, Swift.abs(qp[t] - pqp)) }
        if maxError < eps { break }
        for t in 0..<k {
            let diff = (-qp[t] + pqp) / q[t][t]
            p[t] += diff
            pqp = (pqp + diff * (diff * q[t][t] + 2 * qp[t])) / ((1 + diff) * (1 + diff))
            for j in 0..<k { qp[j] = (qp[j] + diff * q[t][j]) / (1 + diff); p[j] /= 1 + diff }
        }
    }
    return p
}

/// The SVMClassifier kernel: one-vs-one voting over support vectors (or a linear model), optional Platt probabilities.
private struct SVMClassifierModel: Sendable {
    let kernel: SVMKernel
    let supportVectors: [Float], coefficients: [Float], rho: [Float], probA: [Float], probB: [Float]
    let vectorsPerClass: [Int], starts: [Int]
    let classes: Int, features: Int
    let transform: PostTransform
    let twoLabels: Bool, weightsAllPositive: Bool

    /// (class index, score row) for one input row.
    func classify(_ x: UnsafePointer<Float>) -> (Int, [Float]) {
        let vectorCount = vectorsPerClass.reduce(0, +)
        var scores: [Float] = []
        var votes: [Float]? = nil
        if vectorCount > 0 {
            let kernels = supportVectors.withUnsafeBufferPointer { sv in
                (0..<vectorCount).map { kernel(x, sv.baseAddress! + $0 * features, features) }
            }
            var v = [Float](repeating: 0, count: classes)
            var evals = 0
            for i in 0..<classes {
                for j in (i + 1)..<max(classes, i + 1) {
                    var s = rho[min(evals, rho.count - 1)]
                    for k in 0..<vectorsPerClass[i] { s += coefficients[(j - 1) * vectorCount + starts[i] + k] * kernels[starts[i] + k] }
                    for k in 0..<vectorsPerClass[j] { s += coefficients[i * vectorCount + starts[j] + k] * kernels[starts[j] + k] }
                    scores.append(s)
                    if s > 0 { v[i] += 1 } else { v[j] += 1 }
                    evals += 1
                }
            }
            votes = v
            if !probA.isEmpty {
                var r = [[Float]](repeating: [Float](repeating: 0, count: classes), count: classes)
                var index = 0
                for i in 0..<classes {
                    for j in (i + 1)..<max(classes, i + 1) {
                        let value = scores[index] * probA[index] + (index < probB.count ? probB[index] : 0)
                        let logistic = 1 / (1 + Foundation.exp(-value))
                        let p = min(max(1 - logistic, 1e-7), 1 - 1e-7)
                        r[i][j] = p; r[j][i] = 1 - p
                        index += 1
                    }
                }
                scores = multiclassProbability(classes, r)
            }
        } else {
            scores = coefficients.withUnsafeBufferPointer { c in
                (0..<classes).map { rho[0] + kernel(x, c.baseAddress! + $0 * features, features) }
            }
        }
        let ranked = votes ?? scores
        var best = 0
        for i in ranked.indices where ranked[i] > ranked[best] { best = i }
        let maxWeight = ranked.isEmpty ? 0 : ranked[best]
        var picked = best
        var secondClass = false
        if rho.count == 1 {
            if twoLabels {
                secondClass = true
                if probA.isEmpty && weightsAllPositive && maxWeight >= 0.5 { picked = 1 }
            } else {
                picked = maxWeight > 0 ? 1 : 0
            }
        }
        var out = scores
        if out.count >= 2 {
            out.withUnsafeMutableBufferPointer { transform.apply($0) }
        } else if out.count == 1 {
            let s = out[0]
            if transform == .probit {
                out.withUnsafeMutableBufferPointer { transform.apply($0) }
            } else if secondClass {
                out = [-s, s]
                out.withUnsafeMutableBufferPointer { transform.apply($0) }
            }
        }
        return (picked, out)
    }
}

let svmOperators: OperatorTable = [
    "SVMClassifier": { ctx in
        let labels = try ClassLabels(ctx, intsName: "classlabels_ints")
        let vectorsPerClass = try ctx.ints("vectors_per_class") ?? []
        let vectorCount = vectorsPerClass.reduce(0, +)
        let coefficients = try ctx.floats("coefficients") ?? [], supportVectors = try ctx.floats("support_vectors") ?? []
        let rho = try ctx.floats("rho") ?? [0]
        let classes = max(labels.count, 1)
        guard !rho.isEmpty, !coefficients.isEmpty else { throw ctx.error(.invalidModel, "rho and coefficients are required") }
        let features: Int
        if vectorCount > 0 {
            guard vectorsPerClass.count == classes, supportVectors.count % vectorCount == 0,
                  coefficients.count == (classes - 1) * vectorCount else {
                throw ctx.error(.invalidModel, "support vectors (\(supportVectors.count) values, \(vectorCount) vectors) and " +
                                "\(coefficients.count) coefficients do not fit \(classes) classes")
            }
            features = supportVectors.count / vectorCount
        } else {
            guard coefficients.count % classes == 0 else {
                throw ctx.error(.invalidModel, "\(coefficients.count) coefficients cannot be split into \(classes) classes")
            }
            features = coefficients.count / classes
        }
        var starts: [Int] = []
        var running = 0
        for c in vectorsPerClass { starts.append(running); running += c }
        let model = SVMClassifierModel(
            kernel: try SVMKernel(ctx, forceLinear: vectorCount == 0), supportVectors: supportVectors, coefficients: coefficients, rho: rho,
            probA: try ctx.floats("prob_a") ?? [], probB: try ctx.floats("prob_b") ?? [], vectorsPerClass: vectorsPerClass, starts: starts,
            classes: classes, features: features, transform: try PostTransform(ctx), twoLabels: labels.count == 2,
            weightsAllPositive: (coefficients.min() ?? 0) >= 0)
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            let (rows, columns) = try matrixShape(x, ctx)
            guard columns == features else { throw ctx.error(.executionFailed, "input has \(columns) features; the model expects \(features)") }
            let values = try floatValues(x, ctx)
            var picked: [Int] = [], scores: [Float] = []
            var width = 0
            values.withUnsafeBufferPointer { v in
                for r in 0..<rows {
                    let (label, row) = model.classify(v.baseAddress! + r * columns)
                    picked.append(label); scores += row; width = row.count
                }
            }
            let labelTensor: Tensor
            if labels.count == 0 {
                labelTensor = Tensor(shape: [rows], scalars: picked.map { Int64($0) })
            } else {
                labelTensor = labels.tensor(picked)
            }
            return [labelTensor, Tensor(shape: [rows, width], scalars: scores)]
        }
    },
    "SVMRegressor": { ctx in
        let supports = try ctx.int("n_supports", 0)
        let coefficients = try ctx.floats("coefficients") ?? [], supportVectors = try ctx.floats("support_vectors") ?? []
        let rho = (try ctx.floats("rho") ?? [0]).first ?? 0
        let oneClass = try ctx.int("one_class", 0) != 0
        let kernel = try SVMKernel(ctx, forceLinear: supports == 0)
        let transform = try PostTransform(ctx)
        let features = supports > 0 ? supportVectors.count / max(supports, 1) : coefficients.count
        guard supports == 0 || (supportVectors.count == supports * features && coefficients.count == supports) else {
            throw ctx.error(.invalidModel, "\(supports) supports do not match \(supportVectors.count) vector values and \(coefficients.count) coefficients")
        }
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            let (rows, columns) = try matrixShape(x, ctx)
            guard columns == features else { throw ctx.error(.executionFailed, "input has \(columns) features; the model expects \(features)") }
            let values = try floatValues(x, ctx)
            var out = [Float](repeating: 0, count: rows)
            values.withUnsafeBufferPointer { v in
                supportVectors.withUnsafeBufferPointer { sv in
                    coefficients.withUnsafeBufferPointer { c in
                        for r in 0..<rows {
                            let row = v.baseAddress! + r * columns
                            var s: Float = 0
                            if supports > 0 {
                                for j in 0..<supports { s += c[j] * kernel(row, sv.baseAddress! + j * features, features) }
                            } else {
                                s = kernel(row, c.baseAddress!, features)
                            }
                            s += rho
                            out[r] = oneClass ? (s > 0 ? 1 : -1) : s
                        }
                    }
                }
            }
            if transform != .none {
                out.withUnsafeMutableBufferPointer { p in
                    for r in 0..<rows { transform.apply(UnsafeMutableBufferPointer(rebasing: p[r..<(r + 1)])) }
                }
            }
            return [Tensor(shape: [rows, 1], scalars: out)]
        }
    },
]
