/// Permutations that move whole blocks: two runs of axes swap in front of an innermost run that stays in place.
///
/// ShuffleNet's channel shuffle, Transpose [N, G, C/G, H, W] -> [N, C/G, G, H, W], moves H x W planes as they are.
/// The generic strided copy walks it with one copy call per plane through its run iterator (per 7x7 plane, more
/// bookkeeping than copying); here each block is copied with inline vector moves. The strided copy is the twin the
/// tests compare with.
///
/// dst[o][c][r][0..<block] = src[o][r][c][0..<block] for `outer` matrices of rows x columns blocks of `block` 4-byte values.
func blockPermute(_ src: UnsafeRawPointer, _ dst: UnsafeMutableRawPointer, outer: Int, rows: Int, columns: Int, block: Int) {
    let bytes = 4 * block
    parallelRanges(outer * columns, minimumChunk: max(1, 16_384 / max(1, rows * block))) { range in
        for task in range {
            let o = task / columns, c = task % columns
            let source = src + (o * rows * columns + c) * bytes, destination = dst + task * rows * bytes
            for r in 0..<rows { copyBlock(source + r * columns * bytes, destination + r * bytes, bytes: bytes) }
        }
    }
}

/// `bytes` (a multiple of 4) from `from` to `to` (not overlapping): 64 at a time, then 32, 16 and 4.
@inline(__always)
private func copyBlock(_ from: UnsafeRawPointer, _ to: UnsafeMutableRawPointer, bytes: Int) {
    if bytes >= 4096 { to.copyMemory(from: from, byteCount: bytes); return }
    var i = 0
    while i + 64 <= bytes { to.storeBytes(of: from.loadUnaligned(fromByteOffset: i, as: SIMD16<UInt32>.self), toByteOffset: i, as: SIMD16<UInt32>.self); i += 64 }
    if i + 32 <= bytes { to.storeBytes(of: from.loadUnaligned(fromByteOffset: i, as: SIMD8<UInt32>.self), toByteOffset: i, as: SIMD8<UInt32>.self); i += 32 }
    if i + 16 <= bytes { to.storeBytes(of: from.loadUnaligned(fromByteOffset: i, as: SIMD4<UInt32>.self), toByteOffset: i, as: SIMD4<UInt32>.self); i += 16 }
    while i < bytes { to.storeBytes(of: from.loadUnaligned(fromByteOffset: i, as: UInt32.self), toByteOffset: i, as: UInt32.self); i += 4 }
}

/// The (outer, rows, columns, block) of a permutation that is `blockPermute` once runs of source axes that stay
/// adjacent and in order are merged: output groups (outer?, B, A, L) of source groups (outer?, A, B, L), L last in
/// both and more than one value; nil otherwise (`transposeAsMatrices` takes the permutes without such an L).
func transposeAsBlockMatrices(shape: [Int], perm: [Int]) -> (outer: Int, rows: Int, columns: Int, block: Int)? {
    let groups = consecutiveSourceRuns(shape: shape, perm: perm)
    let size = { (group: [Int]) in group.reduce(1) { $0 * shape[$1] } }
    let bySource = groups.sorted { $0[0] < $1[0] }
    guard groups.count >= 3, groups.last == bySource.last else { return nil }
    switch groups.count {
    case 3 where groups[0] == bySource[1]:
        return (1, size(bySource[0]), size(bySource[1]), size(bySource[2]))
    case 4 where groups[0] == bySource[0] && groups[1] == bySource[2]:
        return (size(bySource[0]), size(bySource[1]), size(bySource[2]), size(bySource[3]))
    default:
        return nil
    }
}
