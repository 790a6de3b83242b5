import Tensor

// The ai.onnx.ml encoders scikit-learn pipelines export for categorical and mixed columns: LabelEncoder (opsets 1,
// 2 and 4), CategoryMapper, OneHotEncoder and FeatureVectorizer, to the ONNX spec (which onnxruntime follows).

/// A category as these operators compare them: a string, an integer, or a float (all NaNs one key, -0 equal to 0).
private enum CategoryKey: Hashable {
    case string([UInt8]), integer(Int64), float(UInt64)

    /// The key of a float value.
    static func of(_ value: Double) -> CategoryKey { .float(value.isNaN ? Double.nan.bitPattern : (value == 0 ? 0 : value.bitPattern)) }
}

/// Every element of `x` as a key; the kind (strings, integers or floats) follows its dtype.
private func categoryKeys(_ x: Tensor) -> [CategoryKey] {
    switch x.dtype {
    case .string: return x.strings.map { .string($0) }
    case .float32, .float64, .float16, .bfloat16: return x.doubles.map { CategoryKey.of($0) }
    default: return x.doubles.map { .integer(Int64($0)) }
    }
}

/// A list of mapped values (keys or results), with the dtype it produces.
private enum CategoryValues {
    case strings([[UInt8]]), integers([Int64], DType), floats([Double], DType)

    /// Values from `tensor` (any dtype), flattened.
    init(_ tensor: Tensor) {
        switch tensor.dtype {
        case .string: self = .strings(tensor.strings)
        case .float32, .float64, .float16, .bfloat16: self = .floats(tensor.doubles, tensor.dtype)
        default: self = .integers(tensor.doubles.map { Int64($0) }, tensor.dtype)
        }
    }

    var count: Int {
        switch self {
        case .strings(let v): return v.count
        case .integers(let v, _): return v.count
        case .floats(let v, _): return v.count
        }
    }

    var keys: [CategoryKey] {
        switch self {
        case .strings(let v): return v.map { .string($0) }
        case .integers(let v, _): return v.map { .integer($0) }
        case .floats(let v, _): return v.map { CategoryKey.of($0) }
        }
    }

    /// A tensor of `shape` whose element i is value `picks[i]` (an index into these values).
    func gather(_ picks: [Int], shape: [Int], _ ctx: OpContext) throws -> Tensor {
        switch self {
        case .strings(let v): return Tensor(shape: shape, strings: picks.map { v[$0] })
        case .integers(let v, let dtype):
            return try castTensor(Tensor(shape: shape, scalars: picks.map { v[$0] }), to: dtype, ctx)
        case .floats(let v, let dtype):
            return try castTensor(Tensor(shape: shape, scalars: picks.map { v[$0] }), to: dtype, ctx)
        }
    }
}

/// Each key's first position.
private func categoryIndex(_ keys: [CategoryKey]) -> [CategoryKey: Int] {
    var index: [CategoryKey: Int] = [:]
    for (i, key) in keys.enumerated() where index[key] == nil { index[key] = i }
    return index
}

/// Maps each element of X through keys -> values, with `fallback` (one value) for a key not listed.
/// A NaN key matches NaN only when `nanMatches` (keys given as a tensor, opset 4), as onnxruntime does.
private func encode(_ x: Tensor, keys: CategoryValues, values: CategoryValues, fallback: CategoryValues, nanMatches: Bool = false,
                    _ ctx: OpContext) throws -> Tensor {
    guard keys.count == values.count else {
        throw ctx.error(.invalidModel, "\(keys.count) keys but \(values.count) values")
    }
    var index = categoryIndex(keys.keys)
    if !nanMatches { index[CategoryKey.of(.nan)] = nil }
    let missing = values.count
    let picks = categoryKeys(x).map { index[$0] ?? missing }
    let table: CategoryValues
    switch (values, fallback) {
    case (.strings(let v), .strings(let d)): table = .strings(v + d)
    case (.integers(let v, let t), .integers(let d, _)): table = .integers(v + d, t)
    case (.floats(let v, let t), .floats(let d, _)): table = .floats(v + d, t)
    case (.integers(let v, let t), .floats(let d, _)): table = .integers(v + d.map { Int64($0) }, t)
    case (.floats(let v, let t), .integers(let d, _)): table = .floats(v + d.map { Double($0) }, t)
    default: throw ctx.error(.invalidModel, "the default value's type does not match the values' type")
    }
    return try table.gather(picks, shape: x.shape, ctx)
}

/// Which of the `keys_*` / `values_*` lists (or tensors) a LabelEncoder node gives.
private func labelList(_ ctx: OpContext, _ prefix: String) throws -> CategoryValues? {
    if let t = try ctx.tensor("\(prefix)_tensor") { return CategoryValues(t) }
    if case .strings(let v)? = ctx.node.attributes["\(prefix)_strings"] { return .strings(v) }
    if let v = try ctx.ints("\(prefix)_int64s") { return .integers(v.map { Int64($0) }, .int64) }
    if let v = try ctx.floats("\(prefix)_floats") { return .floats(v.map { Double($0) }, .float32) }
    return nil
}

/// The default of a LabelEncoder whose values are `values`.
private func labelDefault(_ ctx: OpContext, for values: CategoryValues) throws -> CategoryValues {
    if let t = try ctx.tensor("default_tensor") { return CategoryValues(t) }
    switch values {
    case .strings: return .strings([Array(try ctx.string("default_string", "_Unused").utf8)])
    case .integers(_, let dtype): return .integers([Int64(try ctx.int("default_int64", -1))], dtype)
    case .floats(_, let dtype): return .floats([Double(try ctx.float("default_float", -0.0))], dtype)
    }
}

/// Paired strings and integers mapped either way, as the input's dtype asks (CategoryMapper, and LabelEncoder opset 1
/// with the classes' indices): unknown strings give default_int64, unknown integers default_string.
private func stringIntegerMap(_ ctx: OpContext, strings: [[UInt8]], integers: [Int64]) throws -> PreparedKernel {
    let names = CategoryValues.strings(strings), numbers = CategoryValues.integers(integers, .int64)
    let defaultNumber = CategoryValues.integers([Int64(try ctx.int("default_int64", -1))], .int64)
    let defaultName = CategoryValues.strings([Array(try ctx.string("default_string", "_Unused").utf8)])
    return PreparedKernel { inputs in
        let x = try inputs.required(0, ctx)
        return x.dtype == .string ? [try encode(x, keys: names, values: numbers, fallback: defaultNumber, ctx)]
            : [try encode(x, keys: numbers, values: names, fallback: defaultName, ctx)]
    }
}

/// LabelEncoder, CategoryMapper, OneHotEncoder and FeatureVectorizer.
let mlEncoderOperators: OperatorTable = [
    "LabelEncoder": { ctx in
        if case .strings(let classes)? = ctx.node.attributes["classes_strings"] {
            // Opset 1: strings to their index in classes_strings, or indices back to strings.
            return try stringIntegerMap(ctx, strings: classes, integers: classes.indices.map { Int64($0) })
        }
        guard let keys = try labelList(ctx, "keys"), let values = try labelList(ctx, "values") else {
            throw ctx.error(.invalidModel, "LabelEncoder needs keys_* and values_* attributes (or classes_strings)")
        }
        let fallback = try labelDefault(ctx, for: values)
        let nanMatches = ctx.has("keys_tensor")
        return PreparedKernel { inputs in
            [try encode(inputs.required(0, ctx), keys: keys, values: values, fallback: fallback, nanMatches: nanMatches, ctx)]
        }
    },
    "CategoryMapper": { ctx in
        guard case .strings(let names)? = ctx.node.attributes["cats_strings"], let ids = try ctx.ints("cats_int64s"), names.count == ids.count else {
            throw ctx.error(.invalidModel, "CategoryMapper needs cats_strings and cats_int64s of the same length")
        }
        return try stringIntegerMap(ctx, strings: names, integers: ids.map { Int64($0) })
    },
    "OneHotEncoder": { ctx in
        let categories: CategoryValues
        if case .strings(let v)? = ctx.node.attributes["cats_strings"] { categories = .strings(v) }
        else if let v = try ctx.ints("cats_int64s") { categories = .integers(v.map { Int64($0) }, .int64) }
        else { throw ctx.error(.invalidModel, "OneHotEncoder needs cats_strings or cats_int64s") }
        let zeros = try ctx.int("zeros", 1) == 1
        let index = categoryIndex(categories.keys)
        let width = categories.count
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            let keys: [CategoryKey]
            switch categories {
            case .strings:
                guard x.dtype == .string else { throw ctx.error(.unsupportedDType, "X must be strings for cats_strings, got \(x.dtype)") }
                keys = categoryKeys(x)
            default:
                guard x.dtype != .string else { throw ctx.error(.unsupportedDType, "X must be numeric for cats_int64s, got strings") }
                keys = x.doubles.map { .integer(Int64($0)) }
            }
            return [try Tensor.makeFloat(shape: x.shape + [width]) { out in
                out.initialize(repeating: 0, count: keys.count * width)
                for (i, key) in keys.enumerated() {
                    if let hot = index[key] { out[i * width + hot] = 1 }
                    else if !zeros { throw ctx.error(.executionFailed, "element \(i) is not one of the \(width) categories (zeros = 0)") }
                }
            }]
        }
    },
    "FeatureVectorizer": { ctx in
        let dimensions = try ctx.ints("inputdimensions") ?? []
        return PreparedKernel { inputs in
            let xs = try (0..<ctx.node.inputs.count).map { try inputs.required($0, ctx) }
            guard dimensions.count == xs.count else {
                throw ctx.error(.invalidModel, "inputdimensions has \(dimensions.count) values for \(xs.count) inputs")
            }
            let rows = xs.first.map { $0.rank <= 1 ? 1 : $0.shape[0] } ?? 1
            let width = dimensions.reduce(0, +)
            let columns = try xs.map { x -> [Double] in
                guard x.dtype != .string else { throw ctx.error(.unsupportedDType, "inputs must be numeric, got strings") }
                guard (x.rank <= 1 ? 1 : x.shape[0]) == rows else { throw ctx.error(.executionFailed, "inputs have different row counts") }
                return x.doubles
            }
            return [Tensor.makeFloat(shape: [rows, width]) { out in
                out.initialize(repeating: 0, count: rows * width)
                var start = 0
                for (k, values) in columns.enumerated() {
                    let given = rows == 0 ? 0 : values.count / rows, kept = min(given, dimensions[k])
                    for r in 0..<rows { for c in 0..<kept { out[r * width + start + c] = Float(values[r * given + c]) } }
                    start += dimensions[k]
                }
            }]
        }
    },
]
