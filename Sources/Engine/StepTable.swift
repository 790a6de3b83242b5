import Tensor

/// The plan's steps flattened into contiguous slot lists, built once per plan, so a run reads each step's slots by
/// index instead of copying the step (its label, kernel and four arrays, each retained and released per step).
struct StepTable: Sendable {
    /// Each step's kernel.
    let kernels: [Kernel]
    /// Step i's input slots are `inputs[inputStart[i]..<inputStart[i + 1]]` (-1 = omitted).
    let inputStart: [Int]
    /// All steps' input slots, back to back.
    let inputs: [Int]
    /// Step i's output slots are `outputs[outputStart[i]..<outputStart[i + 1]]` (-1 = unused).
    let outputStart: [Int]
    /// All steps' output slots, back to back.
    let outputs: [Int]
    /// Step i's releases are `releases[releaseStart[i]..<releaseStart[i + 1]]`.
    let releaseStart: [Int]
    /// All steps' released slots, back to back.
    let releases: [Int]
    /// Step i hands `handovers[handoverStart[i]..<handoverStart[i + 1]]` to its kernel: released slots it reads
    /// exactly once, dropped from the run's values before the kernel runs so a sole reference can be written in place.
    let handoverStart: [Int]
    /// All steps' handed-over slots, back to back.
    let handovers: [Int]
    /// Whether each step is shape-derived.
    let shapeDerived: [Bool]
    /// Whether each step is a Concat group's root or a grouped Concat (the only steps the placement acts on).
    let concatStep: [Bool]
    /// Whether each slot is placed in a Concat group's buffer.
    let concatMember: [Bool]
    /// Each slot's constant, except constants that share a slot with a graph input (a run's values are nil there).
    let constants: [Tensor?]
    /// Constants on graph-input slots: set before the feeds, as a run always did, so a feed replaces them.
    let shadowedConstants: [(Int, Tensor)]
    /// Most inputs of any step (the capacity of the run's one input buffer).
    let maxInputs: Int

    init(steps: [ExecutionStep], slotCount: Int, constantSlots: [(Int, Tensor)], inputSlots: [(String, Int)], concats: ConcatPlacement) {
        kernels = steps.map(\.kernel)
        func flatten(_ lists: [[Int]]) -> (start: [Int], all: [Int]) {
            var start = [0]
            var all: [Int] = []
            for list in lists {
                all.append(contentsOf: list)
                start.append(all.count)
            }
            return (start, all)
        }
        (inputStart, inputs) = flatten(steps.map(\.inputs))
        (outputStart, outputs) = flatten(steps.map(\.outputs))
        (releaseStart, releases) = flatten(steps.map(\.releases))
        (handoverStart, handovers) = flatten(steps.map { step in step.releases.filter { id in step.inputs.filter { $0 == id }.count == 1 } })
        shapeDerived = steps.map(\.shapeDerived)
        concatStep = steps.indices.map { concats.rootStep[$0] != nil || concats.concatAxes[$0] != nil }
        var member = [Bool](repeating: false, count: slotCount)
        for slot in concats.memberOf.keys where slot >= 0 && slot < slotCount { member[slot] = true }
        concatMember = member
        let inputSet = Set(inputSlots.map(\.1))
        var constants = [Tensor?](repeating: nil, count: slotCount)
        var shadowed: [(Int, Tensor)] = []
        for (id, tensor) in constantSlots {
            if inputSet.contains(id) { shadowed.append((id, tensor)) } else { constants[id] = tensor }
        }
        self.constants = constants
        shadowedConstants = shadowed
        maxInputs = steps.map(\.inputs.count).max() ?? 0
    }
}
