import ONNX
import Tensor

/// Lowers an optimized graph to an `ExecutionPlan`, one responsibility per method, in the order `CompiledModel.init`
/// calls them: slots and kernels (`lower`), graph outputs (`bindOutputs`), liveness (`markReleases`), shape-derived
/// steps (`markShapeDerived`), then `plan`.
struct PlanBuilder {
    /// One slot per value name, in order of first mention.
    private(set) var slots: [String: Int] = [:]
    /// Slot of each graph input.
    private(set) var inputSlots: [String: Int] = [:]
    /// Slot of each graph output.
    private(set) var outputSlots: [String: Int] = [:]
    /// Steps in execution order, parallel to the optimizer's nodes.
    private(set) var steps: [ExecutionStep] = []
    /// Constants read at run time, by slot.
    private(set) var usedConstants: [Int: Tensor] = [:]
    /// Index of the step producing each slot.
    private(set) var producers: [Int: Int] = [:]
    /// Bytes of constants the kernels consumed (packed) instead of reading them from slots.
    private(set) var consumedBytes = 0
    /// Axis attribute of each plain Concat step, by step index (candidates for `ConcatPlacement`).
    private(set) var concatAxes: [Int: Int] = [:]
    /// False keeps every Concat copying (tests compare both).
    var placesConcatInputs = true

    /// Starts a plan whose first slots are the graph inputs, in order.
    init(inputs: [TensorSpec]) {
        for spec in inputs { inputSlots[spec.name] = slot(spec.name) }
    }

    private mutating func slot(_ name: String) -> Int {
        if let s = slots[name] { return s }
        slots[name] = slots.count
        return slots.count - 1
    }

    /// Prepares each node's kernel (with its constant inputs) and assigns slots to what it reads and writes.
    /// A constant is dropped from `constants` after its last reader (unless `keeping` names it), so one its kernels
    /// packed is freed as lowering goes rather than living beside its packed copy until the end.
    mutating func lower(_ nodes: [PlannedNode], constants: inout [String: Tensor], keeping: Set<String>, opset: Int) throws {
        var readersLeft: [String: Int] = [:]
        for planned in nodes {
            for name in Set(planned.node.inputs) where constants[name] != nil { readersLeft[name, default: 0] += 1 }
        }
        for planned in nodes {
            let node = planned.node
            defer {
                for name in Set(node.inputs) where !keeping.contains(name) {
                    guard let left = readersLeft[name] else { continue }
                    if left > 1 { readersLeft[name] = left - 1 } else { readersLeft[name] = nil; constants[name] = nil }
                }
            }
            var known: [Int: Tensor] = [:]
            for (i, name) in node.inputs.enumerated() where !name.isEmpty {
                if let c = constants[name] { known[i] = c }
            }
            let ctx = OpContext(node: node, opset: opset, constants: known, activation: planned.activation)
            guard let factory = operatorFactory(for: node) else {
                // `checkSupported` ran on every node first, so this is a broken invariant rather than a bad model.
                preconditionFailure("no kernel for checked node \(ctx.label)")
            }
            let prepared = try factory(ctx)
            consumedBytes += prepared.consumedInputs.reduce(0) { $0 + (known[$1]?.byteCount ?? 0) }
            ctx.releaseConstants()
            var inputIDs: [Int] = []
            for (i, name) in node.inputs.enumerated() {
                if name.isEmpty || prepared.consumedInputs.contains(i) { inputIDs.append(-1); continue }
                let id = slot(name)
                if let c = constants[name] { usedConstants[id] = c }
                inputIDs.append(id)
            }
            let outputIDs = node.outputs.map { $0.isEmpty ? -1 : slot($0) }
            for o in outputIDs where o >= 0 { producers[o] = steps.count }
            if node.opType == "Concat" && (node.domain.isEmpty || node.domain == "ai.onnx"), case .int(let axis)? = node.attributes["axis"] {
                concatAxes[steps.count] = Int(axis)
            }
            let biased = planned.residual || (node.opType == "MatMul" && node.inputs.count == 3)
            let scaled = (node.opType == "Conv" || node.opType == channelsLastPointwiseOp) && node.inputs.count > fusedChannelScaleInput
                && !node.inputs[fusedChannelScaleInput].isEmpty
            // A folded input normalization runs before the conv: named first.
            let normalized = node.opType == "Conv" && node.inputs.count > fusedInputAffineInput ? "BatchNormalization+" : ""
            let fused = (scaled ? "+Mul" : "") + (biased ? "+Add" : "") + (planned.activation == .none ? "" : "+\(planned.activation)")
            steps.append(ExecutionStep(label: ctx.label, opType: normalized + node.opType + fused, kernel: prepared.kernel, inputs: inputIDs,
                                       outputs: outputIDs))
        }
    }

    /// Gives each graph output a slot and its spec; throws when an output is neither produced, an input nor a constant.
    mutating func bindOutputs(_ outputs: [ValueInfo], constants: [String: Tensor]) throws -> [TensorSpec] {
        var specs: [TensorSpec] = []
        for out in outputs {
            let id = slot(out.name)
            outputSlots[out.name] = id
            if let c = constants[out.name] { usedConstants[id] = c }
            guard usedConstants[id] != nil || inputSlots[out.name] != nil || producers[id] != nil else {
                throw EngineError(.invalidModel, "graph output '\(out.name)' is not produced by any node")
            }
            let dtype = out.elementType ?? usedConstants[id]?.dtype ?? .float32
            specs.append(TensorSpec(name: out.name, dtype: dtype, shape: out.shape ?? []))
        }
        return specs
    }

    /// Liveness: releases each slot after its last reader (inputs, constants and outputs stay).
    mutating func markReleases() {
        var retained = Set(outputSlots.values).union(usedConstants.keys)
        retained.formUnion(inputSlots.values)
        var lastUse: [Int: Int] = [:]
        for (i, step) in steps.enumerated() {
            for id in step.inputs where id >= 0 { lastUse[id] = i }
            for id in step.outputs where id >= 0 && lastUse[id] == nil { lastUse[id] = i }
        }
        for (id, i) in lastUse where !retained.contains(id) { steps[i].releases.append(id) }
    }

    /// Marks the steps whose outputs follow from the input shapes alone (Shape/Size of tensors whose shapes follow
    /// from the input shapes, and what only those feed), computed once per shape signature; `nodes` are the ones lowered.
    mutating func markShapeDerived(_ nodes: [PlannedNode]) {
        let shapeParameterOps: Set<String> = ["Reshape", "Expand", "Tile", "Slice", "Pad", "Resize", "Upsample", "Split", "Squeeze",
                                              "Unsqueeze", "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                                              "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp", "TopK", "MaxUnpool",
                                              "DFT", "STFT"]
        // Ops whose every input is a size: their outputs are shape-stable only when all inputs are shape-derived.
        let sizeOps: Set<String> = ["ConstantOfShape", "Range", "HannWindow", "HammingWindow", "BlackmanWindow", "MelWeightMatrix"]
        let dataShaped: Set<String> = ["NonZero", "Compress", "OneHot", "NonMaxSuppression", "Unique", "If", "Loop", "Scan",
                                       "SequenceMap", "SequenceAt", "SplitToSequence", "ConcatFromSequence"]
        var stable = Set(inputSlots.values).union(usedConstants.keys)
        var derived = Set(usedConstants.keys)
        for (i, planned) in nodes.enumerated() {
            let op = planned.node.opType
            let ins = steps[i].inputs.filter { $0 >= 0 }
            let outs = steps[i].outputs.filter { $0 >= 0 }
            // Random draws are neither cached per shape nor treated as shape-derived values.
            if randomOperatorNames.contains(op) { continue }
            if op == "Shape" || op == "Size" {
                if ins.allSatisfy({ stable.contains($0) }) {
                    derived.formUnion(outs); stable.formUnion(outs); steps[i].shapeDerived = true
                }
                continue
            }
            if !ins.isEmpty && ins.allSatisfy({ derived.contains($0) }) {
                derived.formUnion(outs); stable.formUnion(outs); steps[i].shapeDerived = true
                continue
            }
            let parameters = sizeOps.contains(op) ? ins : Array(steps[i].inputs.dropFirst().filter { $0 >= 0 })
            let needsDerived = shapeParameterOps.contains(op) || sizeOps.contains(op)
            if dataShaped.contains(op) { continue }
            if ins.allSatisfy({ stable.contains($0) }) && (!needsDerived || parameters.allSatisfy({ derived.contains($0) })) {
                stable.formUnion(outs)
            }
        }
    }

    /// The plan over `inputs` and `outputs` (both in graph order, every one given a slot above).
    func plan(inputs: [TensorSpec], outputs: [TensorSpec]) -> ExecutionPlan {
        ExecutionPlan(steps: steps, slotCount: slots.count,
                      constantSlots: usedConstants.sorted { $0.key < $1.key }.map { ($0.key, $0.value) },
                      inputSlots: inputs.compactMap { spec in inputSlots[spec.name].map { (spec.name, $0) } }, producers: producers,
                      outputSlots: outputs.compactMap { outputSlots[$0.name] }, concatAxes: placesConcatInputs ? concatAxes : [:])
    }

    /// Slots of `outputs`, in order.
    func slots(of outputs: [TensorSpec]) -> [Int] { outputs.compactMap { outputSlots[$0.name] } }
}
