import Tensor

/// The plan's steps flattened into contiguous slot lists, built once per plan, so a run reads each step's slots by
/// index instead of copying the step (its label, kernel and four arrays, each retained and released per step).
struct StepTable: Sendable {
    /// Each step's kernel.
    let kernels: [Kernel]
    /// Each step's input slots (-1 = omitted).
    let inputs: StepSlots
    /// Each step's output slots (-1 = unused).
    let outputs: StepSlots
    /// Each step's released slots.
    let releases: StepSlots
    /// The slots each step hands to its kernel: released slots it reads exactly once, dropped from the run's values
    /// before the kernel runs so a sole reference can be written in place.
    let handovers: StepSlots
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
        inputs = StepSlots(steps.map(\.inputs))
        outputs = StepSlots(steps.map(\.outputs))
        releases = StepSlots(steps.map(\.releases))
        handovers = StepSlots(steps.map { step in step.releases.filter { id in step.inputs.filter { $0 == id }.count == 1 } })
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

/// One slot list per step, back to back in one array (instead of an array per step): step i's slots are
/// `slots[range(i)]`.
struct StepSlots: Sendable {
    /// Where each step's list begins in `slots`, and one entry more: the total.
    let start: [Int]
    /// Every step's slots, back to back.
    let slots: [Int]

    /// The lists flattened, in step order.
    init(_ lists: [[Int]]) {
        var start = [0]
        var slots: [Int] = []
        for list in lists {
            slots.append(contentsOf: list)
            start.append(slots.count)
        }
        self.start = start
        self.slots = slots
    }

    /// The positions in `slots` of step i's list.
    @inline(__always)
    func range(_ step: Int) -> Range<Int> { start[step]..<start[step + 1] }
}
