import Foundation

/// The page's totals (`/api/summary`).
public struct BoardSummary: Codable, Sendable, Equatable {
    public var title: String
    public var paused: Bool
    /// Jobs per state ("queued", "running", …).
    public var counts: [String: Int]
    public var jobs: Int
    public var doneToday: Int
    /// Frames per second across the farm now (running jobs' or live workers' last rates).
    public var framesPerSecond: Double
    /// Work queued and running, at the rates measured on this queue (one worker's time).
    public var secondsOfWorkLeft: Double?
    /// Open jobs left out of `secondsOfWorkLeft`: not planned yet.
    public var unplannedJobs: Int
    public var workers: Int
    public var staleWorkers: Int
    /// The highest priority of an open job ("run next" sets one above it).
    public var topPriority: Int
    /// Frames per second in each `bucketSeconds` of the last hours, oldest first.
    public var throughput: [ThroughputPoint]
    public var bucketSeconds: Double
    public var now: Double
}

public struct ThroughputPoint: Codable, Sendable, Equatable {
    public var start: Double
    public var fps: Double
}

/// One reading turned into what the routes serve: jobs in page order, totals, the chart.
struct BoardSnapshot: Sendable {
    let reading: BoardReading
    let jobs: [BoardJob]
    let summary: BoardSummary
    /// When the store read began (everything written before it is in the reading).
    let taken: Double

    static let chartBuckets = 24
    static let bucketSeconds = 900.0

    init(title: String, reading: BoardReading, now: Double, startOfDay: Double) {
        self.reading = reading
        taken = now
        // Sort positions by precomputed keys, then gather once: sorting the jobs themselves
        // copied every (string-heavy) job at each swap.
        let keys = reading.jobs.map(BoardJob.pageKey)
        jobs = keys.indices.sorted { keys[$0] < keys[$1] }.map { reading.jobs[$0] }
        var counts: [String: Int] = [:]
        var doneToday = 0
        var top = 0
        for job in reading.jobs {
            counts[job.state, default: 0] += 1
            if job.state == "done", (job.finished ?? 0) >= startOfDay { doneToday += 1 }
            if BoardJob.openStates.contains(job.state) { top = max(top, job.priority) }
        }
        let live = reading.workers.filter { !$0.stale }
        summary = BoardSummary(
            title: title, paused: reading.paused, counts: counts, jobs: reading.jobs.count, doneToday: doneToday,
            framesPerSecond: live.reduce(0) { $0 + ($1.fps ?? 0) }, secondsOfWorkLeft: reading.secondsOfWorkLeft,
            unplannedJobs: reading.unplannedJobs, workers: live.count, staleWorkers: reading.workers.count - live.count, topPriority: top,
            throughput: Self.throughput(reading.work, now: now), bucketSeconds: Self.bucketSeconds, now: now)
    }

    /// Frames per second per bucket: each span's frames spread evenly over its time, so a
    /// two-hour job shows in each bucket it ran through. The current bucket counts only the
    /// time elapsed in it.
    static func throughput(_ spans: [WorkSpan], now: Double) -> [ThroughputPoint] {
        let end = (now / bucketSeconds).rounded(.down) * bucketSeconds + bucketSeconds
        let start = end - Double(chartBuckets) * bucketSeconds
        var frames = [Double](repeating: 0, count: chartBuckets)
        for span in spans where span.end > start && span.frames > 0 {
            if span.end - span.start < 1 {
                let b = Int(((span.end - start) / bucketSeconds).rounded(.down))
                if b < chartBuckets { frames[b] += Double(span.frames) }
                continue
            }
            let rate = Double(span.frames) / (span.end - span.start)
            for b in max(0, Int(((span.start - start) / bucketSeconds).rounded(.down)))..<chartBuckets {
                let lo = start + Double(b) * bucketSeconds
                if lo >= span.end { break }
                frames[b] += rate * max(0, min(lo + bucketSeconds, span.end) - max(lo, span.start))
            }
        }
        return (0..<chartBuckets).map { b in
            let lo = start + Double(b) * bucketSeconds
            let seconds = min(bucketSeconds, max(1, now - lo))
            return ThroughputPoint(start: lo, fps: lo > now ? 0 : frames[b] / seconds)
        }
    }
}
