import Foundation

/// Runs a program to completion and reports its wall time and peak RSS (from wait4).
struct ChildRun {
    let status: Int32
    let seconds: Double
    let peakRSS: Int

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
        var status: Int32 = 0
        var usage = rusage()
        while wait4(pid, &status, 0, &usage) < 0 && errno == EINTR {}
        let seconds = monotonicSeconds() - start
        let exitCode = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        return ChildRun(status: exitCode, seconds: seconds, peakRSS: usage.ru_maxrss * 1024)
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
