// Fuzz target: a decoded-but-hostile model through the engine: `CompiledModel(model:)` (ordering, constant folding,
// fusion, shape inference, packing) and one run with zero-filled inputs of the declared shapes (dynamic dims = 1).
// Every failure must be a thrown error; a trap, sanitizer report or runaway allocation is a bug.
import Engine
import ONNX
import Tensor

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzEngine(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let model = try? Model(serialized: bytes), let compiled = try? CompiledModel(model: model) else { return 0 }
    var feeds: [String: Tensor] = [:]
    for spec in compiled.inputs {
        let shape = spec.shape.map { max(0, $0.value ?? 1) }
        // Inputs the fuzzer declared enormous are the caller's business (the server bounds request sizes).
        guard shape.count <= 8, shape.allSatisfy({ $0 <= 4096 }),
              shape.reduce(1, { $0.multipliedReportingOverflow(by: $1).overflow ? Int.max : $0 * $1 }) <= 1 << 16 else { return 0 }
        feeds[spec.name] = Tensor(dtype: spec.dtype, shape: shape)
    }
    _ = try? compiled.run(feeds)
    return 0
}
