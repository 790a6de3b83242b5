import CKernelShim

/// dst[o][j][i] = src[o][i][j] for `outer` matrices of rows x columns 4-byte elements, in cache-sized tiles.
///
/// NCHW <-> NHWC permutes (ConvNeXt's around every LayerNorm, attention's head splits) are such transposes once
/// adjacent axes are merged; copying them element by element along the output reads one value per cache line of
/// the source, tiles read and write whole lines. The generic strided copy is the reference twin in the tests.
func blockedTranspose(_ src: UnsafePointer<UInt32>, _ dst: UnsafeMutablePointer<UInt32>, outer: Int, rows: Int, columns: Int) {
    if hasTransposeTiles {
        // The AVX 8 x 8 tiles (transpose_tiles.c), threads sharing out blocks of 8 columns.
        let blocks = (columns + 7) / 8
        parallelRanges(outer * blocks, minimumChunk: max(1, 16_384 / max(1, 8 * rows))) { range in
            var task = range.lowerBound
            while task < range.upperBound {
                let o = task / blocks, first = task % blocks, last = min(blocks, first + range.upperBound - task)
                osprey_transpose_u32(src + o * rows * columns, dst + o * rows * columns, rows, columns, first * 8, min(columns, last * 8))
                task += last - first
            }
        }
        return
    }
    blockedTransposePortable(src, dst, outer: outer, rows: rows, columns: columns)
}

/// Whether the C shim's AVX transpose tiles run on this CPU (cpuid, read once).
let hasTransposeTiles = osprey_transpose_tiles_fast() == 1

/// `blockedTranspose` in Swift only, 32 x 32 scalar tiles: the path of CPUs without AVX and the twin the C tiles
/// are tested against.
func blockedTransposePortable(_ src: UnsafePointer<UInt32>, _ dst: UnsafeMutablePointer<UInt32>, outer: Int, rows: Int, columns: Int) {
    let tile = 32
    let rowTiles = (rows + tile - 1) / tile
    parallelRanges(outer * rowTiles, minimumChunk: max(1, 8192 / max(1, tile * columns))) { range in
        for task in range {
            let o = task / rowTiles, i0 = (task % rowTiles) * tile, i1 = min(rows, i0 + tile)
            let s = src + o * rows * columns, d = dst + o * rows * columns
            var j0 = 0
            while j0 < columns {
                let j1 = min(columns, j0 + tile)
                for i in i0..<i1 {
                    let from = s + i * columns
                    for j in j0..<j1 { d[j * rows + i] = from[j] }
                }
                j0 = j1
            }
        }
    }
}

/// The (outer, rows, columns) of a permutation that is a batched 2-D transpose once runs of source axes that stay
/// adjacent and in order are merged (perm [0, 2, 3, 1] of NCHW is [N][C][HW] -> [N][HW][C]); nil otherwise.
func transposeAsMatrices(shape: [Int], perm: [Int]) -> (outer: Int, rows: Int, columns: Int)? {
    let groups = consecutiveSourceRuns(shape: shape, perm: perm)
    guard !groups.isEmpty else { return nil }
    let size = { (group: [Int]) in group.reduce(1) { $0 * shape[$1] } }
    // Output group order must be (outer?, B, A) where the source order is (outer?, A, B).
    let bySource = groups.sorted { $0[0] < $1[0] }
    switch groups.count {
    case 2 where groups[0] == bySource[1]:
        return (1, size(bySource[0]), size(bySource[1]))
    case 3 where groups[0] == bySource[0] && groups[1] == bySource[2]:
        return (size(bySource[0]), size(bySource[1]), size(bySource[2]))
    default:
        return nil
    }
}

/// The output axes of `perm` in runs whose source axes are consecutive, size-1 axes dropped (they never change the
/// memory order): the merged axes of a permutation that `transposeAsMatrices` and `transposeAsBlockMatrices` classify.
func consecutiveSourceRuns(shape: [Int], perm: [Int]) -> [[Int]] {
    var groups: [[Int]] = []
    for axis in perm where shape[axis] != 1 {
        if let last = groups.last?.last, axis == nextKept(after: last, shape: shape) {
            groups[groups.count - 1].append(axis)
        } else {
            groups.append([axis])
        }
    }
    return groups
}

/// The next source axis after `axis` with more than one element, or -1.
private func nextKept(after axis: Int, shape: [Int]) -> Int {
    var next = axis + 1
    while next < shape.count && shape[next] == 1 { next += 1 }
    return next < shape.count ? next : -1
}
