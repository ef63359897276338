import CoreMetrics
import Foundation
import Prometheus

/// `/metrics`: the queue as Prometheus sees it, kept through swift-metrics handles that write
/// into this dashboard's own registry (no process-wide bootstrap, so several dashboards, or
/// tests, can live in one process). Updated from each fresh reading of the store.
final class DashboardMetrics: @unchecked Sendable {
    private let registry = PrometheusCollectorRegistry()
    private let factory: PrometheusMetricsFactory
    private let lock = NSLock()
    private var jobGauges: [String: CoreMetrics.Gauge] = [:]
    private var workerGauges: [String: CoreMetrics.Gauge] = [:]
    private let frames: CoreMetrics.Counter
    private let rescues: CoreMetrics.Counter
    private let chunkSeconds: CoreMetrics.Timer
    private let paused: CoreMetrics.Gauge
    private let workLeft: CoreMetrics.Gauge
    private var framesSeen: [Int64: Int] = [:]
    private var rescuesSeen = 0
    private var chunksSeen: Set<String> = []

    static let states = ["queued", "running", "finishing", "waiting-for-space", "done", "failed", "cancelled"]

    init() {
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.durationHistogramBuckets["upscale_chunk_seconds"] =
            [1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200].map { Duration.seconds($0) }
        self.factory = factory
        frames = CoreMetrics.Counter(label: "upscale_frames_encoded_total", factory: factory)
        rescues = CoreMetrics.Counter(label: "upscale_lease_rescues_total", factory: factory)
        chunkSeconds = CoreMetrics.Timer(label: "upscale_chunk_seconds", factory: factory)
        paused = CoreMetrics.Gauge(label: "upscale_queue_paused", factory: factory)
        workLeft = CoreMetrics.Gauge(label: "upscale_work_left_seconds", factory: factory)
        for state in Self.states { jobGauges[state] = CoreMetrics.Gauge(label: "upscale_jobs", dimensions: [("state", state)], factory: factory) }
    }

    func update(_ snapshot: BoardSnapshot) {
        lock.lock()
        defer { lock.unlock() }
        let reading = snapshot.reading
        for state in Self.states { jobGauges[state]?.record(snapshot.summary.counts[state] ?? 0) }
        // Frames encoded: each job's frames done only grow, except when a job starts over
        // (retry, lost lease); a drop is not subtracted, its new frames count again.
        var added = 0
        for job in reading.jobs {
            let before = framesSeen[job.id] ?? 0
            if job.framesDone > before { added += job.framesDone - before }
            framesSeen[job.id] = job.framesDone
        }
        if added > 0 { frames.increment(by: Int64(added)) }
        if reading.rescues > rescuesSeen { rescues.increment(by: Int64(reading.rescues - rescuesSeen)) }
        rescuesSeen = max(rescuesSeen, reading.rescues)
        for chunk in reading.finishedChunks where chunksSeen.insert(chunk.key).inserted {
            chunkSeconds.recordNanoseconds(Int64(max(0, chunk.seconds) * 1e9))
        }
        var live: Set<String> = []
        for worker in reading.workers where !worker.stale {
            live.insert(worker.name)
            let gauge = workerGauges[worker.name] ?? CoreMetrics.Gauge(label: "upscale_worker_fps", dimensions: [("worker", worker.name)], factory: factory)
            workerGauges[worker.name] = gauge
            gauge.record(worker.fps ?? 0)
        }
        // A worker gone quiet leaves the metrics rather than reporting its last rate forever.
        for (name, gauge) in workerGauges where !live.contains(name) {
            gauge.destroy()
            workerGauges[name] = nil
        }
        paused.record(reading.paused ? 1 : 0)
        workLeft.record(reading.secondsOfWorkLeft ?? 0)
    }

    /// The Prometheus text format.
    func text() -> String {
        var buffer: [UInt8] = []
        lock.lock()
        registry.emit(into: &buffer)
        lock.unlock()
        return String(decoding: buffer, as: UTF8.self)
    }
}
