import ONNX

/// Every operator the engine implements in the default domain (`ai.onnx`), by op type.
let operatorTable: OperatorTable = {
    var table: OperatorTable = [:]
    for part in [elementwiseOperators, castOperators, shapeOperators, reduceOperators, convOperators, denseOperators, resizeOperators, indexingOperators, einsumOperators, quantizationOperators, detectionOperators, recurrentOperators, samplingOperators, uniqueOperators, lossOperators, controlFlowOperators, miscOperators, sequenceOperators, spectralOperators, roiAlignOperators, randomOperators, textOperators, normalizationOperators, bitwiseOperators, centerCropPadOperators, lpPoolOperators, rotaryEmbeddingOperators, attentionOperators, col2ImAffineGridOperators, deformConvOperators] {
        table.merge(part) { first, _ in first }
    }
    // Scatter (opset 9-10) is ScatterElements without reductions.
    table["Scatter"] = table["ScatterElements"]
    table.merge(defaultDomainContribOperators) { first, _ in first }
    for name in stringDataMovementOperators { if let factory = table[name] { table[name] = movingStrings(factory) } }
    return table
}()

/// The traditional-ML domain (scikit-learn and similar exporters).
let mlDomain = "ai.onnx.ml"

/// Operators of the `ai.onnx.ml` domain, by op type.
let mlOperatorTable: OperatorTable = mlOperators.merging(svmOperators) { first, _ in first }.merging(treeEnsembleOperators) { first, _ in first }
    .merging(mlEncoderOperators) { first, _ in first }

/// True for the default domain, which ONNX writes as "" or "ai.onnx".
func isDefaultDomain(_ domain: String) -> Bool { domain.isEmpty || domain == "ai.onnx" }

/// The factory of `node`'s operator in its domain, or nil when the engine does not implement it.
func operatorFactory(for node: Node) -> (@Sendable (OpContext) throws -> PreparedKernel)? {
    if isDefaultDomain(node.domain) { return operatorTable[node.opType] }
    if node.domain == mlDomain { return mlOperatorTable[node.opType] }
    if node.domain == fusedDomain { return fusedOperatorTable[node.opType] ?? channelsLastOperators[node.opType] ?? channelsLastBlockOperators[node.opType] }
    if node.domain == contribDomain { return contribOperatorTable[node.opType] }
    return nil
}

/// Checks that the engine can run `node`, with an error that says what to do otherwise.
func checkSupported(_ node: Node, opset: Int) throws {
    let label = "\(node.opType) node '\(node.name)'"
    if node.domain == mlDomain, let reason = mlRejectionReason(node.opType) {
        throw EngineError(.unsupportedOperator, "\(label): \(reason)")
    }
    guard isDefaultDomain(node.domain) || node.domain == mlDomain || node.domain == contribDomain else {
        throw EngineError(.unsupportedOperator, "\(label): operator \(node.opType) of domain '\(node.domain)' is not supported (only ai.onnx, ai.onnx.ml and com.microsoft)")
    }
    guard operatorFactory(for: node) != nil else {
        let domain = isDefaultDomain(node.domain) ? "opset \(opset)" : "domain \(node.domain)"
        throw EngineError(.unsupportedOperator, "\(label): operator \(node.opType) (\(domain)) is not supported")
    }
}

/// Names listed by `CompiledModel.supportedOperators`: default-domain op types bare, others as `domain:OpType`.
let supportedOperatorNames: Set<String> = Set(operatorTable.keys).union(mlOperatorTable.keys.map { "\(mlDomain):\($0)" })
    .union(contribOperatorTable.keys.map { "\(contribDomain):\($0)" })
