/// Every operator the engine implements, by op type (domain `ai.onnx`).
let operatorTable: OperatorTable = {
    var table: OperatorTable = [:]
    for part in [elementwiseOperators, castOperators, shapeOperators, reduceOperators, convOperators, denseOperators, resizeOperators, indexingOperators, einsumOperators, quantizationOperators, detectionOperators, recurrentOperators, samplingOperators, uniqueOperators, lossOperators, controlFlowOperators, miscOperators] {
        table.merge(part) { first, _ in first }
    }
    // Scatter (opset 9-10) is ScatterElements without reductions.
    table["Scatter"] = table["ScatterElements"]
    return table
}()
