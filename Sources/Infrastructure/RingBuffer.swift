/// A FIFO queue over a growable circular buffer: append and removeFirst are O(1) amortized.
///
/// `Array.removeFirst()` shifts every remaining element, so draining n queued jobs cost O(n^2).
struct RingBuffer<Element> {
    private var storage: [Element?]
    private var head = 0
    /// Number of queued elements.
    private(set) var count = 0
    /// Elements copied by growth so far: at most twice the elements ever appended (amortized O(1) per append).
    private(set) var relocations = 0

    /// An empty queue with room for `capacity` elements before it grows.
    init(capacity: Int = 16) { storage = Array(repeating: nil, count: max(1, capacity)) }

    /// True when nothing is queued.
    var isEmpty: Bool { count == 0 }

    /// Adds `element` at the back, doubling the storage when full.
    mutating func append(_ element: Element) {
        if count == storage.count { grow() }
        storage[(head + count) % storage.count] = element
        count += 1
    }

    /// Removes and returns the front element, nil when empty.
    mutating func popFirst() -> Element? {
        guard count > 0 else { return nil }
        let element = storage[head]
        storage[head] = nil
        head = (head + 1) % storage.count
        count -= 1
        return element
    }

    private mutating func grow() {
        var larger = [Element?](repeating: nil, count: storage.count * 2)
        for i in 0..<count { larger[i] = storage[(head + i) % storage.count] }
        relocations += count
        storage = larger
        head = 0
    }
}
