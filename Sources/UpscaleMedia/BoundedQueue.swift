import Foundation

/// A blocking FIFO between two pipeline stages, bounded by the summed cost of
/// its items (a picture costs 1, a small packet 0), so a fast producer waits
/// instead of filling memory with 8K frames.
final class BoundedQueue<Element> {
    private var items: [(Element, Int)] = []
    private var head = 0
    private var load = 0
    private var finished = false
    private var cancelled = false
    private let capacity: Int
    private let condition = NSCondition()

    init(capacity: Int) { self.capacity = max(1, capacity) }

    /// Waits for room; returns false once the queue was cancelled.
    @discardableResult
    func push(_ element: Element, cost: Int = 1) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while !cancelled && cost > 0 && load + cost > capacity { condition.wait() }
        if cancelled { return false }
        items.append((element, cost))
        load += cost
        condition.broadcast()
        return true
    }

    /// Waits until an item of `cost` would be taken without waiting; false once cancelled.
    /// A sole producer calls it before it fills a picture from a pool, so the picture it
    /// is about to make is not one more held while a full queue drains.
    func waitForRoom(cost: Int = 1) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while !cancelled && load + cost > capacity { condition.wait() }
        return !cancelled
    }

    /// The next element, or nil when the producer finished and all was taken, or on cancel.
    func pop() -> Element? {
        condition.lock()
        defer { condition.unlock() }
        while !cancelled && head == items.count && !finished { condition.wait() }
        if cancelled || head == items.count { return nil }
        let (element, cost) = items[head]
        head += 1
        if head > 64 && head * 2 > items.count {
            items.removeFirst(head)
            head = 0
        }
        load -= cost
        condition.broadcast()
        return element
    }

    /// The producer is done; consumers drain what is left, then get nil.
    func finish() {
        condition.lock()
        finished = true
        condition.broadcast()
        condition.unlock()
    }

    /// Wakes everyone; pushes fail and pops return nil from now on.
    func cancel() {
        condition.lock()
        cancelled = true
        items.removeAll()
        head = 0
        condition.broadcast()
        condition.unlock()
    }
}
