import Foundation
import Tensor

/// StringNormalizer's case change of one UTF-8 string (Unicode default case mapping).
private func changeCase(_ bytes: [UInt8], upper: Bool) -> [UInt8] {
    let text = String(decoding: bytes, as: UTF8.self)
    return Array((upper ? text.uppercased() : text.lowercased()).utf8)
}

/// The n-gram tables of one TfIdfVectorizer: every pooled n-gram (lengths within [min, max]) with its output index,
/// and every prefix of one, which is where a walk along the input stops (as the reference's trie walk does).
private struct NGramPool {
    var outputIndex: [[Int64]: Int] = [:]
    var prefixes: Set<[Int64]> = []
}

let textOperators: OperatorTable = [
    // StringSplit (opset 20): Python's str.split per element (runs of whitespace when the delimiter is empty, at most
    // maxsplit splits), padded with empty strings to the longest; Z counts each element's parts.
    "StringSplit": { ctx in
        let delimiter = Array(try ctx.string("delimiter", "").utf8)
        let maxSplit = ctx.has("maxsplit") ? try ctx.int("maxsplit", 0) : nil
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            guard x.dtype == .string else { throw ctx.error(.unsupportedDType, "input must be strings, got \(x.dtype)") }
            let parts = x.strings.map { splitString($0, delimiter: delimiter, maxSplit: maxSplit) }
            let width = parts.map(\.count).max() ?? 0
            let padded = parts.flatMap { $0 + Array(repeating: [UInt8](), count: width - $0.count) }
            return [Tensor(shape: x.shape + [width], strings: padded), Tensor(shape: x.shape, scalars: parts.map { Int64($0.count) })]
        }
    },
    // RegexFullMatch (opset 20): whether each whole string matches the pattern (ICU syntax, which covers RE2's usual
    // constructs).
    "RegexFullMatch": { ctx in
        let pattern = try ctx.string("pattern", "")
        let regex: NSRegularExpression
        // \A(?:...)\z: the whole string, not a prefix, and not up to a final newline as $ would allow.
        do { regex = try NSRegularExpression(pattern: "\\A(?:" + pattern + ")\\z") } catch {
            throw ctx.error(.invalidModel, "pattern '\(pattern)' is not a valid regular expression")
        }
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            guard x.dtype == .string else { throw ctx.error(.unsupportedDType, "input must be strings, got \(x.dtype)") }
            return [Tensor(shape: x.shape, scalars: x.strings.map { bytes -> Bool in
                let text = String(decoding: bytes, as: UTF8.self)
                return regex.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)) != nil
            })]
        }
    },
    // StringConcat (opset 20): element-wise concatenation with NumPy broadcasting.
    "StringConcat": { ctx in PreparedKernel { inputs in
        let a = try inputs.required(0, ctx), b = try inputs.required(1, ctx)
        guard a.dtype == .string, b.dtype == .string else { throw ctx.error(.unsupportedDType, "inputs must be strings, got \(a.dtype) and \(b.dtype)") }
        let (shape, values) = try broadcastStrings(ctx, a, b) { $0 + $1 }
        return [Tensor(shape: shape, strings: values)]
    } },
    // StringNormalizer: drops stopwords (case-insensitively unless is_case_sensitive) from [C] or [1, C] strings, then
    // changes case; an input left empty becomes one empty string.
    "StringNormalizer": { ctx in
        let action = try ctx.string("case_change_action", "NONE")
        guard ["NONE", "LOWER", "UPPER"].contains(action) else { throw ctx.unsupported("case_change_action", "'\(action)' (expected NONE, LOWER or UPPER)") }
        let caseSensitive = try ctx.int("is_case_sensitive", 0) == 1
        let locale = try ctx.string("locale", "")
        // Unicode's default case mapping is every locale's except those with their own rules (Turkish dotted i, ...).
        if ["tr", "az", "lt"].contains(where: { locale.lowercased().hasPrefix($0) }) {
            throw ctx.unsupported("locale", "'\(locale)' (locale-specific case rules are not implemented)")
        }
        var stopwords = Set<[UInt8]>()
        if case .strings(let words)? = ctx.node.attributes["stopwords"] {
            for word in words { stopwords.insert(caseSensitive ? word : changeCase(word, upper: false)) }
        }
        let stopwordSet = stopwords
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            guard x.dtype == .string, x.rank == 1 || (x.rank == 2 && x.shape[0] == 1) else {
                throw ctx.error(.executionFailed, "input must be strings of shape [C] or [1, C], got \(x)")
            }
            var kept = x.strings.filter { !stopwordSet.contains(caseSensitive ? $0 : changeCase($0, upper: false)) }
            if action != "NONE" { kept = kept.map { changeCase($0, upper: action == "UPPER") } }
            if kept.isEmpty { kept = [[]] }
            return [Tensor(shape: x.rank == 1 ? [kept.count] : [1, kept.count], strings: kept)]
        }
    },
    // TfIdfVectorizer: counts the pooled n-grams (with up to max_skip_count skipped items between elements) of each row
    // of [C] or [N, C] tokens, then weights the counts (TF, IDF, TFIDF).
    "TfIdfVectorizer": { ctx in
        let minGram = try ctx.int("min_gram_length", 0), maxGram = try ctx.int("max_gram_length", 0), maxSkip = try ctx.int("max_skip_count", 0)
        let mode = try ctx.string("mode", "")
        guard ["TF", "IDF", "TFIDF"].contains(mode) else { throw ctx.unsupported("mode", "'\(mode)' (expected TF, IDF or TFIDF)") }
        guard minGram >= 1, maxGram >= minGram, maxGram <= 64, maxSkip >= 0, maxSkip <= 1 << 16 else {
            throw ctx.error(.invalidModel, "gram lengths \(minGram)...\(maxGram) and max_skip_count \(maxSkip) are out of range")
        }
        let counts = try ctx.ints("ngram_counts") ?? [], indexes = try ctx.ints("ngram_indexes") ?? []
        let weights = try ctx.floats("weights")
        // Tokens become Int64 keys: integers as themselves, strings by their position in the pool (others by -1 - never pooled).
        var vocabulary: [[UInt8]: Int64] = [:]
        let pool: [Int64]
        if case .strings(let strings)? = ctx.node.attributes["pool_strings"] {
            pool = strings.map { s in
                if let id = vocabulary[s] { return id }
                let id = Int64(vocabulary.count)
                vocabulary[s] = id
                return id
            }
        } else if case .ints(let ints)? = ctx.node.attributes["pool_int64s"] {
            pool = ints
        } else {
            throw ctx.error(.invalidModel, "one of pool_int64s or pool_strings is required")
        }
        let byStrings = !vocabulary.isEmpty || ctx.node.attributes["pool_strings"] != nil
        guard let largest = indexes.max(), largest >= 0, largest < 1 << 24 else { throw ctx.error(.invalidModel, "ngram_indexes \(indexes) must be non-empty and non-negative") }
        let outputSize = largest + 1
        if let weights, weights.count != indexes.count && weights.count != outputSize {
            throw ctx.error(.invalidModel, "weights has \(weights.count) values for \(indexes.count) pooled n-grams")
        }
        var table = NGramPool()
        var gramId = 0
        for (level, start) in counts.enumerated() {
            let size = level + 1
            let end = level + 1 < counts.count ? counts[level + 1] : pool.count
            guard start >= 0, end <= pool.count, start <= end, (end - start) % size == 0 else {
                throw ctx.error(.invalidModel, "ngram_counts \(counts) does not split a pool of \(pool.count) into \(size)-grams")
            }
            for first in stride(from: start, to: end, by: size) {
                defer { gramId += 1 }
                guard size >= minGram, size <= maxGram else { continue }
                guard gramId < indexes.count else { throw ctx.error(.invalidModel, "ngram_indexes has \(indexes.count) entries, the pool more n-grams") }
                let gram = Array(pool[first..<(first + size)])
                table.outputIndex[gram] = indexes[gramId]
                for k in 1...size { table.prefixes.insert(Array(gram[0..<k])) }
            }
        }
        let (pooled, tokenIds) = (table, vocabulary)
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            guard x.rank <= 2, byStrings ? x.dtype == .string : (x.dtype == .int64 || x.dtype == .int32) else {
                throw ctx.error(.executionFailed, "input must be \(byStrings ? "strings" : "int32/int64 tokens") of shape [C] or [N, C], got \(x)")
            }
            let rows = x.rank == 2 ? x.shape[0] : 1, width = x.rank == 0 ? 1 : x.shape[x.rank - 1]
            let tokens: [Int64] = byStrings ? x.strings.map { tokenIds[$0] ?? -1 } : x.ints.map { Int64($0) }
            var frequencies = [Int](repeating: 0, count: rows * outputSize)
            for row in 0..<rows where width > 0 {
                let items = tokens[(row * width)..<((row + 1) * width)]
                var smallest = minGram
                for skip in 1...(maxSkip + 1) {
                    for start in 0..<width {
                        if start + skip * (smallest - 1) >= width { break }
                        var gram: [Int64] = []
                        var item = start
                        while gram.count < maxGram && item < width {
                            gram.append(items[items.startIndex + item])
                            guard pooled.prefixes.contains(gram) else { break }
                            if gram.count >= smallest, let index = pooled.outputIndex[gram] { frequencies[row * outputSize + index] += 1 }
                            item += skip
                        }
                    }
                    // Unigrams do not depend on the skip: count them on the first pass only.
                    if smallest == 1 {
                        smallest = 2
                        if smallest > maxGram { break }
                    }
                }
            }
            let values: [Float] = frequencies.enumerated().map { p, f in
                // As onnxruntime and ONNX's reference: the weight of output position i is weights[i].
                let w = weights.map { p % outputSize < $0.count ? $0[p % outputSize] : 1 }
                switch mode {
                case "TF": return Float(f)
                case "IDF": return f > 0 ? (w ?? 1) : 0
                default: return Float(f) * (w ?? 1)
                }
            }
            return [Tensor(shape: x.rank == 2 ? [rows, outputSize] : [outputSize], scalars: values)]
        }
    },
]

/// Python's `str.split(delimiter or None, maxsplit)` on UTF-8 bytes: with no delimiter, runs of ASCII whitespace
/// separate parts and leading or trailing whitespace gives none; with one, every occurrence separates (empty parts
/// kept). At most `maxSplit` splits when given (the rest stays in the last part).
func splitString(_ s: [UInt8], delimiter: [UInt8], maxSplit: Int?) -> [[UInt8]] {
    var parts: [[UInt8]] = []
    let limit = maxSplit.map { $0 < 0 ? Int.max : $0 } ?? Int.max
    if delimiter.isEmpty {
        let space: (UInt8) -> Bool = { $0 == 0x20 || ($0 >= 0x09 && $0 <= 0x0D) || $0 == 0x1C || $0 == 0x1D || $0 == 0x1E || $0 == 0x1F }
        var i = 0
        while i < s.count {
            while i < s.count && space(s[i]) { i += 1 }
            guard i < s.count else { break }
            if parts.count == limit {
                var end = s.count
                while end > i && space(s[end - 1]) { end -= 1 }
                parts.append(Array(s[i..<end]))
                break
            }
            var j = i
            while j < s.count && !space(s[j]) { j += 1 }
            parts.append(Array(s[i..<j]))
            i = j
        }
        return parts
    }
    var start = 0, i = 0
    while i + delimiter.count <= s.count && parts.count < limit {
        if Array(s[i..<(i + delimiter.count)]) == delimiter {
            parts.append(Array(s[start..<i]))
            i += delimiter.count
            start = i
        } else {
            i += 1
        }
    }
    parts.append(Array(s[start...]))
    return parts
}
