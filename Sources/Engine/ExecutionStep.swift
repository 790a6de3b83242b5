import Foundation
import Infrastructure
import ONNX
import Tensor

/// One prepared node: its kernel and the value slots it reads and writes.
struct ExecutionStep: Sendable {
    /// Node label for errors.
    let label: String
    /// Operator type, with `+Activation` when an epilogue was fused (for profiles).
    let opType: String
    /// The prepared operator.
    let kernel: Kernel
    /// Input slots; -1 marks an omitted optional input (or a constant baked into the kernel).
    let inputs: [Int]
    /// Output slots; -1 marks an unused output.
    let outputs: [Int]
    /// Slots whose last reader is this step (released after it runs, so their buffers can be reused).
    var releases: [Int] = []
    /// True when every output depends only on input shapes and constants (computed once per shape signature).
    var shapeDerived = false
}

/// A small locked cache of values computed on a first run and reused by later runs (shape-derived values per shape
/// signature, entry steps' output shapes); bounded: it restarts when full.
final class RunCache<Key: Hashable, Value>: @unchecked Sendable {
    private let lock = Lock()
    private var values: [Key: Value] = [:]
    private let limit = 64

    /// The cached value for `key`, if any.
    func value(for key: Key) -> Value? {
        lock.withLock { values[key] }
    }

    /// Stores `value` for `key`.
    func store(_ value: Value, for key: Key) {
        lock.withLock {
            if values.count >= limit { values.removeAll() }
            values[key] = value
        }
    }

    /// Number of cached keys (for tests).
    var count: Int { lock.withLock { values.count } }
}

/// The compiled steps and value slots of one model; `execute` is reentrant (all per-run state is local).
struct ExecutionPlan: Sendable {
    let steps: [ExecutionStep]
    let slotCount: Int
    let constantSlots: [(Int, Tensor)]
    let inputSlots: [(String, Int)]
    let producers: [Int: Int]
    /// Values that depend only on the input shapes, computed on the first run of each shape signature.
    let shapeCache = RunCache<[[Int]], [Int: Tensor]>()
    /// Concats whose inputs are written into one shared buffer (see `ConcatPlacement`).
    let concats: ConcatPlacement
    /// Steps needed for every graph output (the common case, computed once).
    let allOutputSlots: [Int]
    let allOutputsNeeded: [Bool]
    /// The steps flattened for `execute`.
    let table: StepTable
    /// Inputs a run may take in parts, by name (see `PartwiseEntry`).
    let partwiseEntries: [String: PartwiseEntry]
    /// Their entry steps' output shapes, learnt on first use.
    let partwiseShapes = RunCache<PartwiseKey, (DType, [Int])>()

    init(steps: [ExecutionStep], slotCount: Int, constantSlots: [(Int, Tensor)], inputSlots: [(String, Int)], producers: [Int: Int], outputSlots: [Int],
         concatAxes: [Int: Int] = [:]) {
        self.steps = steps
        concats = ConcatPlacement(steps: steps, concatAxes: concatAxes, producers: producers,
                                  retained: Set(outputSlots).union(constantSlots.map(\.0)).union(inputSlots.map(\.1)))
        self.slotCount = slotCount
        self.constantSlots = constantSlots
        self.inputSlots = inputSlots
        self.producers = producers
        self.allOutputSlots = outputSlots
        self.allOutputsNeeded = ExecutionPlan.needed(steps: steps, producers: producers, for: outputSlots)
        table = StepTable(steps: steps, slotCount: slotCount, constantSlots: constantSlots, inputSlots: inputSlots, concats: concats)
        partwiseEntries = PartwiseEntry.entries(steps: steps, inputSlots: inputSlots, outputSlots: outputSlots, table: table)
    }

    /// Steps needed to produce `slots`.
    func neededSteps(for slots: [Int]) -> [Bool] {
        slots == allOutputSlots ? allOutputsNeeded : ExecutionPlan.needed(steps: steps, producers: producers, for: slots)
    }

    private static func needed(steps: [ExecutionStep], producers: [Int: Int], for slots: [Int]) -> [Bool] {
        var needed = [Bool](repeating: false, count: steps.count)
        var stack = slots
        var seen = Set<Int>()
        while let id = stack.popLast() {
            guard seen.insert(id).inserted, let p = producers[id], !needed[p] else { continue }
            needed[p] = true
            stack.append(contentsOf: steps[p].inputs.filter { $0 >= 0 })
        }
        return needed
    }

    /// Runs the steps that `wanted` needs on validated `feeds`, returning those slots' values in order.
    /// With `peakBytes`, also records the most bytes of distinct non-constant storage alive after any step.
    ///
    /// Per step it reads the flattened `table` by index and fills one reused input buffer; constants are read from the
    /// table where a slot has no value of the run (they never are released, produced or fed, except input slots).
    /// Steps in `entered` ran already (inputs taken in parts): their outputs are set and they are skipped.
    func execute(feeds: [String: Tensor], wanted: [Int], timings: UnsafeMutablePointer<[Double]>? = nil,
                 peakBytes: UnsafeMutablePointer<Int>? = nil, entered: EnteredSteps? = nil) throws -> [Tensor] {
        let needed = neededSteps(for: wanted)
        let table = self.table
        let constants = table.constants, inputIDs = table.inputs, outputIDs = table.outputs
        let releaseIDs = table.releases, handoverIDs = table.handovers
        let shapeDerived = table.shapeDerived, concatStep = table.concatStep, concatMember = table.concatMember
        var values = [Tensor?](repeating: nil, count: slotCount)
        for (id, tensor) in table.shadowedConstants { values[id] = tensor }
        for (name, id) in inputSlots { values[id] = feeds[name] }
        if let entered { for (id, value) in entered.values { values[id] = value } }
        let signature = inputSlots.map { feeds[$0.0]?.shape ?? entered?.inputShapes[$0.0] ?? [] }
        let cached = shapeCache.value(for: signature)
        if let cached { for (id, t) in cached { values[id] = t } }
        var fresh: [Int: Tensor] = [:]
        var concatRun = concats.isEmpty ? nil : ConcatRun(concats, signature: signature)
        // One input buffer for every step: emptied (keeping its capacity) as soon as each kernel returns, so it holds
        // no reference past its step.
        var args = KernelInputs(values: [])
        args.values.reserveCapacity(table.maxInputs)

        for i in 0..<steps.count where needed[i] {
            let outputs = outputIDs.range(i)
            if entered?.done[i] == true || shapeDerived[i] && cached != nil && outputs.allSatisfy({ outputIDs.slots[$0] < 0 || values[outputIDs.slots[$0]] != nil }) {
                for r in releaseIDs.range(i) { values[releaseIDs.slots[r]] = nil }
                continue
            }
            for j in inputIDs.range(i) {
                let id = inputIDs.slots[j]
                guard id >= 0 else { args.values.append(nil); continue }
                guard let value = values[id] ?? constants[id] else {
                    args.values.removeAll()
                    throw EngineError(.executionFailed, "\(steps[i].label): input slot \(id) has no value")
                }
                args.values.append(value)
            }
            // Hand over the last reference so elementwise kernels can write in place.
            for r in handoverIDs.range(i) { values[handoverIDs.slots[r]] = nil }
            let started = timings == nil ? 0 : SystemClock.seconds()
            let results: [Tensor]
            if concatRun != nil {
                if outputs.count == 1, case let out = outputIDs.slots[outputs.lowerBound], out >= 0, concatMember[out] {
                    args.placement = concatRun?.window(for: out)
                }
                if concatStep[i] {
                    concatRun?.rootWillRun(step: i, inputs: args.values)
                    if let view = concatRun?.view(step: i, inputs: &args.values) { results = [view] } else { results = try table.kernels[i](&args) }
                    concatRun?.rootDidRun(step: i)
                } else {
                    results = try table.kernels[i](&args)
                }
            } else {
                results = try table.kernels[i](&args)
            }
            args.values.removeAll(keepingCapacity: true)
            args.placement = nil
            if let timings { timings.pointee[i] += SystemClock.seconds() - started }
            for (k, j) in outputs.enumerated() where outputIDs.slots[j] >= 0 {
                let id = outputIDs.slots[j]
                guard k < results.count else { throw EngineError(.executionFailed, "\(steps[i].label): output \(k) was not produced") }
                values[id] = concatMember[id] ? (concatRun?.place(results[k], slot: id) ?? results[k]) : results[k]
                if shapeDerived[i] && cached == nil { fresh[id] = results[k] }
            }
            if let peakBytes { peakBytes.pointee = max(peakBytes.pointee, liveBytes(values)) }
            for r in releaseIDs.range(i) { values[releaseIDs.slots[r]] = nil }
        }
        if cached == nil && !fresh.isEmpty { shapeCache.store(fresh, for: signature) }
        concatRun?.finish(signature: signature, ranAll: !needed.contains(false))
        return try wanted.map { id in
            guard let t = values[id] ?? constants[id] else { throw EngineError(.executionFailed, "output slot \(id) was not computed") }
            return t
        }
    }
}

extension ExecutionPlan {
    /// Bytes of the distinct storage behind the non-constant values in `values` (views of one buffer count once).
    func liveBytes(_ values: [Tensor?]) -> Int {
        let constants = Set(constantSlots.map(\.0))
        return distinctStorageBytes(values.indices.lazy.filter { !constants.contains($0) }.compactMap { values[$0] })
    }
}

/// Bytes of the distinct storage buffers behind `tensors` (string tensors count their element bytes).
func distinctStorageBytes<S: Sequence>(_ tensors: S) -> Int where S.Element == Tensor {
    var seen = Set<ObjectIdentifier>()
    var total = 0
    for tensor in tensors {
        if tensor.dtype == .string {
            total += tensor.strings.reduce(0) { $0 + $1.count }
        } else if seen.insert(ObjectIdentifier(tensor.storage)).inserted {
            total += tensor.storage.byteCount
        }
    }
    return total
}

/// Fills output dtypes and shapes the model does not declare by running the plan on zero inputs (batch 1 and 2).
enum OutputProbe {
    static func complete(_ specs: [TensorSpec], declared: [ValueInfo], inputs: [TensorSpec], plan: ExecutionPlan, slots: [Int]) -> [TensorSpec] {
        let missing = zip(specs, declared).contains { $0.1.elementType == nil || $0.1.shape == nil }
        // Loops could spin on zero inputs, so graphs with them keep their declared specs.
        guard missing, inputs.allSatisfy({ $0.dtype != .string }), !plan.steps.contains(where: { $0.opType.hasPrefix("Loop") }) else { return specs }
        func feeds(_ dynamic: Int) -> [String: Tensor] {
            var f: [String: Tensor] = [:]
            for spec in inputs { f[spec.name] = Tensor(dtype: spec.dtype, shape: spec.shape.map { $0.value ?? dynamic }) }
            return f
        }
        // A failed probe (e.g. zeros that a Range or Reshape rejects) leaves the declared specs as they are.
        guard let one = try? plan.execute(feeds: feeds(1), wanted: slots), let two = try? plan.execute(feeds: feeds(2), wanted: slots) else { return specs }
        let symbolicNames = Set(inputs.flatMap { $0.shape.compactMap { if case .symbolic(let n) = $0 { return n } else { return nil } } })
        let name = symbolicNames.count == 1 ? symbolicNames.first! : ""
        return specs.indices.map { i in
            var spec = specs[i]
            if declared[i].elementType == nil { spec.dtype = one[i].dtype }
            if declared[i].shape == nil && one[i].rank == two[i].rank {
                spec.shape = zip(one[i].shape, two[i].shape).map { $0 == $1 ? .fixed($0) : .symbolic(name) }
            }
            return spec
        }
    }
}
