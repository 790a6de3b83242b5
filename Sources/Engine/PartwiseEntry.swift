import Tensor

/// A graph input that a run may take in parts (one or more rows each, in buffers of their own) instead of stacked into
/// one batch: its only reader is a stem convolution, whose output row n depends on input row n alone, so that step runs
/// once per part and writes the part's rows of one batch output. A server's stream job then reads its requests' rows
/// where they arrived instead of copying them into a batch first (MobileNetV2: 600 KB per row, and the copy's cache
/// traffic slowed the first layers that read it).
struct PartwiseEntry: Sendable {
    /// The input's slot.
    let slot: Int
    /// The step that alone reads it.
    let step: Int
    /// That step's only output slot.
    let output: Int

    /// Operators whose output row n (batch axis first) depends only on input row n and whose kernels write into an
    /// output placement (`Tensor.makeFloat(shape:placement:)`).
    static let rowwiseOperators: Set<String> = [channelsLastPatchConvOp, convMaxPoolOp, "Conv"]

    /// The inputs of a plan that have an entry, by input name: read by exactly one step, once, as its first input, a
    /// row-wise operator whose other inputs are constants and whose one output is neither a graph output's input nor
    /// placed in a Concat buffer.
    static func entries(steps: [ExecutionStep], inputSlots: [(String, Int)], outputSlots: [Int], table: StepTable) -> [String: PartwiseEntry] {
        var readers: [Int: [Int]] = [:]
        for (index, step) in steps.enumerated() {
            for slot in step.inputs where slot >= 0 { readers[slot, default: []].append(index) }
        }
        var entries: [String: PartwiseEntry] = [:]
        for (name, slot) in inputSlots where !outputSlots.contains(slot) {
            guard let reading = readers[slot], reading.count == 1 else { continue }
            let index = reading[0], step = steps[index]
            let base = step.opType.split(separator: "+", maxSplits: 1).first.map(String.init) ?? step.opType
            let produced = step.outputs.filter { $0 >= 0 }
            guard rowwiseOperators.contains(base), step.inputs.first == slot, !step.shapeDerived, produced.count == 1,
                  step.outputs.count == 1, !table.concatMember[produced[0]],
                  step.inputs.dropFirst().allSatisfy({ $0 < 0 || table.constants[$0] != nil }) else { continue }
            entries[name] = PartwiseEntry(slot: slot, step: index, output: produced[0])
        }
        return entries
    }
}

/// Key of an entry step's learnt output (its dtype and shape after the batch axis), so later runs allocate the batch
/// output before the first part runs: the step and the dtype and shape of its input rows.
struct PartwiseKey: Hashable {
    let step: Int
    let dtype: DType
    let row: [Int]
}

/// Steps a run computed before `execute`'s loop (partwise entries): their outputs, and the batch shapes of the inputs
/// they read (for the shape signature).
struct EnteredSteps {
    /// Per step: computed already.
    var done: [Bool]
    /// Each computed step's output.
    var values: [(slot: Int, value: Tensor)] = []
    /// Batch shape of each input taken in parts.
    var inputShapes: [String: [Int]] = [:]
}

extension ExecutionPlan {
    /// Runs `parts` (feeds of one or more rows each, validated, stackable) as one batch stacked along the first axis, as
    /// `execute(feeds:wanted:)` on the stacked feeds: an input whose parts are consecutive rows of one buffer is read
    /// there, an input with a partwise entry in each part's own buffer, any other stacked into a pooled buffer.
    func execute(parts: [[String: Tensor]], wanted: [Int]) throws -> [Tensor] {
        guard parts.count > 1 else { return try execute(feeds: parts.first ?? [:], wanted: wanted) }
        let needed = neededSteps(for: wanted)
        var feeds: [String: Tensor] = [:]
        var entered = EnteredSteps(done: Array(repeating: false, count: steps.count))
        for (name, _) in inputSlots {
            let pieces = parts.compactMap { $0[name] }
            guard pieces.count == parts.count, let first = pieces.first else { continue }
            if let view = Self.adjacentRows(pieces) {
                feeds[name] = view
            } else if let entry = partwiseEntries[name], needed[entry.step], first.dtype != .string {
                entered.values.append((entry.output, try runPartwise(entry, pieces)))
                entered.done[entry.step] = true
                entered.inputShapes[name] = [pieces.reduce(0) { $0 + $1.shape[0] }] + first.shape.dropFirst()
            } else {
                feeds[name] = Tensor.pooledBatch(concatenating: pieces)
            }
        }
        return try execute(feeds: feeds, wanted: wanted, entered: entered)
    }

    /// `pieces` as one tensor when they are consecutive rows of one buffer (rows of one request), else nil.
    private static func adjacentRows(_ pieces: [Tensor]) -> Tensor? {
        let first = pieces[0]
        guard first.dtype != .string, first.rank >= 1 else { return nil }
        var end = first.byteOffset
        for piece in pieces {
            guard piece.storage === first.storage, piece.byteOffset == end, piece.dtype == first.dtype,
                  piece.shape.dropFirst() == first.shape.dropFirst() else { return nil }
            end += Tensor.elementCount(piece.shape) * piece.dtype.byteSize
        }
        let rows = pieces.reduce(0) { $0 + $1.shape[0] }
        return Tensor(dtype: first.dtype, shape: [rows] + first.shape.dropFirst(), storage: first.storage, byteOffset: first.byteOffset)
    }

    /// The entry step's output on the stacked `pieces`: one run of its kernel per piece, each writing its rows of one
    /// pooled batch buffer (or copied there by a kernel that did not honour the placement).
    private func runPartwise(_ entry: PartwiseEntry, _ pieces: [Tensor]) throws -> Tensor {
        let label = steps[entry.step].label
        let row = Array(pieces[0].shape.dropFirst()), dtype = pieces[0].dtype
        var done: Tensor? = nil
        let key = PartwiseKey(step: entry.step, dtype: dtype, row: row)
        var output = partwiseShapes.value(for: key)
        if output == nil {
            // First run of this row shape: the first piece runs alone to learn the output's shape.
            let result = try runEntryKernel(entry, pieces[0], placement: nil)
            guard result.rank >= 1, result.shape[0] == pieces[0].shape[0] else {
                throw EngineError(.executionFailed, "\(label): output \(result.shape) does not keep input rows \(pieces[0].shape)")
            }
            output = (result.dtype, Array(result.shape.dropFirst()))
            partwiseShapes.store(output!, for: key)
            done = result
        }
        let (outType, tail) = output!
        let rowBytes = Tensor.elementCount(tail) * outType.byteSize
        let batch = Tensor.pooled(outType, shape: [pieces.reduce(0) { $0 + $1.shape[0] }] + tail)
        var at = batch.byteOffset
        for (index, piece) in pieces.enumerated() {
            let bytes = piece.shape[0] * rowBytes
            let window = OutputPlacement(storage: batch.storage, byteOffset: at, byteCount: bytes)
            let result = try index == 0 && done != nil ? done! : runEntryKernel(entry, piece, placement: window)
            guard result.dtype == outType, result.shape == [piece.shape[0]] + tail else {
                throw EngineError(.executionFailed, "\(label): output \(result.dtype)\(result.shape) of rows \(piece.shape) differs from \(outType)\([piece.shape[0]] + tail)")
            }
            if !(result.storage === batch.storage && result.byteOffset == at), bytes > 0 {
                result.withUnsafeBytes { window.write(from: $0.baseAddress!, count: bytes) }
            }
            at += bytes
        }
        return batch
    }

    /// The entry step's kernel on `piece` (its other inputs are constants).
    private func runEntryKernel(_ entry: PartwiseEntry, _ piece: Tensor, placement: OutputPlacement?) throws -> Tensor {
        let slots = table.inputs
        var args = KernelInputs(values: slots.range(entry.step).map { j -> Tensor? in
            let id = slots.slots[j]
            return id < 0 ? nil : id == entry.slot ? piece : table.constants[id]
        })
        args.placement = placement
        let results = try table.kernels[entry.step](&args)
        guard let result = results.first else { throw EngineError(.executionFailed, "\(steps[entry.step].label): no output") }
        return result
    }
}
