import CKernelShim
import Tensor

// A quantized MatMul / Gemm with a constant B on few rows of A (batch 1 classifiers): `runQuantizedMatMul`
// computes C^T = B^T x A^T with A's rows as 16-column panels, 15 of 16 lanes idle for one row. `osprey_qgemv_u8s8`
// broadcasts A's bytes against B packed once as panels of output columns instead.

/// Rows of A below which the column-panel kernel runs (from there on the GEMM's A panels are full enough).
let quantizedGemvMaximumRows = 8

/// A `QuantizedMatMulPlan`'s B packed into `osprey_qgemv_u8s8` panels (N columns of K int8, 16 columns a panel).
struct QuantizedGemvPanels: @unchecked Sendable {
    let plan: QuantizedMatMulPlan
    let panels: [UInt8]

    init(_ plan: QuantizedMatMulPlan) {
        self.plan = plan
        let count = (plan.n + 15) / 16 * (plan.rowStride / 4) * 64
        var panels = [UInt8](repeating: 0, count: max(1, count))
        plan.rows.withUnsafeBytes { rows in
            osprey_qpack_u8_rows(Int32(plan.k), Int32(plan.n), rows.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(plan.rowStride), 0, &panels)
        }
        self.panels = panels
    }

    /// `runQuantizedMatMul` for A of `shape` [..., M, K] (M * leading dims rows): same outputs, per-column epilogue.
    func run(a: UnsafePointer<UInt8>, signed: Bool, aZero: Int32, shape: [Int], output: QuantizedMatMulOutput, columnBias: [Int32]? = nil) -> Tensor {
        quantizedProduct(plan: plan, signed: signed, aZero: aZero, shape: shape, output: output, columnBias: columnBias,
                         transposed: false) { rows, ep, o in
            var e = ep
            osprey_qgemv_u8s8(Int32(rows), Int32(plan.n), Int32(plan.k), a, Int32(plan.k), signed ? 1 : 0, panels, &e, o.baseAddress!,
                              Int32(plan.n))
        }
    }
}
