import Infrastructure
import Tensor

extension CompiledModel {
    /// Runs several requests' feeds as one batch of independent rows, without stacking them, when the batch's
    /// schedule is one row per part (`runSplittingRows` would cut every row apart): each part reads its row where the
    /// request's own tensor holds it, and a one-row request gets its part's outputs as they are, with no batch-sized
    /// gather before the run nor scatter after it. Returns each request's outputs, in order, exactly as
    /// `runSplittingRows` on the stacked batch would (each part is the same 1-thread run of the same row).
    ///
    /// `parts` is as in `runSplittingRows` (nil: automatic). Nil when the batch would run another schedule, an output
    /// is not declared with a dynamic first axis, the requests do not stack (feed names, dtypes or trailing shapes
    /// differ, a feed has no batch axis, no rows or is a string), or an output does not keep one row per input row:
    /// the caller then stacks the batch and runs it as before. The same assumption as `runSplittingRows`: each output
    /// row depends only on the same input row.
    public func runRequestRows(_ requests: [[String: Tensor]], parts requested: Int? = nil) throws -> [[String: Tensor]]? {
        guard let rowsPerRequest = oneRowPerPart(requests, parts: requested) else { return nil }
        let rows = rowsPerRequest.reduce(0, +)
        // Part p computes row `rowOf[p]` of request `requestOf[p]`.
        var requestOf: [Int] = [], rowOf: [Int] = []
        for (request, count) in rowsPerRequest.enumerated() {
            for row in 0..<count {
                requestOf.append(request)
                rowOf.append(row)
            }
        }
        let partFeeds = (0..<rows).map { part in requests[requestOf[part]].mapValues { $0.rows(rowOf[part]..<(rowOf[part] + 1)) } }
        let started = SystemClock.nanoseconds()
        var results = [Result<[String: Tensor], Error>?](repeating: nil, count: rows)
        results.withUnsafeMutableBufferPointer { slots in
            parallelParts(rows) { part in slots[part] = Result { try run(partFeeds[part]) } }
        }
        rowCost.record(rows: rows, parallel: min(rows, EngineThreads.threads), nanoseconds: SystemClock.nanoseconds() &- started)
        let partOutputs = try results.map { try $0!.get() }
        guard partOutputs.allSatisfy({ $0.values.allSatisfy { $0.rank > 0 && $0.dtype != .string && $0.shape[0] == 1 } }) else { return nil }
        var answers: [[String: Tensor]] = []
        var part = 0
        for count in rowsPerRequest {
            let own = partOutputs[part..<(part + count)]
            part += count
            if count == 1 {
                answers.append(own.first!)
                continue
            }
            // Rows whose outputs differ in shape (sized by their content) do not stack: the caller runs the batch.
            guard let merged = Tensor.stackingRows(Array(own), rows: Array(repeating: 1, count: count)) else { return nil }
            answers.append(merged)
        }
        return answers
    }

    /// Each request's rows when these requests, as one batch, run one row per part (`parts`, nil: automatic), each
    /// part a 1-thread run of one row: outputs declared with a dynamic first axis, requests that stack, 2 rows or more.
    /// Nil otherwise (an output declared without a dynamic first axis cannot keep one row per input row: not worth
    /// running to find out).
    func oneRowPerPart(_ requests: [[String: Tensor]], parts requested: Int? = nil) -> [Int]? {
        guard outputs.allSatisfy({ $0.dtype != .string && $0.shape.first.map { $0.value == nil } == true }),
              let rowsPerRequest = Self.stackableRows(requests) else { return nil }
        let rows = rowsPerRequest.reduce(0, +)
        return rows >= 2 && rowParts(rows: rows, requested: requested) == rows ? rowsPerRequest : nil
    }

    /// Each request's rows when the requests stack into one batch: the same feed names, and per name the same dtype
    /// and trailing shape, every feed of a request with the same first-axis length; nil otherwise.
    static func stackableRows(_ requests: [[String: Tensor]]) -> [Int]? {
        guard let first = requests.first else { return nil }
        var counts: [Int] = []
        for request in requests {
            guard request.count == first.count, let rows = commonRows(request), rows > 0 else { return nil }
            for (name, tensor) in request {
                guard let model = first[name], model.dtype == tensor.dtype, model.shape.dropFirst() == tensor.shape.dropFirst() else { return nil }
            }
            counts.append(rows)
        }
        return counts
    }
}
