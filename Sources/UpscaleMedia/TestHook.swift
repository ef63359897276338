import Foundation

/// Faults the tests inject into a real `upscale` process through the `UPSCALE_TEST_HOOK`
/// environment variable, to check that each is contained: a decoder that never returns,
/// a crash at a given frame. Unset (always, outside the tests) it does nothing.
public enum TestHook: Equatable, Sendable {
    /// The reading stage stops for good after its first picture.
    case stall
    /// The process raises this signal when this many frames are encoded.
    case crash(signal: Int32, atFrame: Int)
    /// The watcher kills itself after a job succeeded, before its original is moved.
    case crashWhileFinishing
    /// A farm worker kills itself after its join put the output in place, before it is recorded;
    /// a chunked run, before it removes its chunks.
    case crashAfterJoin
    /// A chunked run sends itself SIGINT as its join starts (Ctrl-C at that moment).
    case interruptAtJoin
    /// A chunked run stops for good after its join put the output in place, before it removes
    /// its chunks (as the removal of thousands of chunk files takes a while).
    case stallAfterJoin
    /// A job pauses this many seconds (for good, if nil) after its last look for a stop, as its
    /// finished output is about to be placed: a child that outlives its killed watcher.
    case pauseBeforePlacing(seconds: Double?)
    /// A job that succeeded says on stderr how many malloc arenas its process made.
    case reportMallocArenas
    /// The watcher waits this many seconds after a job's child exited, and a farm worker after
    /// its join put the output in place, before the result is recorded: a cancel that arrives
    /// once the output is placed.
    case pauseBeforeRecording(seconds: Double)
    /// The watcher waits this many seconds with a job "finishing" (its output in place and
    /// recorded, not checked yet): the main loop's look for jobs left so must pass it by.
    case pauseWhileFinishing(seconds: Double)

    /// The hook, if set and (with `UPSCALE_TEST_HOOK_ONLY`) this process's last argument, its
    /// input, contains that text: one file of a batch can crash while the others run.
    public static let current: TestHook? = {
        let env = ProcessInfo.processInfo.environment
        if let only = env["UPSCALE_TEST_HOOK_ONLY"], !((jobArguments ?? CommandLine.arguments).last ?? "").contains(only) { return nil }
        return parse(env["UPSCALE_TEST_HOOK"])
    }()

    /// The arguments of a job run in a forked copy of the command, whose own command line is
    /// the parent's; set once, before the job starts.
    nonisolated(unsafe) public static var jobArguments: [String]?

    static func parse(_ text: String?) -> TestHook? {
        guard let text else { return nil }
        let parts = text.split(separator: ":")
        switch parts.first {
        case "stall": return .stall
        case "watcher-dies-finishing": return .crashWhileFinishing
        case "worker-dies-after-join": return .crashAfterJoin
        case "interrupt-at-join": return .interruptAtJoin
        case "stall-after-join": return .stallAfterJoin
        case "malloc-arenas": return .reportMallocArenas
        case "pause-before-recording": return .pauseBeforeRecording(seconds: parts.count > 1 ? Double(parts[1]) ?? 2 : 2)
        case "pause-while-finishing": return .pauseWhileFinishing(seconds: parts.count > 1 ? Double(parts[1]) ?? 2 : 2)
        case "pause-before-placing": return .pauseBeforePlacing(seconds: parts.count > 1 ? Double(parts[1]) : nil)
        case "abort": return .crash(signal: SIGABRT, atFrame: parts.count > 1 ? Int(parts[1]) ?? 1 : 1)
        case "segv": return .crash(signal: SIGSEGV, atFrame: parts.count > 1 ? Int(parts[1]) ?? 1 : 1)
        case "kill": return .crash(signal: SIGKILL, atFrame: parts.count > 1 ? Int(parts[1]) ?? 1 : 1)
        default: return nil
        }
    }

    /// Free bytes a job sees in its output folder instead of the real figure
    /// (`UPSCALE_TEST_FREE_BYTES`): the watch folder's wait for space, without filling a disk.
    public static let freeBytes: Int64? = ProcessInfo.processInfo.environment["UPSCALE_TEST_FREE_BYTES"].flatMap { Int64($0) }

    /// The `pauseBeforePlacing` hook, said on stderr (a watched job's log) as it starts.
    public static func pauseIfBeforePlacing() {
        guard case .pauseBeforePlacing(let seconds)? = current else { return }
        fputs("test hook: pausing before the output is placed\n", stderr)
        fflush(stderr)
        guard let seconds else { stallForever() }
        let end = Date().addingTimeInterval(seconds)
        while Date() < end { usleep(20_000) }
    }

    /// The `pauseBeforeRecording` hook: waits its seconds.
    public static func pauseIfBeforeRecording() {
        if case .pauseBeforeRecording(let seconds)? = current { usleep(UInt32(seconds * 1_000_000)) }
    }

    /// The `pauseWhileFinishing` hook: waits its seconds.
    public static func pauseIfWhileFinishing() {
        if case .pauseWhileFinishing(let seconds)? = current { usleep(UInt32(seconds * 1_000_000)) }
    }

    public static func stallForever() -> Never {
        while true { sleep(3600) }
    }

    /// Raises the crash hook's signal once `frames` reaches its frame.
    public static func crashIfDue(frames: Int) {
        if case .crash(let sig, let at)? = current, frames >= at {
            signal(sig, SIG_DFL)
            raise(sig)
        }
    }
}
