import CProcess
import Foundation

/// How this process takes memory from the C library, set once at start.
public enum ProcessMemory {
    /// One malloc arena for the whole process, set before any thread exists. A chunked run
    /// (and a farm worker, chunk after chunk) makes a new decoder, pipeline threads and x265
    /// encoder with its thread pool for each chunk. With glibc's arenas per thread, what one
    /// chunk freed was not reused by the next (a chunked run of the test clip ended with 14
    /// arenas), and peak memory grew with the number of chunks: a 30 s 720p pan → 2560
    /// (ultrafast, 1 s keyframes) peaked at 509 MB in one piece, 751 MB in 10 s chunks,
    /// 1,016 MB in 5 s and 1,331 MB in 1 s chunks, with 2.7x / 4.3x / 14x the minor faults of
    /// one piece and 3x / 5x / 12x its system time. With one arena: 530 MB in 10 s chunks and
    /// 553 MB in 1 s chunks; one piece is unchanged. A limit the user set
    /// (`MALLOC_ARENA_MAX`, or `arena_max` in `GLIBC_TUNABLES`) is left as it is.
    @discardableResult
    public static func useOneArena() -> Bool {
        let env = ProcessInfo.processInfo.environment
        if env["MALLOC_ARENA_MAX"] != nil || env["GLIBC_TUNABLES"]?.contains("arena_max") == true { return false }
        oneArena = upscale_single_malloc_arena() == 1
        return oneArena
    }

    /// Whether `useOneArena` took effect: set once at start, before any thread, read after.
    nonisolated(unsafe) private static var oneArena = false

    /// For runs of chunk after chunk with a new encoder for each (a farm worker; a chunked job
    /// once a second pipeline starts, see `ChunkSpan`): what one chunk's encoder frees stays in
    /// the heap for the next one's, instead of going back to the kernel and being touched anew
    /// (a fault and a zeroed page each). Blocks under 32 MB (the ceiling of glibc's
    /// own sliding mmap threshold) come from the heap, whose top is no longer trimmed. A 40 s
    /// 720p pan → 2560, medium CRF 20, in 10 s chunks, with one arena: 321k–338k → 203k–209k
    /// minor faults, system time 1.18–1.37 → 0.84–1.11 s, peak RSS 821–839 → 837–850 MB (one
    /// piece: 188k, 0.92–0.97 s, 764 MB). Not for one piece, which frees nothing big before it
    /// ends (there it cost 9 MB of RSS). Only with one arena (`useOneArena`): with several, a
    /// heap that is never trimmed is the growth one arena ended. A setting the user made
    /// (`MALLOC_MMAP_THRESHOLD_`, `MALLOC_TRIM_THRESHOLD_`, or either in `GLIBC_TUNABLES`) is
    /// left as it is.
    @discardableResult
    public static func keepFreedMemory() -> Bool {
        let env = ProcessInfo.processInfo.environment
        let tunables = env["GLIBC_TUNABLES"] ?? ""
        if !oneArena || env["MALLOC_MMAP_THRESHOLD_"] != nil || env["MALLOC_TRIM_THRESHOLD_"] != nil
            || tunables.contains("mmap_threshold") || tunables.contains("trim_threshold") { return false }
        return upscale_keep_freed_memory() == 1
    }

    /// Gives the heap's free pages back to the kernel: a farm worker with nothing to do keeps
    /// none of its last chunk's memory.
    public static func releaseFreeMemory() { upscale_release_free_memory() }

    /// The malloc arenas this process has made so far (-1 where glibc cannot say).
    public static var arenas: Int { Int(upscale_malloc_arena_count()) }
}

/// One job in a child process: the same binary, started with arguments that make it run
/// a single file and report on a pipe (file descriptor 3) instead of drawing on the
/// terminal. A crash inside a C library (a libav* assertion, a segfault on damaged data)
/// ends the child only; the parent turns it into a one-line error and cleans up after it.
///
/// The child gets its own process group, so a terminal's Ctrl-C reaches the parent alone,
/// which forwards one SIGTERM (the child then removes its temporary file and exits 130);
/// the child asks the kernel for SIGTERM when the parent dies, so a parent killed with
/// SIGKILL never leaves a child writing on its own.
public final class JobProcess: @unchecked Sendable {
    public enum Outcome: Equatable, Sendable {
        case exited(Int32)
        case signaled(Int32)
    }

    /// The exit status of a child that did not start for lack of disk space (EX_TEMPFAIL).
    public static let noSpaceStatus: Int32 = 75

    /// The report pipe's file descriptor in the child.
    public static let reportDescriptor: Int32 = 3

    public let pid: pid_t
    private let reader: Thread
    private let lines = LineCollector()

    /// Starts `executable` with `arguments`; `onLine` gets each line the child writes on
    /// its report pipe, on a background thread, in order.
    /// With `log`, the child's stdout and stderr go to that file (appended) instead of ours.
    /// With `holding`, the child gets that lock's descriptor as `JobLock.childDescriptor`, and
    /// with it the lock until it ends.
    public convenience init(executable: String, arguments: [String], environment: [String: String] = [:], log: String? = nil,
                            holding jobLock: JobLock? = nil, onLine: @escaping @Sendable (String) -> Void) throws {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw JobProcessError("cannot create a pipe: \(String(cString: strerror(errno)))") }
        let (readEnd, writeEnd) = (fds[0], fds[1])
        // The log is opened here, not by the spawn: a failure of the spawn's own open said
        // "cannot start <executable>: No such file or directory", naming a binary that was there.
        // (Opened after the pipe, it is never descriptor 3, which the report end takes in the child.)
        var logDescriptor: Int32 = -1
        if let log {
            logDescriptor = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
            guard logDescriptor >= 0 else {
                let reason = String(cString: strerror(errno))
                close(readEnd)
                close(writeEnd)
                throw JobProcessError("cannot write the job's log '\(log)': \(reason)")
            }
        }
        defer { if logDescriptor >= 0 { close(logDescriptor) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addclose(&actions, readEnd)
        posix_spawn_file_actions_adddup2(&actions, writeEnd, Self.reportDescriptor)
        if writeEnd != Self.reportDescriptor { posix_spawn_file_actions_addclose(&actions, writeEnd) }
        if logDescriptor >= 0 {
            posix_spawn_file_actions_adddup2(&actions, logDescriptor, 1)
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
        }
        // Last: its descriptor here is 10 or above, never one of those set above.
        if let jobLock { posix_spawn_file_actions_adddup2(&actions, jobLock.fd, JobLock.childDescriptor) }

        var env = ProcessInfo.processInfo.environment
        // A crash is reported by the parent in one line; the Swift runtime's backtrace
        // (registers, frames) is for developers.
        env["SWIFT_BACKTRACE"] = "enable=no"
        env[Self.parentVariable] = String(getpid())
        for (key, value) in environment { env[key] = value }
        let (spawned, child) = spawnInOwnGroup(executable, arguments, environment: env, actions: &actions)
        close(writeEnd)
        guard spawned == 0 else {
            close(readEnd)
            throw JobProcessError("cannot start \(executable): \(String(cString: strerror(spawned)))")
        }
        self.init(pid: child, reportEnd: readEnd, onLine: onLine)
    }

    /// Runs the job in `zygote` (a copy of this process made at start, see `Zygote`) instead
    /// of a new process: the same child, without loading the binary a second time.
    public convenience init(zygote: Zygote, arguments: [String], onLine: @escaping @Sendable (String) -> Void) throws {
        try zygote.send(arguments)
        self.init(pid: zygote.pid, reportEnd: zygote.reportEnd, onLine: onLine)
    }

    private init(pid: pid_t, reportEnd readEnd: Int32, onLine: @escaping @Sendable (String) -> Void) {
        self.pid = pid
        let collector = lines
        reader = Thread {
            let handle = FileHandle(fileDescriptor: readEnd, closeOnDealloc: true)
            var buffer = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                buffer.append(chunk)
                while let newline = buffer.firstIndex(of: 0x0A) {
                    let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                    buffer.removeSubrange(buffer.startIndex...newline)
                    onLine(line)
                }
            }
            collector.close()
        }
        reader.start()
    }

    /// Asks the child to stop (it removes its temporary output and exits 130).
    public func terminate() { kill(pid, SIGTERM) }

    /// Ends the child at once.
    public func kill9() { kill(pid, SIGKILL) }

    /// Waits for the child to end and for its last report line to be handled.
    public func wait() -> Outcome {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        lines.waitClosed()
        return Self.outcome(status)
    }

    /// For a child known to have ended but not reaped: waits up to `seconds` for its last
    /// report line to be handled (a descendant holding the pipe keeps it open).
    public func waitForLastReport(seconds: Double) {
        _ = lines.waitClosed(seconds: seconds)
    }

    /// The outcome if the child has ended (its last report line handled), else nil at once.
    public func poll() -> Outcome? {
        var status: Int32 = 0
        let reaped = waitpid(pid, &status, WNOHANG)
        guard reaped == pid else { return nil }
        lines.waitClosed()
        return Self.outcome(status)
    }

    private static func outcome(_ status: Int32) -> Outcome {
        let signal = status & 0x7f
        return signal == 0 ? .exited((status >> 8) & 0xff) : .signaled(signal)
    }

    /// "SIGABRT" for 6, and so on.
    public static func signalName(_ signal: Int32) -> String {
        let names: [Int32: String] = [SIGABRT: "SIGABRT", SIGSEGV: "SIGSEGV", SIGBUS: "SIGBUS", SIGFPE: "SIGFPE",
                                      SIGILL: "SIGILL", SIGKILL: "SIGKILL", SIGTERM: "SIGTERM", SIGINT: "SIGINT",
                                      SIGTRAP: "SIGTRAP", SIGPIPE: "SIGPIPE", SIGHUP: "SIGHUP", SIGQUIT: "SIGQUIT"]
        return names[signal] ?? "signal \(signal)"
    }

    static let parentVariable = "UPSCALE_PARENT_PID"

    /// Puts every thread of this process, and so every thread they start, under SCHED_BATCH:
    /// a job's threads (x265's, the scaler's, the decoder's) share the cores and are all
    /// throughput work, so a waking thread need not preempt a running one. Same nice value,
    /// same output. Measured on 2 cores, 720p → 2560 ultrafast, 8 alternating runs (medians):
    /// involuntary context switches 1772 → 402, system time 0.350 → 0.315 s, wall 1.815 →
    /// 1.795 s. Other programs' interactive threads win wakeups against it, as they should.
    public static func runAsBatch() {
        for task in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? [] {
            if let thread = pid_t(task) { _ = upscale_set_batch_scheduling(thread) }
        }
    }

    /// Called first thing in the child: die with the parent (SIGTERM, so the child still
    /// cleans up), and stop at once if the parent is already gone.
    public static func followParent() {
        // A dead parent's report pipe must not kill the child with SIGPIPE before it has
        // removed its temporary file: writes then just fail.
        signal(SIGPIPE, SIG_IGN)
        _ = upscale_set_parent_death_signal(SIGTERM)
        if let text = ProcessInfo.processInfo.environment[parentVariable], let parent = pid_t(text), getppid() != parent {
            exit(130)
        }
    }
}

/// A copy of this process made by fork() first thing in `main`, before any thread exists,
/// that waits for one job's arguments and then runs it as the job's child process. The
/// plain command's single file runs in it: exec'ing the binary again costs the dynamic
/// loading of FFmpeg's, libvips' and Swift's libraries and the runtime's start (about 0.1 s
/// of wall and CPU time here, 5% of a short 720p job), which the copy has already done.
/// Everything the child relies on is set up as `JobProcess` sets up a spawned child (own
/// process group, default signals, report pipe on descriptor 3; `followParent` as usual);
/// the Swift runtime's crash backtrace is off because its signal handlers are reset.
public final class Zygote: @unchecked Sendable {
    public let pid: pid_t
    let reportEnd: Int32
    private var request: Int32

    private init(_ z: upscale_zygote) {
        pid = z.pid
        reportEnd = z.report
        request = z.request
    }

    /// In the parent: the waiting copy, or nil if fork failed (jobs are then spawned). In
    /// the copy, once it is given a job: `.job` with the job's arguments.
    public enum Start {
        case parent(Zygote?)
        case job([String])
    }

    /// Call before anything starts a thread (Dispatch, Foundation's run loops, FFmpeg).
    public static func start() -> Start {
        var z = upscale_zygote()
        var bytes: UnsafeMutablePointer<CChar>?
        var length = 0
        switch upscale_zygote_start(&z, JobProcess.reportDescriptor, JobProcess.parentVariable, &bytes, &length) {
        case 1:
            let buffer = UnsafeBufferPointer(start: UnsafeRawPointer(bytes!).assumingMemoryBound(to: UInt8.self), count: length)
            let arguments = buffer.split(separator: 0, omittingEmptySubsequences: false).dropLast().map { String(decoding: $0, as: UTF8.self) }
            free(bytes)
            return .job(arguments)
        case 0:
            return .parent(Zygote(z))
        default:
            return .parent(nil)
        }
    }

    /// Hands the copy its job (once).
    func send(_ arguments: [String]) throws {
        guard request >= 0 else { throw JobProcessError("the waiting copy of upscale was already used") }
        var bytes: [UInt8] = []
        for argument in arguments { bytes += Array(argument.utf8) + [0] }
        let written = bytes.withUnsafeBytes { raw -> Bool in
            var offset = 0
            while offset < raw.count {
                let n = write(request, raw.baseAddress! + offset, raw.count - offset)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return false }
                offset += n
            }
            return true
        }
        let reason = written ? "" : String(cString: strerror(errno))
        close(request)
        request = -1
        guard written else { throw JobProcessError("cannot hand the job to its process: \(reason)") }
    }

    /// Lets an unused copy exit, and reaps it.
    public func dismiss() {
        guard request >= 0 else { return }
        close(request)
        request = -1
        close(reportEnd)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    }
}

public struct JobProcessError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

private final class LineCollector: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    func close() { done.signal() }
    func waitClosed() {
        done.wait()
        done.signal()
    }

    /// `waitClosed` for at most `seconds`; whether it closed.
    func waitClosed(seconds: Double) -> Bool {
        guard done.wait(timeout: .now() + seconds) == .success else { return false }
        done.signal()
        return true
    }
}

/// Starts `executable` with `arguments` and exactly `environment`, in a process group of its
/// own (so that it and all it starts can be signalled together), with the signals a user sends
/// at their default action and none blocked, whatever this process does with them. Returns
/// posix_spawn's result (0 or an errno) and the child's pid. Descriptors above the report pipe
/// (3) and a job's lock (4) are closed in the child.
func spawnInOwnGroup(_ executable: String, _ arguments: [String], environment: [String: String],
                     actions: inout posix_spawn_file_actions_t) -> (status: Int32, pid: pid_t) {
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
    posix_spawnattr_setpgroup(&attributes, 0)
    var defaults = sigset_t()
    sigemptyset(&defaults)
    for sig in [SIGINT, SIGTERM, SIGPIPE, SIGHUP] { sigaddset(&defaults, sig) }
    posix_spawnattr_setsigdefault(&attributes, &defaults)
    var none = sigset_t()
    sigemptyset(&none)
    posix_spawnattr_setsigmask(&attributes, &none)
    // Nothing else this process was given reaches the child: a descriptor this process
    // inherited open across exec (a service manager's socket, the end of a pipe that tells
    // whoever started the watcher that it ended) was held open by every job it started, so
    // that end came only when the last job's child did.
    _ = upscale_spawn_close_from(&actions, JobLock.childDescriptor + 1)
    let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
    let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
    defer {
        envp.forEach { free($0) }
        argv.forEach { free($0) }
    }
    var pid = pid_t()
    let status = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
    return (status, pid)
}

/// The child's side of the report pipe: one line per message, written whole.
public final class JobReporter: @unchecked Sendable {
    private let fd: Int32
    private let jobLock: Int32?
    private let lock = NSLock()
    /// The last output path reported (the lock file keeps it beside a file being placed).
    private var lastOutput: String?
    /// Where the output was renamed into place (`placed`).
    private var placedOutput: String?

    /// With `jobLock` (a watched job's child), each output reported is also recorded in the
    /// job's lock file (`JobLock.record`), for a watcher started after this one's was killed.
    public init(descriptor: Int32, jobLock: Int32? = nil) {
        fd = descriptor
        self.jobLock = jobLock
    }

    /// The output was renamed to `path`: recorded in the job's lock file as placed, for a
    /// watcher started after this one's was killed (by name from now on: the identity of the
    /// file being placed, which `placing` recorded, may not survive a reboot or a remount).
    public func placed(_ path: String) {
        guard let jobLock else { return }
        lock.withLock { placedOutput = path }
        JobLock.record(placed: path, in: jobLock)
    }

    public func send(_ line: String) {
        // (Only output lines are parsed: progress lines come every frame.)
        if let jobLock, line.hasPrefix("output ") || line.hasPrefix("placing ") {
            switch JobReport(line: line) {
            case .output(let path, _, _)?:
                // The name a placed output got when the planned one was taken, said again: still placed.
                let placed = lock.withLock { () -> Bool in
                    lastOutput = path
                    return path == placedOutput
                }
                if placed { JobLock.record(placed: path, in: jobLock) } else { JobLock.record(output: path, in: jobLock) }
            case .placing(let file)?:
                JobLock.record(placing: file, for: lock.withLock { lastOutput } ?? file.path, in: jobLock)
            default: break
            }
        }
        let data = Array((line.replacingOccurrences(of: "\n", with: " ") + "\n").utf8)
        lock.lock()
        defer { lock.unlock() }
        var offset = 0
        while offset < data.count {
            let n = data[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            offset += n
        }
    }
}

/// What a job's child process tells its parent, one line each.
public enum JobReport: Equatable, Sendable {
    /// The planned output path and picture size (its temporary file is derived from the path and the child's pid).
    case output(path: String, width: Int, height: Int)
    /// Said just before the finished temporary file is renamed to `file.path` (each try, with
    /// `--unique-name`): a child killed after the rename, before it could say more, has its
    /// output told from a file of that name that is not its own by the identity.
    case placing(PlacedFile)
    case progress(done: Int, total: Int?, elapsed: Double)
    /// The job succeeded: frames written, and the line to print.
    case summary(frames: Int, text: String)
    /// The one-line error the job failed with, and its kind: `output` failures (disk full,
    /// folder not writable) may pass; `input`, `processing` and `usage` ones will not.
    case error(kind: String, text: String)
    /// A note the job printed (a damaged picture filled in, an animation's first frame only,
    /// transparency flattened): a watcher shows it, as the plain command's stderr does.
    case note(text: String)

    public var line: String {
        switch self {
        case .output(let path, let w, let h): return "output \(w) \(h) \(Self.escaped(path))"
        case .placing(let file): return "placing \(file.device) \(file.inode) \(Self.escaped(file.path))"
        case .progress(let done, let total, let elapsed): return "progress \(done) \(total ?? -1) \(elapsed)"
        case .summary(let frames, let text): return "summary \(frames) \(text)"
        case .error(let kind, let text): return "error \(kind) \(text)"
        case .note(let text): return "note \(text)"
        }
    }

    /// A path on one line: a file name may hold a newline (which ended the line, and the
    /// watcher then looked for a name with a space there), so "\\" and "\n" are escaped.
    static func escaped(_ path: String) -> String {
        path.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\n", with: "\\n")
    }

    static func unescaped(_ text: String) -> String {
        var result = "", escaping = false
        for character in text {
            if escaping {
                result.append(character == "n" ? "\n" : character)
                escaping = false
            } else if character == "\\" {
                escaping = true
            } else {
                result.append(character)
            }
        }
        return result
    }

    public init?(line: String) {
        let parts = line.split(separator: " ", maxSplits: 3, omittingEmptySubsequences: false).map(String.init)
        guard parts.count >= 2 else { return nil }
        switch parts[0] {
        case "output":
            guard parts.count == 4, let w = Int(parts[1]), let h = Int(parts[2]) else { return nil }
            self = .output(path: Self.unescaped(parts[3]), width: w, height: h)
        case "placing":
            guard parts.count == 4, let device = UInt64(parts[1]), let inode = UInt64(parts[2]) else { return nil }
            self = .placing(PlacedFile(path: Self.unescaped(parts[3]), device: device, inode: inode))
        case "summary":
            let rest = line.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false).map(String.init)
            guard rest.count == 3, let frames = Int(rest[1]) else { return nil }
            self = .summary(frames: frames, text: rest[2])
        case "error":
            let rest = line.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false).map(String.init)
            guard rest.count == 3 else { return nil }
            self = .error(kind: rest[1], text: rest[2])
        case "note":
            self = .note(text: String(line.dropFirst(5)))
        case "progress":
            guard parts.count == 4, let done = Int(parts[1]), let total = Int(parts[2]), let elapsed = Double(parts[3]) else { return nil }
            self = .progress(done: done, total: total >= 0 ? total : nil, elapsed: elapsed)
        default: return nil
        }
    }
}

/// A finished output file by the name it is given and the identity it keeps through the
/// rename (device and inode of its temporary file).
public struct PlacedFile: Equatable, Sendable {
    public let path: String
    public let device: UInt64
    public let inode: UInt64

    public init(path: String, device: UInt64, inode: UInt64) {
        self.path = path
        self.device = device
        self.inode = inode
    }

    /// `temporary`'s identity under the name `target` (nil if it cannot be read).
    public init?(temporary: String, target: String) {
        var info = stat()
        guard lstat(temporary, &info) == 0 else { return nil }
        self.init(path: target, device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }

    /// Whether the file now at `path` is this one: the child placed it, and nothing replaced it since.
    public var isInPlace: Bool {
        var info = stat()
        return lstat(path, &info) == 0 && UInt64(info.st_dev) == device && UInt64(info.st_ino) == inode
    }
}
