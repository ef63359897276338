import Foundation

/// What `upscale queue …` does to a folder's queue, through the store and the folder only.
public enum QueueActions {
    /// Failed (or cancelled) jobs of these files, or all, are queued again; a failed job's
    /// original comes back from Failed/ to where it was dropped (under a free name) and its
    /// error file is removed. Returns the files queued again.
    public static func retry(folder: WatchFolder, store: JobStore, files: [String]) throws -> [String] {
        let wanted = Set(files.map { relative($0, in: folder) })
        var queued: [String] = []
        let now = Date().timeIntervalSince1970
        for job in try store.list() where [.failed, .cancelled].contains(job.state) {
            let matches = wanted.isEmpty || wanted.contains(job.source)
                || job.movedTo.map { wanted.contains($0) || wanted.contains(URL(fileURLWithPath: $0).lastPathComponent) } == true
                || wanted.contains(URL(fileURLWithPath: job.source).lastPathComponent)
            guard matches else { continue }
            var source = job.source
            if let moved = job.movedTo, FileManager.default.fileExists(atPath: folder.path(moved)) {
                let target = folder.mirror(folder.root, of: job.source)
                let back = try SafeFiles.move(folder.path(moved), into: target)
                unlink(folder.path(moved) + ".error.txt")
                source = String(back.dropFirst(folder.root.count + 1))
            }
            var info = stat()
            guard stat(folder.path(source), &info) == 0 else { continue }
            let modified = Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9
            if try store.requeueFailed(id: job.id, source: source, size: Int64(info.st_size), modified: modified, now: now) {
                queued.append(source)
            }
        }
        return queued
    }

    /// Queued and running jobs of these files become cancelled (a running one is stopped by
    /// its watcher within about a second). Returns how many.
    public static func cancel(folder: WatchFolder, store: JobStore, files: [String]) throws -> Int {
        try store.cancel(sources: files.map { relative($0, in: folder) }, now: Date().timeIntervalSince1970)
    }

    /// A path as the store names it: relative to the folder ("a.mov", "trip/b.mov").
    static func relative(_ path: String, in folder: WatchFolder) -> String {
        let absolute = URL(fileURLWithPath: path).standardizedFileURL.path
        if absolute.hasPrefix(folder.root + "/") && FileManager.default.fileExists(atPath: absolute) {
            return String(absolute.dropFirst(folder.root.count + 1))
        }
        return path
    }

    /// Seconds of work left: the running jobs' frames left at their measured rate, and the
    /// queued ones' input size at the rate (seconds per input byte) measured on this
    /// folder's finished jobs. Nil until there is something to measure from.
    public static func queueETA(_ jobs: [JobRecord]) -> Double? {
        let finished = jobs.filter { $0.state == .done && $0.started != nil && $0.updated > $0.started! && $0.size > 0 }
        let perByte = finished.isEmpty ? nil
            : finished.reduce(0) { $0 + ($1.updated - $1.started!) } / Double(finished.reduce(Int64(0)) { $0 + $1.size })
        var total = 0.0
        var known = false
        for job in jobs {
            switch job.state {
            case .running:
                if let left = runningETA(job) {
                    total += left
                    known = true
                } else if let perByte {
                    total += perByte * Double(job.size)
                    known = true
                }
            case .queued:
                if let perByte {
                    total += perByte * Double(job.size)
                    known = true
                }
            default: break
            }
        }
        return known ? total : nil
    }

    public static func runningETA(_ job: JobRecord) -> Double? {
        guard job.state == .running, let total = job.framesTotal, let fps = job.fps, fps > 0 else { return nil }
        return Double(max(0, total - job.framesDone)) / fps
    }
}
