import ArgumentParser
import Foundation
import UpscaleQueue

/// `upscale queue list|retry|cancel|pause|resume DIR`: the watched folder's queue; works
/// while a watcher runs.
struct QueueCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "queue",
        abstract: "Show and steer a watched folder's queue.",
        subcommands: [List.self, Retry.self, Cancel.self, Pause.self, Resume.self])

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Every job: file, state, progress, fps, ETA, attempts, error.")
        @Argument(help: "The watched folder.") var folder: String
        @Flag(help: "One JSON object: the jobs and the queue's ETA.") var json = false

        func run() throws {
            let root = WatchFolder(root: folder)
            let store = try root.openStore(create: false)
            let jobs = try store.list()
            let eta = QueueActions.queueETA(jobs)
            if json {
                struct Listing: Encodable {
                    let paused: Bool
                    let etaSeconds: Double?
                    let jobs: [JobRecord]
                }
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
                print(String(decoding: try encoder.encode(Listing(paused: try store.isPaused(), etaSeconds: eta, jobs: jobs)), as: UTF8.self))
                return
            }
            print(["id", "file", "state", "progress", "fps", "ETA", "tries", "error"].joined(separator: "\t"))
            for job in jobs {
                let progress = job.framesTotal.map { total in total > 0 ? "\(min(100, job.framesDone * 100 / total))%" : "-" }
                    ?? (job.state == .done ? "100%" : "-")
                let fps = job.state == .running ? job.fps.map { String(format: "%.1f", $0) } ?? "-" : "-"
                let eta = QueueActions.runningETA(job).map(clock) ?? "-"
                print(["\(job.id)", job.source, job.state.rawValue, progress, fps, eta, "\(job.attempts)", job.error ?? ""].joined(separator: "\t"))
            }
            let open = jobs.filter { $0.state == .queued || $0.state == .running }.count
            print("\(jobs.count) jobs, \(open) queued or running\(try store.isPaused() ? ", paused" : ""); \(open == 0 ? "nothing left to do" : "queue ETA " + (eta.map(clock) ?? "unknown (no finished job measured yet)"))")
        }
    }

    struct Retry: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Queue failed (or cancelled) jobs again; their originals come back from Failed/.")
        @Argument(help: "The watched folder.") var folder: String
        @Argument(help: "Files to retry (default: every failed job).") var files: [String] = []

        func run() throws {
            let root = WatchFolder(root: folder)
            let queued = try QueueActions.retry(folder: root, store: try root.openStore(create: false), files: files)
            print(queued.isEmpty ? "nothing to retry" : "queued again: " + queued.joined(separator: ", "))
        }
    }

    struct Cancel: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Cancel queued or running jobs (a running one stops within a second).")
        @Argument(help: "The watched folder.") var folder: String
        @Argument(help: "Files to cancel.") var files: [String]

        func run() throws {
            let root = WatchFolder(root: folder)
            let count = try QueueActions.cancel(folder: root, store: try root.openStore(create: false), files: files)
            print(count == 0 ? "no queued or running job for \(files.joined(separator: ", "))" : "cancelled \(count) job(s)")
            if count == 0 { throw ExitCode(1) }
        }
    }

    struct Pause: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Start no new job (running ones finish).")
        @Argument(help: "The watched folder.") var folder: String
        func run() throws {
            try WatchFolder(root: folder).openStore(create: false).setPaused(true)
            print("paused")
        }
    }

    struct Resume: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Start jobs again after a pause.")
        @Argument(help: "The watched folder.") var folder: String
        func run() throws {
            try WatchFolder(root: folder).openStore(create: false).setPaused(false)
            print("resumed")
        }
    }
}

func clock(_ seconds: Double) -> String {
    let s = Int(seconds.rounded())
    return s >= 3600 ? String(format: "%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60) : String(format: "%d:%02d", s / 60, s % 60)
}
