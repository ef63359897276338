import Foundation

/// What `upscale queue …` does to a folder's queue, through the store and the folder only.
public enum QueueActions {
    /// Priorities a job may have, in every queue (the shared one stores 32-bit integers: a
    /// larger one was the server's "integer out of range", a 503 on the dashboard).
    public static let priorities = -1_000_000...1_000_000

    /// Failed or cancelled jobs of these files, or with none every failed job, are queued again; a failed job's
    /// original comes back from Failed/ to where it was dropped (under a free name) and its
    /// error file is removed. Returns the files queued again.
    /// Returns the files queued again, and those of matching jobs that are no longer in the
    /// folder (deleted or moved away while queued), which cannot be.
    public static func retry(folder: WatchFolder, store: JobStore, files: [String]) throws -> (queued: [String], gone: [String]) {
        // With no names, failed jobs only: a cancelled one was stopped on purpose.
        if files.isEmpty { return try retry(folder: folder, store: store) { $0.state == .failed } }
        let chosen = try jobs(named: files.map { relative($0, in: folder) }, in: try store.list().filter { [.failed, .cancelled].contains($0.state) })
        return try retry(folder: folder, store: store) { chosen.contains($0.id) }
    }

    /// The ids of the jobs `names` mean: a name is a job's file as the folder names it
    /// ("trip/b.mov"), where Failed/ keeps it, or a bare file name. A bare name stands for the
    /// job at the top of the folder of that name, else for the one job in a sub-folder
    /// (`--recursive`) whose file is so named; where several sub-folders have one, it is
    /// refused, naming them (it queued them all again).
    static func jobs(named names: [String], in jobs: [JobRecord]) throws -> Set<Int64> {
        var ids = Set<Int64>()
        for name in names {
            let exact = jobs.filter { $0.source == name || $0.movedTo == name }
            if !exact.isEmpty {
                ids.formUnion(exact.map(\.id))
                continue
            }
            let base = { (path: String) in URL(fileURLWithPath: path).lastPathComponent }
            let named = jobs.filter { base($0.source) == name || $0.movedTo.map(base) == name }
            let sources = Set(named.map(\.source)).sorted()
            if sources.count > 1 {
                throw WatchError("'\(name)' names \(sources.count) jobs, in different folders (\(sources.map { "'\($0)'" }.joined(separator: ", "))); give the file's path inside the folder, as 'upscale queue retry DIR \(sources[0])'")
            }
            ids.formUnion(named.map(\.id))
        }
        return ids
    }

    /// The same for one job by id (the dashboard's Retry).
    public static func retry(folder: WatchFolder, store: JobStore, id: Int64) throws -> [String] {
        try retry(folder: folder, store: store) { $0.id == id }.queued
    }

    private static func retry(folder: WatchFolder, store: JobStore, matching: (JobRecord) -> Bool) throws -> (queued: [String], gone: [String]) {
        var queued: [String] = [], gone: [String] = []
        let now = Date().timeIntervalSince1970
        for job in try store.list() where [.failed, .cancelled].contains(job.state) {
            guard matching(job) else { continue }
            var source = job.source
            if let moved = job.movedTo, FileManager.default.fileExists(atPath: folder.path(moved)) {
                let target = folder.mirror(folder.root, of: job.source)
                let back = try SafeFiles.move(folder.path(moved), into: target)
                unlink(WatchFolder.errorNote(for: folder.path(moved)))
                source = folder.relative(back) ?? back
            }
            guard let file = WatchFolder.stamp(of: folder.path(source)) else {
                gone.append(source)
                continue
            }
            if try store.requeueFailed(id: job.id, source: source, size: file.size, modified: file.modified, now: now) {
                queued.append(source)
            }
        }
        return (queued, gone)
    }

    /// Queued and running jobs of these files become cancelled (a running one is stopped by
    /// its watcher within about a second). Returns how many.
    public static func cancel(folder: WatchFolder, store: JobStore, files: [String]) throws -> Int {
        let sources = files.map { relative($0, in: folder) }
        let jobs = try store.list().filter { sources.contains($0.source) }
        let count = try store.cancel(sources: sources, now: Date().timeIntervalSince1970)
        // The chunks an interrupted run kept for resuming are of no use to a cancelled job. A
        // running one's are removed by its watcher once its child has stopped; with no watcher
        // (it was killed, and the job shows "interrupted") nobody else would.
        let watched = FolderLock.isHeld(folder: folder)
        for job in jobs where job.state == .queued || job.state == .waitingForSpace || (job.state == .running && !watched) {
            if let output = job.output { removeChunks(of: folder.path(output)) }
        }
        return count
    }

    /// Removes the chunked work folder kept beside `output`, if any.
    static func removeChunks(of output: String) {
        try? FileManager.default.removeItem(atPath: ChunkedJob.workFolder(for: output))
    }

    /// A path as the store names it: relative to the folder ("a.mov", "trip/b.mov"). A path
    /// into the folder counts also when the file is not there (a failed file is in Failed/:
    /// its retry by full path answered "no failed or cancelled job").
    public static func relative(_ path: String, in folder: WatchFolder) -> String {
        folder.relative(URL(fileURLWithPath: path).standardizedFileURL.path) ?? path
    }

    /// Seconds of work left. Each job costs about its frames times its output pixels (the
    /// scaler and the encoder both work per output pixel), so the rate measured on this
    /// folder's finished jobs is output pixels per second: frames x width x height over their
    /// run time. A running job uses its own measured fps; a queued one its planned frames and
    /// size at that rate (the fps this machine reached, scaled to the job's output size).
    /// Nil until a job has finished (no rate yet) while work is left. Jobs not planned yet
    /// (`unplanned`) are left out: one file waiting for its index made the whole queue's
    /// ETA unknown for up to ten minutes.
    public static func queueETA(_ jobs: [JobRecord]) -> Double? {
        let finished = jobs.filter { $0.state == .done && $0.started != nil && $0.updated > $0.started! && $0.framesDone > 0
            && $0.outputWidth != nil && $0.outputHeight != nil }
        let work = finished.reduce(0.0) { $0 + Double($1.framesDone) * Double($1.outputWidth! * $1.outputHeight!) }
        let time = finished.reduce(0.0) { $0 + ($1.updated - $1.started!) }
        let pixelRate = time > 0 && work > 0 ? work / time : nil
        var total = 0.0
        for job in jobs where job.state == .running || job.state == .queued || job.state == .waitingForSpace {
            if let left = runningETA(job) {
                total += left
                continue
            }
            guard let rate = pixelRate else { return nil }
            guard let frames = job.framesTotal, let w = job.outputWidth, let h = job.outputHeight else { continue }
            total += Double(max(0, frames - job.framesDone)) * Double(w * h) / rate
        }
        return total
    }

    /// Work left that `queueETA` cannot count: queued (or running, not yet measured) jobs
    /// whose frames and output size are not known yet. The planner has not reached them, or
    /// cannot read their file yet (an .mp4 waiting for its index).
    public static func unplanned(_ jobs: [JobRecord]) -> Int {
        jobs.filter { job in
            [.running, .queued, .waitingForSpace].contains(job.state) && runningETA(job) == nil
                && (job.framesTotal == nil || job.outputWidth == nil || job.outputHeight == nil)
        }.count
    }

    public static func runningETA(_ job: JobRecord) -> Double? {
        guard job.state == .running, let total = job.framesTotal, let fps = job.fps, fps > 0 else { return nil }
        return Double(max(0, total - job.framesDone)) / fps
    }
}
