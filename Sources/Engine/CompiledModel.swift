import Foundation
import ONNX
import Tensor

/// An ONNX model compiled once into an immutable execution plan; `run` is synchronous and thread-safe.
///
/// Compilation lowers float16 and bfloat16 computation to float32 (`HalfFloatLowering`), sorts the graph, folds constants,
/// folds BatchNormalization into Conv, fuses activations into Conv/Gemm epilogues and packs Conv weights once.
/// Values that depend only on input shapes (Shape -> Gather -> Concat -> Reshape chains) are computed on the
/// first run of each input-shape signature and cached.
public final class CompiledModel: Sendable {
    /// Graph inputs that are not initializers.
    public let inputs: [TensorSpec]
    /// Graph outputs.
    public let outputs: [TensorSpec]
    /// Producer, opsets and metadata.
    public let info: ModelSummary
    /// Operators the engine implements with all their attributes: `ai.onnx` op types bare, other domains as `ai.onnx.ml:Scaler`.
    public static let supportedOperators: Set<String> = supportedOperatorNames

    private let plan: ExecutionPlan
    private let inputSlots: [String: Int]
    private let outputSlots: [String: Int]
    /// Inputs whose element type the model leaves undeclared (subgraph outer-scope values): any dtype is accepted.
    private let undeclaredTypes: Set<String>
    /// Declared input shapes; absent when the model leaves the rank unknown.
    private let declaredShapes: [String: [DeclaredDimension]]
    /// Bytes of the constants the plan keeps plus those its kernels consumed (packed), counted at their source size.
    public let retainedConstantBytes: Int
    /// Cost per row of recent batch runs, which decides whether `runSplittingRows` splits.
    let rowCost = RowCostEstimate()

    /// Compiles `model`; `baseDirectory` is where external tensor data would be resolved (the decoder already inlined it).
    public convenience init(model: consuming ONNX.Model, baseDirectory: String? = nil) throws {
        try self.init(model: model, baseDirectory: baseDirectory, fuseResiduals: true,
                      channelsLast: !GraphOptimizer.channelsLastDisabledByEnvironment)
    }

    /// Compiles `model` for in-process use, where graph inputs and outputs may also be sequences and optionals (fed and
    /// returned as sequence / empty-optional `Tensor` values, as subgraph bodies exchange them); the server's loader
    /// keeps refusing such models because its protocols carry tensors only.
    public convenience init(model: consuming ONNX.Model, allowingContainerValues: Bool) throws {
        try self.init(model: model, baseDirectory: nil, fuseResiduals: true, isSubgraph: allowingContainerValues,
                      channelsLast: !GraphOptimizer.channelsLastDisabledByEnvironment)
    }

    /// Compiles `model`; `fuseResiduals: false` keeps residual Adds as separate steps, `fuseChains: false` keeps
    /// decomposed activation chains, constant scale-and-shift after convs, channel-scale Muls before 1x1 convs and QDQ
    /// patterns as their nodes (tests compare both);
    /// `isSubgraph` marks a control-flow body; `placeConcatInputs: false` keeps every Concat copying its inputs;
    /// `channelsLast: false` keeps depthwise-separable chains NCHW (`OSPREY_CHANNELS_LAST=0` does so for models
    /// compiled through the public initializers).
    init(model: consuming ONNX.Model, baseDirectory: String?, fuseResiduals: Bool, fuseChains: Bool = true, isSubgraph: Bool = false,
         placeConcatInputs: Bool = true, channelsLast: Bool = true) throws {
        // The optimizer's constant table becomes the only owner of the initializers (when the caller gives the model
        // up), so weights that BatchNormalization folding or packing replace are freed as compilation goes instead
        // of all three copies living until the end (ResNet-18 batch 8: peak RSS 157 -> 140 MiB).
        info = ModelSummary(model)
        var constants: [String: Tensor] = [:]
        for (name, tensor) in model.graph.initializers { constants[name] = tensor }
        model.graph.initializers = []
        var graph = model.graph
        // Before anything reads dtypes: float16 values compute in float32 (inputs and outputs keep their types).
        HalfFloatLowering.lower(&graph, constants: &constants)
        let opset = Int(model.defaultOpset)
        guard opset >= 1 else { throw EngineError(.invalidModel, "the model imports no ai.onnx opset") }
        let inputInfos = graph.inputs.filter { constants[$0.name] == nil }
        inputs = inputInfos.map { TensorSpec(name: $0.name, dtype: $0.elementType ?? .float32, shape: $0.shape ?? []) }
        try Self.checkServable(graph, inputs: inputInfos, opset: opset, isSubgraph: isSubgraph)

        let available = Set(inputInfos.map(\.name)).union(constants.keys)
        var optimizer = try Self.optimize(graph, constants: consume constants, available: available, opset: opset,
                                          fuseResiduals: fuseResiduals, fuseChains: fuseChains,
                                          channelsLast: channelsLast)
        var builder = PlanBuilder(inputs: inputs)
        builder.placesConcatInputs = placeConcatInputs
        // The builder owns the only table of constants from here, so each weight is freed once its last reader has
        // packed it (ConvNeXt-T peak RSS 248 -> 151 MiB: every packed copy used to meet every original).
        var planConstants = optimizer.constants
        optimizer.constants = [:]
        try builder.lower(optimizer.nodes, constants: &planConstants, keeping: Set(graph.outputs.map(\.name)), opset: opset)
        let outputSpecs = try builder.bindOutputs(graph.outputs, constants: planConstants)
        builder.markReleases()
        builder.markShapeDerived(optimizer.nodes)

        let plan = builder.plan(inputs: inputs, outputs: outputSpecs)
        self.plan = plan
        retainedConstantBytes = builder.consumedBytes + distinctStorageBytes(builder.usedConstants.values)
        inputSlots = builder.inputSlots
        outputSlots = builder.outputSlots
        outputs = OutputProbe.complete(outputSpecs, declared: graph.outputs, inputs: inputs, plan: plan, slots: builder.slots(of: outputSpecs))
        var declared: [String: [DeclaredDimension]] = [:]
        for info in inputInfos { if let shape = info.shape { declared[info.name] = shape } }
        declaredShapes = declared
        undeclaredTypes = Set(inputInfos.filter { $0.elementType == nil }.map(\.name))
    }

    /// Refuses operators the engine lacks and, for a served (top-level) graph, inputs and outputs that are not tensors.
    private static func checkServable(_ graph: Graph, inputs: [ValueInfo], opset: Int, isSubgraph: Bool) throws {
        for node in graph.nodes { try checkSupported(node, opset: opset) }
        // Served models exchange tensors only; sequences and optionals live inside graphs (and subgraph bodies).
        guard !isSubgraph else { return }
        for info in inputs + graph.outputs where info.kind != .tensor {
            let role = graph.outputs.contains(where: { $0.name == info.name }) ? "output" : "input"
            throw EngineError(.unsupportedOperator, "graph \(role) '\(info.name)' is a \(info.kind.rawValue), not a tensor; Osprey serves tensor inputs and outputs only")
        }
    }

    /// Orders the nodes and runs the optimizer passes (constant folding, BatchNormalization folding, fusions).
    private static func optimize(_ graph: Graph, constants: consuming [String: Tensor], available: Set<String>, opset: Int,
                                 fuseResiduals: Bool, fuseChains: Bool, channelsLast: Bool) throws -> GraphOptimizer {
        // Control-flow nodes read outer values inside their subgraphs: list those as extra inputs so ordering and liveness see them.
        let nodes = graph.nodes.map { node -> Node in
            guard ["If", "Loop", "Scan", "SequenceMap"].contains(node.opType) else { return node }
            var extended = node
            extended.inputs += Subgraphs.freeVariables(of: node)
            return extended
        }
        let ordered = try GraphOptimizer.topologicalOrder(nodes, available: available)
        var optimizer = GraphOptimizer(nodes: ordered.map { PlannedNode(node: $0) }, constants: consume constants,
                                       graphOutputs: Set(graph.outputs.map(\.name)), opset: opset)
        // Before folding: folding would turn the weights' DequantizeLinear into float32 weights.
        if fuseChains { optimizer.fuseQuantizedPatterns() }
        try optimizer.foldConstants()
        optimizer.foldBatchNormalization()
        if fuseChains {
            optimizer.fuseDynamicQuantizedMatMuls()
            optimizer.fuseQuantizedMatMulDequantization()
            optimizer.fuseLayerNormChains()
            optimizer.fuseActivationChains()
            optimizer.fuseNaNReplacement()
            optimizer.foldConstantAffineIntoConvs()
            optimizer.fuseMatMulBias()
            optimizer.foldLayerScaleIntoMatMuls()
            optimizer.hoistActivationsAboveReshapes()
            optimizer.fuseHeadAttention()
        }
        optimizer.fuseActivations()
        if fuseResiduals { optimizer.fuseResidualAdds() }
        if fuseChains { optimizer.fuseChannelScaleIntoConvs() }
        if channelsLast { optimizer.formChannelsLastRegions() }
        // After the regions: a channels-last pointwise conv packs no NCHW planes to fold the normalization into.
        if fuseChains { optimizer.fuseInputAffineIntoConvs() }
        // Last: only Convs still plain NCHW, with their final inputs and epilogue, pair with their MaxPool.
        if fuseChains { optimizer.fuseConvMaxPools() }
        return optimizer
    }

    /// Reads and compiles an `.onnx` file (external data resolved next to it).
    public convenience init(contentsOf path: String) throws {
        let model: ONNX.Model
        do {
            model = try loadONNXModel(path)
        } catch let error as EngineError {
            throw error
        } catch {
            throw EngineError(.invalidModel, "cannot load '\(path)': \(error)")
        }
        try self.init(model: consume model, baseDirectory: (path as NSString).deletingLastPathComponent)
    }

    deinit { Engine.releaseUnusedMemory(afterReleasing: retainedConstantBytes) }

    /// Runs the model once and returns the most bytes its non-constant values (inputs, intermediates, outputs) held at once.
    public func measurePeakActivationBytes(_ feeds: [String: Tensor]) throws -> Int {
        try validate(feeds)
        var peak = 0
        _ = try plan.execute(feeds: feeds, wanted: outputs.map { outputSlots[$0.name]! }, peakBytes: &peak)
        return peak
    }

    /// Runs the model and returns every output.
    public func run(_ feeds: [String: Tensor]) throws -> [String: Tensor] {
        try run(feeds, outputs: outputs.map(\.name))
    }

    /// Runs the model and returns only `outputs` (steps they do not need are skipped).
    public func run(_ feeds: [String: Tensor], outputs wanted: [String]) throws -> [String: Tensor] {
        try validate(feeds)
        var wantedSlots: [Int] = []
        for name in wanted {
            guard let id = outputSlots[name] else {
                throw EngineError(.unknownOutput, "unknown output '\(name)'; the model's outputs are \(outputs.map(\.name))")
            }
            wantedSlots.append(id)
        }
        let values = try plan.execute(feeds: feeds, wanted: wantedSlots)
        var result: [String: Tensor] = [:]
        for (name, value) in zip(wanted, values) { result[name] = value }
        return result
    }

    /// Runs `parts` (feeds of one or more rows each) as one batch stacked along the first axis and returns every output,
    /// as `run` on the stacked feeds; inputs that the model's first step reads part by part (`PartwiseEntry`) are not
    /// stacked, nor are parts that are consecutive rows of one buffer.
    public func run(stacking parts: [[String: Tensor]]) throws -> [String: Tensor] {
        guard parts.count > 1 else { return try run(parts.first ?? [:]) }
        for part in parts { try validate(part) }
        for spec in inputs {
            let pieces = parts.compactMap { $0[spec.name] }
            guard Tensor.stackableRows(pieces) else {
                throw EngineError(.invalidInput, "input '\(spec.name)': parts \(pieces.map(\.shape)) do not stack along their first axis")
            }
        }
        let wanted = outputs.map(\.name)
        let values = try plan.execute(parts: parts, wanted: wanted.map { outputSlots[$0]! })
        return Dictionary(uniqueKeysWithValues: zip(wanted, values))
    }

    /// Runs all outputs `repeats` times and returns the total seconds spent per operator type, slowest first.
    public func profile(_ feeds: [String: Tensor], repeats: Int = 1) throws -> [(opType: String, seconds: Double, nodes: Int)] {
        try validate(feeds)
        var timings = [Double](repeating: 0, count: plan.steps.count)
        let wanted = outputs.map { outputSlots[$0.name]! }
        for _ in 0..<max(1, repeats) {
            _ = try withUnsafeMutablePointer(to: &timings) { try plan.execute(feeds: feeds, wanted: wanted, timings: $0) }
        }
        var byType: [String: (Double, Int)] = [:]
        for (step, seconds) in zip(plan.steps, timings) {
            let entry = byType[step.opType] ?? (0, 0)
            byType[step.opType] = (entry.0 + seconds, entry.1 + 1)
        }
        return byType.map { (opType: $0.key, seconds: $0.value.0, nodes: $0.value.1) }.sorted { $0.seconds > $1.seconds }
    }

    /// Runs all outputs `repeats` times and returns each step's fastest time in plan order (a per-layer profile that
    /// load on a shared machine inflates less than a sum over the runs).
    public func profileSteps(_ feeds: [String: Tensor], repeats: Int = 1) throws -> [(label: String, opType: String, seconds: Double)] {
        try validate(feeds)
        var fastest = [Double](repeating: .infinity, count: plan.steps.count)
        let wanted = outputs.map { outputSlots[$0.name]! }
        for _ in 0..<max(1, repeats) {
            var timings = [Double](repeating: 0, count: plan.steps.count)
            _ = try withUnsafeMutablePointer(to: &timings) { try plan.execute(feeds: feeds, wanted: wanted, timings: $0) }
            for i in fastest.indices { fastest[i] = min(fastest[i], timings[i]) }
        }
        return zip(plan.steps, fastest).map { (label: $0.label, opType: $0.opType, seconds: $1) }
    }

    /// Bytes held by the process-wide activation buffer pool that every compiled model's runs share.
    public static var bufferPoolStatistics: BufferPoolStatistics { BufferPool.shared.statistics }

    /// Number of Concat buffers the plan shares between producers (for tests).
    var concatGroupCount: Int { plan.concats.groups.count }
    /// How many of them also place at batch > 1 (for tests).
    var stridedConcatGroupCount: Int { plan.concats.groups.filter(\.strided).count }

    /// Inputs a run in parts reads where each part is (for tests).
    var partwiseInputs: Set<String> { Set(plan.partwiseEntries.keys) }

    /// Number of input-shape signatures with cached shape-derived values (for tests and metrics).
    public var cachedPlanCount: Int { plan.shapeCache.count }

    private func validate(_ feeds: [String: Tensor]) throws {
        for name in feeds.keys where inputSlots[name] == nil {
            throw EngineError(.unknownInput, "unknown input '\(name)'; the model's inputs are \(inputs.map(\.name))")
        }
        for spec in inputs {
            guard let t = feeds[spec.name] else {
                throw EngineError(.missingInput, "missing input '\(spec.name)' (expected \(spec.dtype)\(spec.shape))")
            }
            guard t.dtype == spec.dtype || undeclaredTypes.contains(spec.name) else {
                throw EngineError(.invalidInput, "input '\(spec.name)': expected dtype \(spec.dtype), got \(t.dtype)")
            }
            if let declared = declaredShapes[spec.name] {
                guard t.rank == declared.count else {
                    throw EngineError(.invalidInput, "input '\(spec.name)': expected rank \(declared.count) \(declared), got shape \(t.shape)")
                }
                for (axis, dim) in declared.enumerated() {
                    if let fixed = dim.value, fixed != t.shape[axis] {
                        throw EngineError(.invalidInput, "input '\(spec.name)': expected shape \(spec.shape), got \(t.shape) (axis \(axis) must be \(fixed))")
                    }
                }
            }
        }
    }
}
