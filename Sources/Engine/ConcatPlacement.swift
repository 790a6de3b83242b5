import Foundation
import Infrastructure
import Tensor

/// A window of a Concat group's buffer that a producer may write its (float32) output into instead of a fresh buffer.
struct OutputPlacement {
    /// The group's buffer.
    let storage: TensorStorage
    /// Where the window starts inside `storage`.
    let byteOffset: Int
    /// Bytes the window holds: an output of another size is not placed.
    let byteCount: Int
    /// Rows of the window: 1 when it is one run of bytes; at batch > 1 (N rows, the dimensions before the Concat
    /// axis), `byteCount / rows` bytes at the start of every `rowStride` bytes from `byteOffset` on.
    var rows = 1
    /// Bytes from one row of the window to the next (when rows > 1).
    var rowStride = 0

    /// Whether the window is one run of bytes (a producer may write its output there as it is).
    var isContiguous: Bool { rows == 1 }

    /// A tensor of `shape` over the window's first bytes: the value itself when the window is contiguous, else a
    /// stand-in that only the group's Concat reads (which returns the whole buffer; see `ConcatPlacement`).
    func tensor(_ dtype: DType, shape: [Int]) -> Tensor {
        Tensor(dtype: dtype, shape: shape, storage: storage, byteOffset: byteOffset)
    }

    /// Writes `count` contiguous bytes (a value of the window's size) into the window, row by row.
    func write(from source: UnsafeRawPointer, count: Int) {
        let rowBytes = count / rows, destination = storage.pointer + byteOffset
        for r in 0..<rows { (destination + r * rowStride).copyMemory(from: source + r * rowBytes, byteCount: rowBytes) }
    }

    /// The window's bytes gathered into a new tensor of `shape` (a stand-in's real value).
    func gathered(_ dtype: DType, shape: [Int]) -> Tensor {
        var copy = Tensor(dtype: dtype, shape: shape)
        let rowBytes = byteCount / rows, source = UnsafeRawPointer(storage.pointer + byteOffset)
        copy.withUnsafeMutableBytes { d in
            guard let to = d.baseAddress else { return }
            for r in 0..<rows { (to + r * rowBytes).copyMemory(from: source + r * rowStride, byteCount: rowBytes) }
        }
        return copy
    }

    /// True when `tensor` already lives in this window.
    func holds(_ tensor: Tensor) -> Bool {
        tensor.storage === storage && tensor.byteOffset == byteOffset && tensor.byteCount == byteCount
    }
}

/// Concats whose inputs the planner lets their producers write straight into one shared buffer, so the Concat (and
/// every Concat over a contiguous run of the same inputs, as in DenseNet's growing feature lists) costs no copy.
///
/// The planner only decides where values go; correctness rests on two run-time facts. A placed value is an ordinary
/// immutable view of the buffer, so other readers are unaffected and in-place writers copy first (the buffer is shared).
/// A Concat returns a view only when its inputs really are adjacent windows of one buffer and every dimension before
/// the axis is 1; otherwise it copies as before. Byte sizes come from the first run of each input-shape signature
/// (which runs copying), so a later run whose sizes differ just copies.
///
/// At batch > 1 a channel slice of the buffer is strided (one run per image), so only `Group.strided` groups place
/// there: one Concat whose inputs nothing else reads, none of them another group's output or member. Their producers
/// get strided windows (convolutions write their images there; any other output is copied in row by row) and hold
/// a stand-in that the Concat, their only reader, swaps for the whole buffer.
struct ConcatPlacement: Sendable {
    /// One buffer: the root Concat (the one with the most inputs) and its inputs in order.
    struct Group: Sendable {
        /// Step index of the root Concat.
        let root: Int
        /// The root's input slots, in order: each one's window follows the previous one's.
        let members: [Int]
        /// The root's output slot.
        let output: Int
        /// Whether the group may place at batch > 1 (strided windows; see above).
        let strided: Bool
    }

    /// Byte layout of one group for one input-shape signature.
    struct Layout: Sendable {
        /// Bytes of the whole buffer.
        let bytes: Int
        /// Start of each member's window.
        let offsets: [Int]
        /// Bytes of each member.
        let sizes: [Int]
        /// Rows (the product of the dimensions before the axis): 1, or N of a strided group.
        var rows = 1
        /// Bytes of one row of the buffer (with rows > 1 `offsets` are within a row).
        var rowBytes = 0
    }

    let groups: [Group]
    /// Group and position of each placed slot.
    let memberOf: [Int: (group: Int, index: Int)]
    /// Axis attribute of each Concat step in a group (those may return views).
    let concatAxes: [Int: Int]
    /// Group of each root step.
    let rootStep: [Int: Int]
    let layouts = ConcatLayoutCache()

    /// No groups: execution never consults the placement.
    var isEmpty: Bool { groups.isEmpty }

    /// Groups the Concat steps in `concatAxes` (step index -> axis attribute) of `steps`. A Concat qualifies when
    /// every input is produced by a step that runs every time (not a graph input, constant, graph output or a
    /// shape-derived value) and appears once; Concats sharing inputs form one group, which is kept only when each of
    /// them reads a contiguous run of the root's inputs in the root's order.
    init(steps: [ExecutionStep], concatAxes: [Int: Int], producers: [Int: Int], retained: Set<Int>) {
        func placeable(_ slot: Int) -> Bool {
            guard slot >= 0, !retained.contains(slot), let p = producers[slot] else { return false }
            return !steps[p].shapeDerived
        }
        let candidates = concatAxes.keys.sorted().filter { i in
            let ins = steps[i].inputs
            return !steps[i].shapeDerived && !ins.isEmpty && steps[i].outputs.count == 1 && steps[i].outputs[0] >= 0
                && ins.allSatisfy(placeable) && Set(ins).count == ins.count
        }
        // Union-find over candidates sharing an input.
        var parent = Dictionary(uniqueKeysWithValues: candidates.map { ($0, $0) })
        func find(_ x: Int) -> Int {
            var r = x
            while parent[r]! != r { r = parent[r]! }
            return r
        }
        var firstReader: [Int: Int] = [:]
        for c in candidates {
            for slot in steps[c].inputs {
                if let other = firstReader[slot] { parent[find(c)] = find(other) } else { firstReader[slot] = c }
            }
        }
        var components: [Int: [Int]] = [:]
        for c in candidates { components[find(c), default: []].append(c) }
        var readers: [Int: Int] = [:]
        for step in steps { for slot in step.inputs where slot >= 0 { readers[slot, default: 0] += 1 } }
        let concatOutputs = Set(candidates.map { steps[$0].outputs[0] })
        let concatInputs = Set(candidates.flatMap { steps[$0].inputs })

        var groups: [Group] = []
        var memberOf: [Int: (group: Int, index: Int)] = [:]
        var axes: [Int: Int] = [:]
        var rootStep: [Int: Int] = [:]
        for key in components.keys.sorted() {
            let concats = components[key]!
            let root = concats.max { (steps[$0].inputs.count, $0) < (steps[$1].inputs.count, $1) }!
            let order = steps[root].inputs
            let position = Dictionary(uniqueKeysWithValues: order.enumerated().map { ($1, $0) })
            let contiguous = concats.allSatisfy { c in
                guard let start = position[steps[c].inputs[0]] else { return false }
                return steps[c].inputs.enumerated().allSatisfy { k, slot in position[slot] == start + k }
            }
            guard contiguous, concats.allSatisfy({ concatAxes[$0] == concatAxes[root] }) else { continue }
            let g = groups.count
            let strided = concats.count == 1 && !concatInputs.contains(steps[root].outputs[0])
                && order.allSatisfy { readers[$0] == 1 && !concatOutputs.contains($0) }
            groups.append(Group(root: root, members: order, output: steps[root].outputs[0], strided: strided))
            for (k, slot) in order.enumerated() { memberOf[slot] = (g, k) }
            for c in concats { axes[c] = concatAxes[c] }
            rootStep[root] = g
        }
        self.groups = groups
        self.memberOf = memberOf
        self.concatAxes = axes
        self.rootStep = rootStep
    }

    /// The layout of a group from the root's inputs `parts`, or nil when the group cannot be one buffer at these
    /// shapes (strings, a missing input, a dimension before the axis above 1 unless the group is `strided`).
    static func layout(parts: [Tensor?], axis: Int, strided: Bool = false) -> Layout? {
        guard let first = parts.first ?? nil, first.dtype != .string, first.container == nil, first.rank > 0 else { return nil }
        let a = axis < 0 ? axis + first.rank : axis
        guard a >= 0, a < first.rank else { return nil }
        let rows = first.shape[..<a].reduce(1, *)
        guard rows == 1 || (strided && rows > 1) else { return nil }
        var offsets: [Int] = [], sizes: [Int] = [], total = 0
        for part in parts {
            guard let part, part.dtype == first.dtype, part.container == nil, part.rank == first.rank,
                  part.shape[..<a] == first.shape[..<a] else { return nil }
            offsets.append(total)
            sizes.append(part.byteCount)
            total += part.byteCount / rows
        }
        return Layout(bytes: total * rows, offsets: offsets, sizes: sizes, rows: rows, rowBytes: total)
    }

    /// The view a Concat along `axis` of `parts` would copy into, when the parts are adjacent windows of one buffer in
    /// order and the concatenation is a plain append of their bytes; nil otherwise (the kernel copies).
    static func adjacentView(_ parts: [Tensor?], axis: Int) -> Tensor? {
        guard let first = parts.first ?? nil, first.dtype != .string, first.container == nil, first.rank > 0 else { return nil }
        let a = axis < 0 ? axis + first.rank : axis
        guard a >= 0, a < first.rank, first.shape[..<a].allSatisfy({ $0 == 1 }) else { return nil }
        var shape = first.shape
        shape[a] = 0
        var next = first.byteOffset
        for part in parts {
            guard let part, part.dtype == first.dtype, part.container == nil, part.storage === first.storage, part.byteOffset == next,
                  part.rank == first.rank, (0..<part.rank).allSatisfy({ $0 == a || part.shape[$0] == first.shape[$0] }) else { return nil }
            next += part.byteCount
            shape[a] += part.shape[a]
        }
        return Tensor(dtype: first.dtype, shape: shape, storage: first.storage, byteOffset: first.byteOffset)
    }
}

/// Group layouts by input-shape signature (nil entries: that group copies at that signature).
final class ConcatLayoutCache: @unchecked Sendable {
    private let lock = Lock()
    private var layouts: [[[Int]]: [ConcatPlacement.Layout?]] = [:]
    private let limit = 64

    /// The layouts recorded for `signature`, if any.
    func layouts(for signature: [[Int]]) -> [ConcatPlacement.Layout?]? {
        lock.lock()
        defer { lock.unlock() }
        return layouts[signature]
    }

    /// Stores the layouts of `signature` (bounded; restarts when full).
    func store(_ value: [ConcatPlacement.Layout?], for signature: [[Int]]) {
        lock.lock()
        defer { lock.unlock() }
        if layouts.count >= limit { layouts.removeAll() }
        layouts[signature] = value
    }
}

/// Per-run state of a plan's Concat groups: the buffers allocated so far and, on a signature's first run, the
/// layouts being recorded.
struct ConcatRun {
    let placement: ConcatPlacement
    /// This signature's layouts; nil on its first run (which records them).
    let layouts: [ConcatPlacement.Layout?]?
    private var recorded: [ConcatPlacement.Layout?]
    /// Base (buffer, byte offset) of each group allocated in this run; dropped once its root ran.
    private var bases: [Int: (storage: TensorStorage, offset: Int)] = [:]

    init(_ placement: ConcatPlacement, signature: [[Int]]) {
        self.placement = placement
        layouts = placement.layouts.layouts(for: signature)
        recorded = Array(repeating: nil, count: placement.groups.count)
    }

    /// The window `slot` should be written into, allocating its group's buffer on first use (inside the parent
    /// group's buffer when the group's root output is itself placed, so nested Concats share one buffer).
    mutating func window(for slot: Int) -> OutputPlacement? {
        guard let layouts, let (g, k) = placement.memberOf[slot], let layout = layouts[g], let base = base(of: g, layouts) else { return nil }
        return OutputPlacement(storage: base.storage, byteOffset: base.offset + layout.offsets[k], byteCount: layout.sizes[k],
                               rows: layout.rows, rowStride: layout.rowBytes)
    }

    private mutating func base(of g: Int, _ layouts: [ConcatPlacement.Layout?]) -> (storage: TensorStorage, offset: Int)? {
        if let b = bases[g] { return b }
        guard let layout = layouts[g] else { return nil }
        let b: (storage: TensorStorage, offset: Int)
        if layout.rows == 1, let outer = window(for: placement.groups[g].output), outer.isContiguous, outer.byteCount == layout.bytes {
            b = (outer.storage, outer.byteOffset)
        } else {
            b = (BufferPool.shared.storage(byteCount: layout.bytes), 0)
        }
        bases[g] = b
        return b
    }

    /// Moves `result` (the value of `slot`) into its window when it is not there already; other values pass through.
    mutating func place(_ result: Tensor, slot: Int) -> Tensor {
        guard let window = window(for: slot), !window.holds(result) else { return result }
        guard result.dtype != .string, result.container == nil, result.byteCount == window.byteCount else { return result }
        let view = window.tensor(result.dtype, shape: result.shape)
        result.withUnsafeBytes { src in
            if let from = src.baseAddress, src.count > 0 { window.write(from: from, count: src.count) }
        }
        return view
    }

    /// Step `step`'s output as a view of its group's buffer, when it is a grouped Concat whose inputs are adjacent
    /// (or, in a strided group, all in their windows). A strided root that cannot be a view gets its inputs' stand-ins
    /// replaced by their real values in `inputs`, so that it copies them.
    mutating func view(step: Int, inputs: inout [Tensor?]) -> Tensor? {
        guard layouts != nil, let axis = placement.concatAxes[step] else { return nil }
        guard let g = placement.rootStep[step], let layout = layouts?[g], layout.rows > 1 else {
            return ConcatPlacement.adjacentView(inputs, axis: axis)
        }
        let members = placement.groups[g].members
        var windows: [OutputPlacement?] = []
        for slot in members { windows.append(bases[g] == nil ? nil : window(for: slot)) }
        if let first = inputs.first ?? nil, zip(inputs, windows).allSatisfy({ part, window in
            guard let part, let window else { return false }
            return window.holds(part)
        }) {
            var shape = first.shape
            let a = axis < 0 ? axis + first.rank : axis
            shape[a] = inputs.reduce(0) { $0 + $1!.shape[a] }
            return Tensor(dtype: first.dtype, shape: shape, storage: first.storage, byteOffset: bases[g]!.offset)
        }
        for k in inputs.indices {
            if let part = inputs[k], let window = windows[k], window.holds(part) { inputs[k] = window.gathered(part.dtype, shape: part.shape) }
        }
        return nil
    }

    /// Called before root step `step` runs: records its group's layout on a first run.
    mutating func rootWillRun(step: Int, inputs: [Tensor?]) {
        guard layouts == nil, let g = placement.rootStep[step], let axis = placement.concatAxes[step] else { return }
        recorded[g] = ConcatPlacement.layout(parts: inputs, axis: axis, strided: placement.groups[g].strided)
    }

    /// Called after root step `step` ran: the run stops holding its buffer (so a sole reader may write in place).
    mutating func rootDidRun(step: Int) {
        if let g = placement.rootStep[step] { bases[g] = nil }
    }

    /// Stores the layouts a first run recorded, when it ran every step.
    func finish(signature: [[Int]], ranAll: Bool) {
        if layouts == nil && ranAll { placement.layouts.store(recorded, for: signature) }
    }
}
