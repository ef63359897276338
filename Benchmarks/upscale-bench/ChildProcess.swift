import Foundation

/// Runs a program to completion and reports its wall time and peak RSS (from wait4).
struct ChildRun {
    let status: Int32
    let seconds: Double
    let peakRSS: Int
    /// Peak proportional set size of the tree: each shared page split among the processes
    /// that map it, so library pages a parent and its child share count once (what the
    /// tree costs the machine; RSS counts them once per process).
    var peakPSS: Int = 0
    /// Peak RSS of the largest single process in the tree (what `/usr/bin/time -v` reports
    /// as "Maximum resident set size": the most of any one process, not the tree's sum).
    var peakLargest: Int = 0
    /// CPU seconds of the process and the descendants it waited for (wait4's rusage).
    var user: Double = 0
    var system: Double = 0

    static func run(_ executable: String, _ arguments: [String]) throws -> ChildRun {
        var pid = pid_t()
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        defer { posix_spawn_file_actions_destroy(&actions) }
        let start = monotonicSeconds()
        let spawned = posix_spawnp(&pid, executable, &actions, nil, argv, environ)
        guard spawned == 0 else { throw ImageError("cannot start \(executable): \(String(cString: strerror(spawned)))") }
        // Peak RSS is read from /proc while the child runs: wait4's ru_maxrss would include this
        // (large) process, whose memory the child shares until it calls exec. `upscale` runs
        // each file in a child process of its own, so the figure is the resident memory of the
        // child and all its descendants together, at its highest sample (every 20 ms).
        var status: Int32 = 0
        var peak = 0, peakPSS = 0, peakLargest = 0, samples = 0
        var usage = rusage()
        while true {
            let tree = treeProcesses(pid)
            let each = tree.map { resident($0) }
            peak = max(peak, each.reduce(0, +))
            peakLargest = max(peakLargest, each.max() ?? 0)
            // PSS every 200 ms: smaps_rollup walks every page table of the tree, several ms
            // for a 3 GB process (every 20 ms it took a quarter of a core from the run).
            if samples % 10 == 0 {
                peakPSS = max(peakPSS, tree.map { resident($0, field: "Pss:", file: "smaps_rollup") }.reduce(0, +))
            }
            samples += 1
            let reaped = wait4(pid, &status, WNOHANG, &usage)
            if reaped == pid { break }
            if reaped < 0 && errno != EINTR { break }
            usleep(20_000)
        }
        let seconds = monotonicSeconds() - start
        let exitCode = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        let cpu = { (t: timeval) in Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
        return ChildRun(status: exitCode, seconds: seconds, peakRSS: peak, peakPSS: peakPSS, peakLargest: peakLargest,
                        user: cpu(usage.ru_utime), system: cpu(usage.ru_stime))
    }

    /// Whether `name` is an executable on PATH.
    static func available(_ name: String) -> Bool {
        (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").contains {
            FileManager.default.isExecutableFile(atPath: "\($0)/\(name)")
        }
    }
}

/// The `upscale` binary built next to this bench.
func upscaleBinary() -> String {
    let me = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
    let sibling = me.deletingLastPathComponent().appendingPathComponent("upscale").path
    return FileManager.default.isExecutableFile(atPath: sibling) ? sibling : "upscale"
}

/// One process's resident bytes (`field` of /proc/<pid>/`file`: VmRSS of status, or Pss of
/// smaps_rollup), 0 once it is gone.
func resident(_ pid: pid_t, field: String = "VmRSS:", file: String = "status") -> Int {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/\(file)", encoding: .utf8),
          let line = text.split(separator: "\n").first(where: { $0.hasPrefix(field) }),
          let kib = Int(line.split(separator: " ").dropFirst().first ?? "") else { return 0 }
    return kib * 1024
}

/// `pid` and its descendants (from /proc/<pid>/task/*/children).
func treeProcesses(_ pid: pid_t) -> [pid_t] {
    var all = [pid]
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
    for task in tasks {
        let children = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/children", encoding: .utf8)) ?? ""
        for child in children.split(separator: " ").compactMap({ pid_t($0) }) { all += treeProcesses(child) }
    }
    return all
}
