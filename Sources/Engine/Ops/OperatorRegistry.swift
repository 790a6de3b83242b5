/// Every operator the engine implements, by op type (domain `ai.onnx`).
let operatorTable: OperatorTable = {
    var table: OperatorTable = [:]
    for part in [elementwiseOperators, castOperators, shapeOperators, reduceOperators, convOperators, denseOperators, resizeOperators, indexingOperators, einsumOperators] {
        table.merge(part) { first, _ in first }
    }
    return table
}()
