import Foundation
import Tensor

/// Einsum by direct summation over every label combination (correct for any equation; meant for small contractions).
func einsum(_ equation: String, _ operands: [Tensor], _ ctx: OpContext) throws -> Tensor {
    let compact = equation.filter { $0 != " " }
    let sides = compact.components(separatedBy: "->")
    let terms = sides[0].components(separatedBy: ",")
    guard terms.count == operands.count, sides.count <= 2 else {
        throw ctx.error(.executionFailed, "equation '\(equation)' has \(terms.count) terms for \(operands.count) inputs")
    }
    // Ellipsis dims become labels "0", "1", ... aligned from the right across operands.
    var ellipsisRank = 0
    for (term, t) in zip(terms, operands) where term.contains("...") {
        ellipsisRank = max(ellipsisRank, t.rank - (term.count - 3))
    }
    let ellipsisLabels = (0..<ellipsisRank).map { Character(UnicodeScalar(0x2460 + $0)!) }
    func expand(_ term: String, rank: Int) throws -> [Character] {
        guard term.contains("...") else { return Array(term) }
        let parts = term.components(separatedBy: "...")
        let covered = rank - (term.count - 3)
        guard covered >= 0 else { throw ctx.error(.executionFailed, "term '\(term)' does not fit rank \(rank)") }
        return Array(parts[0]) + Array(ellipsisLabels.suffix(covered)) + Array(parts[1])
    }
    var sizes: [Character: Int] = [:]
    var labelled: [[Character]] = []
    for (term, t) in zip(terms, operands) {
        let labels = try expand(term, rank: t.rank)
        guard labels.count == t.rank else { throw ctx.error(.executionFailed, "term '\(term)' has \(labels.count) labels for shape \(t.shape)") }
        for (label, dim) in zip(labels, t.shape) {
            if let known = sizes[label], known != dim {
                guard known == 1 || dim == 1 else { throw ctx.error(.executionFailed, "label '\(label)' is \(known) and \(dim)") }
                sizes[label] = max(known, dim)
            } else if sizes[label] == nil { sizes[label] = dim }
        }
        labelled.append(labels)
    }
    let output: [Character]
    if sides.count == 2 {
        output = try expand(sides[1], rank: sides[1].count - (sides[1].contains("...") ? 3 : 0) + (sides[1].contains("...") ? ellipsisRank : 0))
    } else {
        let counts = labelled.flatMap { $0 }.reduce(into: [Character: Int]()) { $0[$1, default: 0] += 1 }
        output = ellipsisLabels + counts.filter { $0.value == 1 && !ellipsisLabels.contains($0.key) }.map(\.key).sorted()
    }
    // A repeated output label would index one operand axis twice over (and past its end).
    guard Set(output).count == output.count else { throw ctx.error(.executionFailed, "equation '\(equation)' repeats a label in its output") }
    let summed = Array(Set(labelled.flatMap { $0 }).subtracting(output)).sorted()
    let all = output + summed
    let dims = try all.map { label -> Int in
        guard let d = sizes[label] else { throw ctx.error(.executionFailed, "output label '\(label)' appears in no input") }
        return d
    }
    let values = try operands.map { try castTensor($0, to: .float64, ctx).scalars(as: Double.self) }
    // Per operand, the stride each label contributes (0 when absent or broadcast).
    let strides: [[Int]] = zip(labelled, operands).map { labels, t in
        let own = t.strides
        return all.map { label in
            var s = 0
            for (k, l) in labels.enumerated() where l == label && t.shape[k] != 1 { s += own[k] }
            return s
        }
    }
    let outCount = output.reduce(1) { $0 * sizes[$1]! }
    let sumCount = summed.reduce(1) { $0 * sizes[$1]! }
    var result = [Double](repeating: 0, count: outCount)
    var index = [Int](repeating: 0, count: all.count)
    for o in 0..<outCount {
        var acc: Double = 0
        for s in 0..<sumCount {
            var rem = o
            for k in stride(from: output.count - 1, through: 0, by: -1) { index[k] = rem % dims[k]; rem /= dims[k] }
            rem = s
            for k in stride(from: all.count - 1, through: output.count, by: -1) { index[k] = rem % dims[k]; rem /= dims[k] }
            var product: Double = 1
            for (n, v) in values.enumerated() {
                var offset = 0
                for k in 0..<all.count { offset += index[k] * strides[n][k] }
                product *= v[offset]
            }
            acc += product
        }
        result[o] = acc
    }
    return try castTensor(Tensor(shape: output.map { sizes[$0]! }, scalars: result), to: operands[0].dtype, ctx)
}

let einsumOperators: OperatorTable = [
    "Einsum": { ctx in
        let equation = try ctx.string("equation", "")
        guard !equation.isEmpty else { throw ctx.error(.invalidModel, "attribute 'equation' is required") }
        return PreparedKernel { inputs in [try einsum(equation, inputs.values.compactMap { $0 }, ctx)] }
    },
]
