import Foundation
import Tensor

/// Resize settings fixed at compile time.
struct ResizeAttributes: Sendable {
    var mode = "nearest"
    var coordinateMode = "half_pixel"
    var nearestMode = "round_prefer_floor"
    var cubicA: Float = -0.75
    var excludeOutside = false
    var extrapolation: Float = 0
    var axes: [Int]?
    var aspectPolicy = "stretch"
    var antialias = false
}

/// One interpolation tap: a source index and its weight.
struct Tap { var index: Int; var weight: Float }

private func cubicWeights(_ t: Float, _ a: Float) -> [Float] {
    func k(_ x: Float) -> Float {
        let x = abs(x)
        if x <= 1 { return ((a + 2) * x - (a + 3)) * x * x + 1 }
        if x < 2 { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a }
        return 0
    }
    return [k(t + 1), k(t), k(1 - t), k(2 - t)]
}

/// Source taps of every output position on one axis, plus which positions extrapolate (tf_crop_and_resize).
func axisTaps(input: Int, output: Int, resizedLength: Float, scale: Float, roiStart: Float, roiEnd: Float, _ r: ResizeAttributes) -> ([[Tap]], [Bool]) {
    var taps: [[Tap]] = [], outside: [Bool] = []
    for o in 0..<output {
        let x = Float(o)
        var src: Float
        switch r.coordinateMode {
        case "asymmetric": src = x / scale
        case "align_corners": src = output == 1 ? 0 : x * Float(input - 1) / (resizedLength - 1)
        case "pytorch_half_pixel": src = output > 1 ? (x + 0.5) / scale - 0.5 : 0
        case "tf_half_pixel_for_nn": src = (x + 0.5) / scale
        case "half_pixel_symmetric":
            let adjustment = Float(output) / (scale * Float(input))
            let center = Float(input) / 2
            src = center * (1 - adjustment) + (x + 0.5) / scale - 0.5
        case "tf_crop_and_resize":
            src = output > 1 ? roiStart * Float(input - 1) + x * (roiEnd - roiStart) * Float(input - 1) / (resizedLength - 1)
                : 0.5 * (roiStart + roiEnd) * Float(input - 1)
        default: src = (x + 0.5) / scale - 0.5
        }
        src = saneCoordinate(src)
        outside.append(r.coordinateMode == "tf_crop_and_resize" && (src < 0 || src > Float(input - 1)))
        let clampIndex = { (i: Int) in Swift.min(Swift.max(i, 0), input - 1) }
        if r.antialias && scale < 1 && r.mode != "nearest" {
            // Downsampling with antialias widens the filter by 1/scale; taps sit at base + i with the ratio in (0, 1].
            let base = src == Foundation.floor(src) ? Int(src) - 1 : Int(Foundation.floor(src))
            let ratio = src - Float(base)
            let first = r.mode == "linear" ? Int(Foundation.floor(-1 / scale)) + 1 : Int(Foundation.floor(-2 / scale)) + 1
            let count = 2 - 2 * first
            var list: [Tap] = []
            for k in 0..<count {
                let offset = first + k
                let x = Swift.abs((Float(offset) - ratio) * scale)
                var weight: Float
                if r.mode == "linear" {
                    weight = Swift.max(0, 1 - x)
                } else {
                    let a = r.cubicA
                    weight = x <= 1 ? ((a + 2) * x - (a + 3)) * x * x + 1 : (x < 2 ? ((a * x - 5 * a) * x + 8 * a) * x - 4 * a : 0)
                }
                let index = base + offset
                if r.excludeOutside && (index < 0 || index >= input) { weight = 0 }
                list.append(Tap(index: clampIndex(index), weight: weight))
            }
            let total = list.reduce(0) { $0 + $1.weight }
            taps.append(total == 0 ? list : list.map { Tap(index: $0.index, weight: $0.weight / total) })
            continue
        }
        switch r.mode {
        case "nearest":
            var i: Int
            switch r.nearestMode {
            case "floor": i = Int(Foundation.floor(src))
            case "ceil": i = Int(Foundation.ceil(src))
            case "round_prefer_ceil": i = Int(Foundation.floor(src + 0.5))
            default: i = src - Foundation.floor(src) == 0.5 ? Int(Foundation.floor(src)) : Int(src.rounded(.toNearestOrAwayFromZero))
            }
            taps.append([Tap(index: clampIndex(i), weight: 1)])
        case "linear":
            let s = r.coordinateMode == "tf_crop_and_resize" ? src : Swift.min(Swift.max(src, 0), Float(input - 1))
            let f = Foundation.floor(s), t = s - f
            taps.append([Tap(index: clampIndex(Int(f)), weight: 1 - t), Tap(index: clampIndex(Int(f) + 1), weight: t)])
        default: // cubic
            let f = Foundation.floor(src), t = src - f
            let w = cubicWeights(t, r.cubicA)
            var list = (0..<4).map { Tap(index: Int(f) - 1 + $0, weight: w[$0]) }
            if r.excludeOutside {
                list = list.map { ($0.index < 0 || $0.index >= input) ? Tap(index: 0, weight: 0) : $0 }
                let total = list.reduce(0) { $0 + $1.weight }
                if total != 0 { list = list.map { Tap(index: $0.index, weight: $0.weight / total) } }
            } else {
                list = list.map { Tap(index: clampIndex($0.index), weight: $0.weight) }
            }
            taps.append(list)
        }
    }
    return (taps, outside)
}

/// Resizes float32 `x` to `outShape` one axis at a time (separable nearest/linear/cubic).
/// `scalesGiven` means lengths came from scales: align_corners then divides by the unrounded length, as the ONNX reference does.
/// `direct: false` skips the direct spatial kernel (`resizePlanes`), leaving the separable path its tests compare against.
func resize(_ x: Tensor, outShape: [Int], scales: [Float], scalesGiven: Bool = false, roi: [Float]?, _ r: ResizeAttributes, _ ctx: OpContext,
            direct: Bool = true) throws -> Tensor {
    guard x.dtype == .float32 else { throw ctx.error(.unsupportedDType, "input is \(x.dtype), expected float32") }
    if direct, let direct = resizePlanes(x, outShape: outShape, scales: scales, scalesGiven: scalesGiven, r) { return direct }
    var current = x
    var outsideMasks: [(Int, [Bool])] = []
    for axis in 0..<x.rank {
        let input = x.shape[axis], output = outShape[axis]
        let crop = r.coordinateMode == "tf_crop_and_resize"
        if input == output && scales[axis] == 1 && !crop { continue }
        if output == 0 || input == 0 {
            var shape = current.shape
            shape[axis] = output
            current = Tensor(dtype: .float32, shape: shape)
            continue
        }
        let roiStart = roi.map { $0[axis] } ?? 0, roiEnd = roi.map { $0[axis + x.rank] } ?? 1
        let length = scalesGiven ? Float(input) * scales[axis] : Float(output)
        let (taps, outside) = axisTaps(input: input, output: output, resizedLength: length, scale: scales[axis], roiStart: roiStart, roiEnd: roiEnd, r)
        if outside.contains(true) { outsideMasks.append((axis, outside)) }
        var shape = current.shape
        shape[axis] = output
        let outer = shape[..<axis].reduce(1, *), inner = shape[(axis + 1)...].reduce(1, *)
        let source = current
        current = Tensor.makeFloat(shape: shape) { dst in
            source.floatPointer { src in
                for o in 0..<outer {
                    for (j, list) in taps.enumerated() {
                        let d = dst + (o * output + j) * inner
                        d.initialize(repeating: 0, count: inner)
                        for tap in list where tap.weight != 0 {
                            let s = src + (o * input + tap.index) * inner
                            let w = tap.weight
                            for i in 0..<inner { d[i] += w * s[i] }
                        }
                    }
                }
            }
        }
    }
    if !outsideMasks.isEmpty {
        let strides = current.strides
        let value = r.extrapolation
        current.withUnsafeMutableBufferPointer(of: Float.self) { p in
            for flat in 0..<p.count {
                for (axis, mask) in outsideMasks where mask[(flat / strides[axis]) % outShape[axis]] {
                    p[flat] = value
                    break
                }
            }
        }
    }
    return current
}

let resizeOperators: OperatorTable = [
    "Resize": { ctx in
        var r = ResizeAttributes()
        r.mode = try ctx.string("mode", "nearest")
        if ctx.opset >= 11 {
            r.coordinateMode = try ctx.string("coordinate_transformation_mode", "half_pixel")
            r.nearestMode = try ctx.string("nearest_mode", "round_prefer_floor")
        } else {
            r.coordinateMode = "asymmetric"
            r.nearestMode = "floor"
        }
        r.cubicA = try ctx.float("cubic_coeff_a", -0.75)
        r.excludeOutside = try ctx.int("exclude_outside", 0) == 1
        r.extrapolation = try ctx.float("extrapolation_value", 0)
        r.axes = try ctx.ints("axes")
        r.aspectPolicy = try ctx.string("keep_aspect_ratio_policy", "stretch")
        guard ["nearest", "linear", "cubic"].contains(r.mode) else { throw ctx.unsupported("mode", "'\(r.mode)'") }
        guard ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"]
            .contains(r.coordinateMode) else { throw ctx.unsupported("coordinate_transformation_mode", "'\(r.coordinateMode)'") }
        guard ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"].contains(r.nearestMode) else { throw ctx.unsupported("nearest_mode", "'\(r.nearestMode)'") }
        guard ["stretch", "not_larger", "not_smaller"].contains(r.aspectPolicy) else { throw ctx.unsupported("keep_aspect_ratio_policy", "'\(r.aspectPolicy)'") }
        r.antialias = try ctx.int("antialias", 0) != 0
        let attrs = r
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            let scalesT = ctx.opset >= 11 ? inputs[2] : inputs[1]
            let sizesT = ctx.opset >= 11 ? inputs[3] : nil
            let roiT = ctx.opset >= 11 ? inputs[1] : nil
            let axes = try (attrs.axes ?? Array(0..<x.rank)).map { try ctx.axis($0, rank: x.rank) }
            var scales = [Float](repeating: 1, count: x.rank)
            var outShape = x.shape
            if let sizesT, sizesT.count > 0 {
                let sizes = sizesT.ints
                guard sizes.count == axes.count else { throw ctx.error(.executionFailed, "sizes \(sizes) do not match \(axes.count) axes") }
                if attrs.aspectPolicy == "stretch" {
                    for (k, a) in axes.enumerated() { outShape[a] = sizes[k]; scales[a] = Float(sizes[k]) / Float(x.shape[a]) }
                } else {
                    let ratios = axes.enumerated().map { Float(sizes[$0.offset]) / Float(x.shape[$0.element]) }
                    let s = attrs.aspectPolicy == "not_larger" ? ratios.min()! : ratios.max()!
                    for a in axes { scales[a] = s; outShape[a] = try ctx.dimension((s * Float(x.shape[a])).rounded(.toNearestOrEven), "output size") }
                }
            } else if let scalesT, scalesT.count > 0 {
                let given = scalesT.doubles.map { Float($0) }
                guard given.count == axes.count else { throw ctx.error(.executionFailed, "scales \(given) do not match \(axes.count) axes") }
                for (k, a) in axes.enumerated() {
                    guard given[k] > 0 else { throw ctx.error(.executionFailed, "scales must be positive, got \(given)") }
                    scales[a] = given[k]
                    outShape[a] = try ctx.dimension(Foundation.floor(Float(x.shape[a]) * given[k]), "output size")
                }
            } else {
                throw ctx.error(.invalidModel, "one of scales or sizes is required")
            }
            var roi: [Float]?
            if attrs.coordinateMode == "tf_crop_and_resize", let roiT {
                let given = roiT.doubles.map { Float($0) }
                if given.count == 2 * x.rank { roi = given } else if given.count == 2 * axes.count {
                    var full = [Float](repeating: 0, count: x.rank) + [Float](repeating: 1, count: x.rank)
                    for (k, a) in axes.enumerated() { full[a] = given[k]; full[a + x.rank] = given[k + axes.count] }
                    roi = full
                } else { throw ctx.error(.executionFailed, "roi \(given) does not match rank \(x.rank)") }
            }
            return [try resize(x, outShape: try ctx.checkedShape(outShape), scales: scales, scalesGiven: sizesT == nil || sizesT!.count == 0, roi: roi, attrs, ctx)]
        }
    },
    "Upsample": { ctx in
        var r = ResizeAttributes()
        r.mode = try ctx.string("mode", "nearest")
        r.coordinateMode = "asymmetric"
        r.nearestMode = "floor"
        guard ["nearest", "linear", "bilinear"].contains(r.mode) else { throw ctx.unsupported("mode", "'\(r.mode)'") }
        if r.mode == "bilinear" { r.mode = "linear" }
        let attrScales = try ctx.floats("scales")
        let attrs = r
        return PreparedKernel { inputs in
            let x = try inputs.required(0, ctx)
            guard let scales = inputs[1]?.doubles.map({ Float($0) }) ?? attrScales, scales.count == x.rank else {
                throw ctx.error(.executionFailed, "scales must have one value per axis of \(x.shape)")
            }
            let outShape = try (0..<x.rank).map { try ctx.dimension(Foundation.floor(Float(x.shape[$0]) * scales[$0]), "output size") }
            return [try resize(x, outShape: try ctx.checkedShape(outShape), scales: scales, roi: nil, attrs, ctx)]
        }
    },
]
