import Foundation
import ONNX

extension GraphOptimizer {
    /// Whether `OSPREY_SQUEEZE_POOL_FUSION=0` keeps squeeze-and-excitation pools as steps of their own (A/B runs).
    static var squeezePoolFusionDisabledByEnvironment: Bool {
        guard let value = getenv("OSPREY_SQUEEZE_POOL_FUSION") else { return false }
        return String(cString: value) == "0"
    }

    /// Gives a channels-last depthwise step (alone, or an expand + depthwise block) whose output a squeeze-and-excitation
    /// branch pools a second output, the channel means: each task sums the rows it has just written, still in cache,
    /// instead of a pooling step reading the whole tensor again on one thread (EfficientNet-B0's first one re-read
    /// 1.6 MB; sixteen such steps were 2% of its time at one thread and 3% at two).
    mutating func fuseChannelsLastSqueezePools() {
        guard !Self.squeezePoolFusionDisabledByEnvironment else { return }
        var index = 0
        while index < nodes.count {
            defer { index += 1 }
            let pool = nodes[index].node
            guard pool.domain == fusedDomain, pool.opType == channelsLastMeanOp, pool.inputs.count == 1, pool.outputs.count == 1,
                  let source = pool.inputs.first,
                  let p = nodes[..<index].lastIndex(where: { $0.node.outputs.contains(source) }) else { continue }
            let producer = nodes[p].node
            let projects = producer.inputs.count > separablePointwiseWeightsInput && !producer.inputs[separablePointwiseWeightsInput].isEmpty
            guard producer.domain == fusedDomain, producer.outputs == [source],
                  producer.opType == channelsLastDepthwiseOp || (producer.opType == channelsLastInvertedResidualOp && !projects) else { continue }
            nodes[p].node.outputs.append(pool.outputs[0])
            nodes.remove(at: index)
            index -= 1
        }
    }
}
