import Dispatch
import Synchronization

/// Runs numbered tasks on a fixed number of workers.
///
/// Workers pull the next task index from a shared counter, so uneven tasks balance
/// out; each worker is identified by an index in `0..<threads` so it can own scratch
/// memory allocated once by the caller. Results never depend on which worker ran a
/// task, which is what makes the core's output identical for any thread count.
///
/// The calling thread is worker 0; workers 1… each have their own serial Dispatch queue,
/// and a call hands each of them the task loop and waits for all. (With
/// `DispatchQueue.concurrentPerform` the second worker of a 2-core machine often started
/// too late or not at all: one 4K→8K run measured 1.0x, others 1.6–1.9x, from the same
/// binary. Serial queues always get a thread of their own.)
public final class TileScheduler: Sendable {
    public let threads: Int
    private let queues: [DispatchQueue]

    public init(threads: Int) {
        self.threads = max(1, threads)
        queues = (1..<max(1, threads)).map { DispatchQueue(label: "upscale.worker.\($0)", qos: .userInitiated) }
    }

    public func run(tasks count: Int, _ body: @Sendable (_ task: Int, _ worker: Int) -> Void) {
        guard count > 0 else { return }
        let workers = min(threads, count)
        if workers == 1 {
            for task in 0..<count { body(task, 0) }
            return
        }
        let next = Atomic<Int>(0)
        // `body` does not escape: `run` returns only after every worker has finished. (A task
        // must not call `run` on the same scheduler: its worker's queue would wait on itself.)
        withoutActuallyEscaping(body) { body in
            let loop: @Sendable (Int) -> Void = { worker in
                while true {
                    let task = next.add(1, ordering: .relaxed).oldValue
                    if task >= count { break }
                    body(task, worker)
                }
            }
            let group = DispatchGroup()
            for worker in 1..<workers {
                queues[worker - 1].async(group: group) { loop(worker) }
            }
            loop(0)
            group.wait()
        }
    }
}
