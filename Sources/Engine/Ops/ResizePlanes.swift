import Tensor

/// Nearest and linear Resize of the two spatial axes of an NCHW tensor (the FPN and detector upsampling cases) as
/// one direct pass per plane: the taps are the separable path's (`axisTaps`), gathered by precomputed column
/// indices, with output rows that repeat a source row copied, and planes split across the compute threads.
/// nil when the resize is not of that kind (the separable path in `resize`, also the reference twin, takes it).
func resizePlanes(_ x: Tensor, outShape: [Int], scales: [Float], scalesGiven: Bool, _ r: ResizeAttributes) -> Tensor? {
    guard x.rank == 4, x.dtype == .float32, outShape[0] == x.shape[0], outShape[1] == x.shape[1], scales[0] == 1, scales[1] == 1,
          r.mode == "nearest" || r.mode == "linear", r.coordinateMode != "tf_crop_and_resize",
          !(r.antialias && (scales[2] < 1 || scales[3] < 1)) else { return nil }
    let (h, w, oh, ow) = (x.shape[2], x.shape[3], outShape[2], outShape[3])
    guard h > 0, w > 0, oh > 0, ow > 0 else { return nil }
    func taps(_ axis: Int) -> [[Tap]] {
        let input = x.shape[axis], output = outShape[axis]
        let length = scalesGiven ? Float(input) * scales[axis] : Float(output)
        return axisTaps(input: input, output: output, resizedLength: length, scale: scales[axis], roiStart: 0, roiEnd: 1, r).0
    }
    let rowTaps = taps(2), columnTaps = taps(3)
    let linear = r.mode == "linear"
    guard rowTaps.allSatisfy({ $0.count == (linear ? 2 : 1) }), columnTaps.allSatisfy({ $0.count == (linear ? 2 : 1) }) else { return nil }
    let c0 = columnTaps.map { $0[0].index }, c1 = columnTaps.map { linear ? $0[1].index : $0[0].index }
    let w0 = columnTaps.map { $0[0].weight }, w1 = columnTaps.map { linear ? $0[1].weight : 0 }
    var repeatsRow = [Bool](repeating: false, count: oh)
    for oy in 1..<max(1, oh) {
        let now = rowTaps[oy], before = rowTaps[oy - 1]
        repeatsRow[oy] = zip(now, before).allSatisfy { $0.index == $1.index && $0.weight == $1.weight }
    }
    let planes = x.shape[0] * x.shape[1]
    let inPlane = h * w, outPlane = oh * ow
    let out = Tensor.makeFloat(shape: outShape) { dst in
        x.floatPointer { src in
            parallelRanges(planes, minimumChunk: max(1, 16_384 / outPlane)) { range in
                // Horizontal pass of the source rows the current output row needs (linear), kept while rows repeat.
                withThreadScratch(2 * ow) { scratch in
                    for plane in range {
                        let s = src + plane * inPlane, d = dst + plane * outPlane
                        var cached = (-1, -1)
                        for oy in 0..<oh {
                            let row = d + oy * ow
                            if repeatsRow[oy] {
                                row.update(from: row - ow, count: ow)
                                continue
                            }
                            if !linear {
                                let sr = s + rowTaps[oy][0].index * w
                                for ox in 0..<ow { row[ox] = sr[c0[ox]] }
                                continue
                            }
                            let (r0, r1) = (rowTaps[oy][0].index, rowTaps[oy][1].index)
                            let wy0 = rowTaps[oy][0].weight, wy1 = rowTaps[oy][1].weight
                            if cached != (r0, r1) {
                                let a = s + r0 * w, b = s + r1 * w
                                for ox in 0..<ow {
                                    scratch[ox] = w0[ox] * a[c0[ox]] + w1[ox] * a[c1[ox]]
                                    scratch[ow + ox] = w0[ox] * b[c0[ox]] + w1[ox] * b[c1[ox]]
                                }
                                cached = (r0, r1)
                            }
                            for ox in 0..<ow { row[ox] = wy0 * scratch[ox] + wy1 * scratch[ow + ox] }
                        }
                    }
                }
            }
        }
    }
    return out
}
