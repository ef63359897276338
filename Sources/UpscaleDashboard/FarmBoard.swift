import Foundation
import UpscaleFarm

/// The shared PostgreSQL queue, read and steered as `upscale queue … --queue URL` does.
public final class FarmBoard: QueueBoard, @unchecked Sendable {
    private let queue: PostgresQueue
    /// How far back finished chunks feed the throughput chart and the histogram.
    static let historySeconds = 24 * 3600.0

    /// A lost server is waited for `reconnectFor` seconds per request (the page polls again
    /// 2 s later) rather than a worker's 5 minutes: the page says the queue cannot be reached.
    public init(queue: PostgresQueue, reconnectFor: Double = 5) {
        self.queue = queue
        queue.reconnectFor = reconnectFor
    }

    public var title: String { queue.address.description }

    public func read(now: Double) throws -> BoardReading {
        let farmJobs = try queue.list()
        let overall = FarmJob.overallRate(farmJobs)
        var files: [Int64: String] = [:]
        var left = 0.0
        var measured = true
        let jobs = farmJobs.map { job -> BoardJob in
            let file = URL(fileURLWithPath: job.input).lastPathComponent
            files[job.id] = file
            let eta = job.eta(overall: overall)
            if ["queued", "running"].contains(job.state) {
                if let work = job.secondsOfWork(overall: overall) { left += work } else { measured = false }
            }
            return BoardJob(
                id: job.id, file: file, input: job.input, output: job.output, state: job.state,
                progress: job.state == "done" ? 1 : job.frames > 0 ? min(1, Double(job.framesDone) / Double(job.frames)) : nil,
                framesDone: job.state == "done" ? job.frames : job.framesDone, frames: job.frames,
                fps: job.state == "running" ? job.runningFPS : nil, etaSeconds: eta,
                chunksDone: job.chunksDone, chunks: job.chunks, machines: job.machines, attempts: job.attempts,
                // One line with the last attempt's reason, as `queue list` gives it (the log
                // view has every attempt).
                priority: job.priority, error: job.errorSummary, created: job.created, finished: job.finished, notes: job.notes)
        }
        let workers = try queue.workers().map { status -> BoardWorker in
            // "chunk 2/4 of job 7" → "chunk 2/4 of job 7 (file.mov)"
            var current = status.current
            if let text = current, let range = text.range(of: "of job "), let id = Int64(text[range.upperBound...]), let file = files[id] {
                current = text + " (" + file + ")"
            }
            return BoardWorker(name: status.name, host: String(status.name.split(separator: "/").first ?? Substring(status.name)),
                               current: current, fps: status.fps, secondsAgo: status.secondsAgo, stale: status.isStale)
        }
        let history = try queue.history(since: now - Self.historySeconds)
        return BoardReading(
            jobs: jobs, workers: workers, paused: try queue.isPaused(), secondsOfWorkLeft: measured ? left : nil,
            work: history.map { WorkSpan(start: $0.started, end: $0.finished, frames: $0.frames) },
            finishedChunks: history.filter { $0.index >= 0 }.map { FinishedChunk(key: "\($0.job)/\($0.index)@\($0.finished)", seconds: $0.seconds) },
            rescues: try queue.rescues())
    }

    public func log(job: Int64, limit: Int) throws -> String? {
        guard let text = try queue.log(job: job) else { return nil }
        return text.utf8.count > limit ? String(decoding: Array(text.utf8.suffix(limit)), as: UTF8.self) : text
    }

    public func retry(job: Int64) throws -> Bool {
        let (queued, refused, _) = try queue.retryJobs(ids: [job])
        if queued == 0, let reason = refused.first { throw BoardRefusal(message: reason) }
        return queued > 0
    }

    public func cancel(job: Int64) throws -> Bool { try queue.cancel(ids: [job]) > 0 }

    public func setPriority(job: Int64, priority: Int) throws -> Bool { try queue.setPriority(id: job, priority: priority) }

    public func setPaused(_ paused: Bool) throws { try queue.setPaused(paused) }
}
