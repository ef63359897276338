import Dispatch
import Synchronization

/// Runs numbered tasks on a fixed number of workers with `concurrentPerform`.
///
/// Workers pull the next task index from a shared counter, so uneven tasks balance
/// out; each worker is identified by an index in `0..<threads` so it can own scratch
/// memory allocated once by the caller. Results never depend on which worker ran a
/// task, which is what makes the core's output identical for any thread count.
public struct TileScheduler: Sendable {
    public let threads: Int

    public init(threads: Int) {
        self.threads = max(1, threads)
    }

    public func run(tasks count: Int, _ body: @Sendable (_ task: Int, _ worker: Int) -> Void) {
        guard count > 0 else { return }
        let workers = min(threads, count)
        if workers == 1 {
            for task in 0..<count { body(task, 0) }
            return
        }
        let next = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: workers) { worker in
            while true {
                let task = next.add(1, ordering: .relaxed).oldValue
                if task >= count { break }
                body(task, worker)
            }
        }
    }
}
