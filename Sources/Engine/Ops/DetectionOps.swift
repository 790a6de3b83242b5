import Tensor

/// Intersection over union of two boxes given as (y1, x1, y2, x2) with corners in any order.
private func iou(_ a: [Float], _ b: [Float]) -> Float {
    let (ay1, ay2) = (min(a[0], a[2]), max(a[0], a[2])), (ax1, ax2) = (min(a[1], a[3]), max(a[1], a[3]))
    let (by1, by2) = (min(b[0], b[2]), max(b[0], b[2])), (bx1, bx2) = (min(b[1], b[3]), max(b[1], b[3]))
    let ih = max(0, min(ay2, by2) - max(ay1, by1)), iw = max(0, min(ax2, bx2) - max(ax1, bx1))
    let inter = ih * iw
    let union = (ay2 - ay1) * (ax2 - ax1) + (by2 - by1) * (bx2 - bx1) - inter
    return union > 0 ? inter / union : 0
}

let detectionOperators: OperatorTable = [
    "NonMaxSuppression": { ctx in
        let centerBox = try ctx.int("center_point_box", 0) == 1
        return PreparedKernel { inputs in
            let boxesT = try inputs.required(0, ctx), scoresT = try inputs.required(1, ctx)
            guard boxesT.rank == 3, boxesT.shape[2] == 4, scoresT.rank == 3, boxesT.shape[0] == scoresT.shape[0], boxesT.shape[1] == scoresT.shape[2] else {
                throw ctx.error(.executionFailed, "boxes \(boxesT.shape) and scores \(scoresT.shape) must be [B, N, 4] and [B, C, N]")
            }
            let maxPerClass = inputs[2].map { $0.count > 0 ? Int($0.doubleValue(at: 0)) : 0 } ?? 0
            let iouThreshold = inputs[3].map { $0.count > 0 ? Float($0.doubleValue(at: 0)) : 0 } ?? 0
            let scoreThreshold = inputs[4].flatMap { $0.count > 0 ? Float($0.doubleValue(at: 0)) : nil }
            let boxes = try castTensor(boxesT, to: .float32, ctx).scalars(as: Float.self)
            let scores = try castTensor(scoresT, to: .float32, ctx).scalars(as: Float.self)
            let (batches, classes, count) = (scoresT.shape[0], scoresT.shape[1], scoresT.shape[2])
            func box(_ b: Int, _ i: Int) -> [Float] {
                let p = Array(boxes[((b * count + i) * 4)..<((b * count + i) * 4 + 4)])
                if !centerBox { return p }
                // (x_center, y_center, width, height) -> (y1, x1, y2, x2).
                return [p[1] - p[3] / 2, p[0] - p[2] / 2, p[1] + p[3] / 2, p[0] + p[2] / 2]
            }
            var selected: [Int64] = []
            for b in 0..<batches where maxPerClass > 0 {
                for c in 0..<classes {
                    let base = (b * classes + c) * count
                    var order = (0..<count).filter { scoreThreshold == nil || scores[base + $0] > scoreThreshold! }
                    order.sort { scores[base + $0] != scores[base + $1] ? scores[base + $0] > scores[base + $1] : $0 < $1 }
                    var kept: [Int] = []
                    for i in order {
                        if kept.count >= maxPerClass { break }
                        let candidate = box(b, i)
                        if kept.allSatisfy({ iou(candidate, box(b, $0)) <= iouThreshold }) { kept.append(i) }
                    }
                    for i in kept { selected += [Int64(b), Int64(c), Int64(i)] }
                }
            }
            return [Tensor(shape: [selected.count / 3, 3], scalars: selected)]
        }
    },
]
