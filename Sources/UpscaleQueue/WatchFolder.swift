import Foundation
import UpscaleMedia

/// The layout of a watched folder: the inbox itself, `Upscaled/`, `Originals/`, `Failed/`,
/// and `.upscale/` with the job store, the lock and each job's log.
public struct WatchFolder: Sendable {
    public let root: String
    public init(root: String) {
        self.root = URL(fileURLWithPath: root).standardizedFileURL.path
    }

    public var upscaled: String { root + "/Upscaled" }
    public var originals: String { root + "/Originals" }
    public var failed: String { root + "/Failed" }
    public var state: String { root + "/.upscale" }
    public var storePath: String { state + "/queue.sqlite" }
    public var lockPath: String { state + "/watch.lock" }
    public var logs: String { state + "/logs" }

    /// Folders the watcher owns: never scanned for input.
    public static let ownFolders: Set<String> = ["Upscaled", "Originals", "Failed", ".upscale"]

    public func path(_ relative: String) -> String { root + "/" + relative }

    /// A path inside the folder as the store names it, relative to the folder ("a.mov",
    /// "Upscaled/trip/b.mov"): `path(_:)` undone. Nil for a path outside the folder.
    public func relative(_ path: String) -> String? {
        path.hasPrefix(root + "/") ? String(path.dropFirst(root.count + 1)) : nil
    }

    /// A file's size and modification time as the store keeps them (nil when it is gone).
    public static func stamp(of path: String) -> (size: Int64, modified: Double)? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return (Int64(info.st_size), info.modificationTime)
    }

    /// `relative` of an existing file's path, also where it reaches the folder by another way
    /// than `root` does (through a symbolic link to the folder, by its real path where `root`
    /// is such a link, or through another mount of it): the rest of the path below the first
    /// folder above the file that is the root folder itself (the same device and inode).
    /// Links below that folder (`Upscaled/` on another disk) are not resolved.
    public func relativeAnyWay(_ path: String) -> String? {
        if let found = relative(path) { return found }
        var target = stat()
        guard stat(root, &target) == 0 else { return nil }
        var folder = URL(fileURLWithPath: path).standardizedFileURL
        var rest: [String] = []
        while folder.path != "/" {
            rest.insert(folder.lastPathComponent, at: 0)
            folder.deleteLastPathComponent()
            var info = stat()
            if stat(folder.path, &info) == 0 && info.st_dev == target.st_dev && info.st_ino == target.st_ino {
                return rest.joined(separator: "/")
            }
        }
        return nil
    }

    /// The folder under `base` that mirrors where `relative` sits in the inbox:
    /// `Upscaled` for "a.mov", `Upscaled/trip` for "trip/a.mov".
    public func mirror(_ base: String, of relative: String) -> String {
        guard let slash = relative.lastIndex(of: "/") else { return base }
        return base + "/" + relative[..<slash]
    }

    /// A job's error in the words of a watch folder. Jobs run the plain command, whose advice
    /// names options `watch` does not have: its output folder is always Upscaled/ and its
    /// names are chosen free, so "--output" and "--overwrite" are replaced by what can be done
    /// there.
    public static func advice(_ text: String) -> String {
        let replacements = [
            ("; free some space or choose another --output folder", "; free some space"),
            ("; pick another --output folder", "; check that the watcher may write there"),
            ("; create it or pick another --output", "; check that the watcher may write there"),
            ("; give a shorter one with --output", "; rename the file to something shorter and drop it in again"),
            ("; choose a file name for --output", "; move it away"),
            (" (use --overwrite to replace it)", ""),
            ("; use --overwrite to replace it", "; move it away"),
        ]
        return replacements.reduce(text) { $0.replacingOccurrences(of: $1.0, with: $1.1) }
    }

    /// The note beside a file moved to Failed/: "<name>.error.txt". Where that would pass the
    /// 255-byte limit of a file name (a long name got no note, unsaid), the name is shortened
    /// and ends in "~" and eight hex digits of a hash of the whole name: two long names that
    /// begin alike kept one note between them, the second failure's over the first's.
    public static func errorNote(for moved: String) -> String {
        let url = URL(fileURLWithPath: moved)
        let whole = url.lastPathComponent
        var name = whole
        if (name + ".error.txt").utf8.count > 255 {
            // FNV-1a over the bytes: the same name gives the same note in every run (the
            // retry that removes a note finds it), and NFC and NFD spellings differ.
            let hash = whole.utf8.reduce(UInt32(2_166_136_261)) { ($0 ^ UInt32($1)) &* 16_777_619 }
            let tag = String(format: "~%08x", hash)
            while !name.isEmpty && (name + tag + ".error.txt").utf8.count > 255 { name.removeLast() }
            name += tag
        }
        return url.deletingLastPathComponent().appendingPathComponent(name + ".error.txt").path
    }

    /// `path` made (with its parents) for the queue; a failure says why in one line (it was
    /// Foundation's error dump: "Error Domain=NSCocoaErrorDomain Code=513 …").
    static func makeFolder(_ path: String, root: String) throws {
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        } catch {
            throw WatchError("cannot create '\(path)' (\(fileErrorReason(error))); the watcher keeps its queue in '\(root)/.upscale': it must be able to write in '\(root)'")
        }
    }

    /// The store, creating `.upscale/` when `create` (the watcher); `upscale queue` only opens an
    /// existing one. A user who may not write it (the watcher runs as a service account) can
    /// still read it (`readOnly`, for listing); changing it says whose it is.
    public func openStore(create: Bool, readOnly: Bool = false) throws -> SQLiteJobStore {
        if !FileManager.default.fileExists(atPath: storePath) {
            guard create else {
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: root, isDirectory: &isDirectory), isDirectory.boolValue else {
                    throw WatchError("'\(root)' is not a folder; give the folder 'upscale watch' watches")
                }
                throw WatchError("'\(root)' has no queue yet (no .upscale/queue.sqlite); start 'upscale watch \(root)' first")
            }
            try Self.makeFolder(logs, root: root)
        }
        if !create, access(state, W_OK) != 0 || access(storePath, W_OK) != 0 {
            guard readOnly else {
                var info = stat()
                let owner = stat(storePath, &info) == 0 ? getpwuid(info.st_uid).map { String(cString: $0.pointee.pw_name) } : nil
                throw WatchError("cannot change the queue of '\(root)': no write access to '\(storePath)'; run this as the user the watcher runs as"
                                 + (owner.map { " ('\($0)')" } ?? ""))
            }
            return try SQLiteJobStore(path: storePath, readOnly: true)
        }
        return try SQLiteJobStore(path: storePath)
    }

    /// Whether the folder is there and readable (an unmounted share or a renamed folder is not).
    public var isAvailable: Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: root, isDirectory: &isDirectory) && isDirectory.boolValue
            && access(root, R_OK | W_OK | X_OK) == 0 && FileManager.default.fileExists(atPath: state)
    }
}

public struct WatchError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// An exclusive lock on `.upscale/watch.lock` (flock): one watcher per folder. The kernel
/// drops it when the process dies, however it dies.
public final class FolderLock {
    private let fd: Int32

    public init(folder: WatchFolder) throws {
        try WatchFolder.makeFolder(folder.state, root: folder.root)
        fd = open(folder.lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw WatchError("cannot create '\(folder.lockPath)': \(String(cString: strerror(errno)))") }
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let holder = (try? String(contentsOfFile: folder.lockPath, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
            close(fd)
            throw WatchError("'\(folder.root)' is already being watched\(holder.isEmpty ? "" : " by \(holder)"); stop that watcher first (queue commands work alongside it)")
        }
        ftruncate(fd, 0)
        let text = "process \(getpid())\n"
        _ = text.withCString { write(fd, $0, strlen($0)) }
    }

    deinit { close(fd) }

    /// Whether a watcher holds `folder`'s lock now (a lock taken for a moment to ask is given
    /// back at once).
    public static func isHeld(folder: WatchFolder) -> Bool {
        let fd = open(folder.lockPath, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        guard flock(fd, LOCK_SH | LOCK_NB) == 0 else { return errno == EWOULDBLOCK }
        flock(fd, LOCK_UN)
        return false
    }
}

/// A job run's lock: `.upscale/running/job-<id>-<n>.lock`, made and locked (flock) by the
/// watcher before the job's child starts, inherited by the child (as `childDescriptor`), and
/// removed by the watcher once it is done with the job. The child holds the lock until it
/// ends, even if its watcher is killed first: it then gets SIGTERM, but one already past its
/// last look for a stop (syncing and renaming its finished output) goes on and places its
/// output a moment later. The child writes each output it reports into the file (`record`).
/// The next watcher waits for every lock left there (`waitForAll`) before it looks at the jobs
/// the last one was running, and finishes a job from the output its child recorded: a job is
/// never run a second time beside an output its first child placed.
public final class JobLock: @unchecked Sendable {
    /// The descriptor it has in the job's child.
    public static let childDescriptor: Int32 = 4

    public let path: String
    /// In this process; 10 or above, clear of the descriptors a child's report pipe and lock take.
    let fd: Int32

    private init(path: String, fd: Int32) {
        self.path = path
        self.fd = fd
    }

    static func folder(_ folder: WatchFolder) -> String { folder.state + "/running" }

    private static let counter = NSLock()
    nonisolated(unsafe) private static var runs = 0

    /// A new lock for a run of job `id` (its own file: a cancelled run of the same job may
    /// still be ending beside it).
    static func take(folder: WatchFolder, id: Int64) throws -> JobLock {
        let directory = Self.folder(folder)
        try WatchFolder.makeFolder(directory, root: folder.root)
        let run = counter.withLock { runs += 1; return runs }
        let path = directory + "/job-\(id)-\(run).lock"
        let opened = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard opened >= 0 else { throw WatchError("cannot create '\(path)': \(String(cString: strerror(errno)))") }
        let fd = fcntl(opened, F_DUPFD_CLOEXEC, 10)
        close(opened)
        guard fd >= 0, flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let reason = String(cString: strerror(errno))
            if fd >= 0 { close(fd) }
            unlink(path)
            throw WatchError("cannot lock '\(path)': \(reason)")
        }
        return JobLock(path: path, fd: fd)
    }

    /// Once the watcher is done with the job (its child ended, its result recorded).
    func release() {
        unlink(path)
        close(fd)
    }

    /// A watcher stopping before it could record a finished job's result: the file stays with
    /// the output the child recorded, and the next watcher finishes the job from it
    /// (`waitForAll`) rather than run it again beside that output.
    func leave() {
        close(fd)
    }

    /// What a job's child wrote in its lock file: the output it makes and how far it got with it.
    public struct Recorded: Equatable, Sendable {
        public enum Stage: Equatable, Sendable {
            /// A lock file of an earlier version: the output path alone.
            case unknown
            /// Planned, not placed: a file by that name is not this run's (another job of the
            /// folder given the same name, with `--unique-name`).
            case planned
            /// The child was renaming this finished file into place.
            case placing(PlacedFile)
            /// Renamed into place.
            case placed
        }

        public var output: String
        public var stage: Stage = .unknown

        /// The output the child placed, if it did: the file being placed if it is there by its
        /// identity (a name tried and found taken holds another job's file), or the output once
        /// placed (by name: a device number can change with a reboot or a remount) if it is there.
        public var placed: String? {
            switch stage {
            case .planned: return nil
            case .placing(let file): return file.isInPlace ? file.path : nil
            case .unknown, .placed: return FileManager.default.fileExists(atPath: output) ? output : nil
            }
        }
    }

    /// In the job's child: `path` is the output it plans to make.
    public static func record(output path: String, in fd: Int32) {
        write(path, "planned", to: fd)
    }

    /// In the job's child: `file` is about to be renamed into place, for `output`.
    public static func record(placing file: PlacedFile, for output: String, in fd: Int32) {
        write(output, JobReport.placing(file).line, to: fd)
    }

    /// In the job's child: the output was renamed to `path`.
    public static func record(placed path: String, in fd: Int32) {
        write(path, "placed", to: fd)
    }

    /// Two lines: the output (escaped: no newline in it) and the stage.
    private static func write(_ output: String, _ stage: String, to fd: Int32) {
        let text = JobReport.escaped(output) + "\n" + stage + "\n"
        let written = text.withCString { pwrite(fd, $0, strlen($0), 0) }
        if written >= 0 { ftruncate(fd, off_t(written)) }
    }

    private static func recorded(_ fd: Int32) -> Recorded? {
        var bytes = [UInt8](repeating: 0, count: 16384)
        let n = pread(fd, &bytes, bytes.count, 0)
        guard n > 1, bytes[n - 1] == 0x0A else { return nil }
        let lines = bytes[..<(n - 1)].split(separator: 0x0A, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
        var result = Recorded(output: JobReport.unescaped(lines[0]))
        if lines.count > 1 {
            switch lines[1] {
            case "planned": result.stage = .planned
            case "placed": result.stage = .placed
            default: if case .placing(let file)? = JobReport(line: lines[1]) { result.stage = .placing(file) }
            }
        }
        return result
    }

    /// What the runs a killed watcher left behind made, once their children have ended.
    public struct Left {
        /// No lock folder: the last watcher kept no locks (an earlier version, or it could not
        /// write the folder), and what the store says is all there is.
        public var unknown = false
        /// Jobs with a run that started a child: what it recorded (nil: nothing yet).
        public var outputs: [Int64: Recorded?] = [:]
        /// The lock files read: removed once the store has what they say (`removeFiles`).
        var files: [String] = []

        /// After the store has what the files say: a watcher that failed to write it (its disk
        /// full) left them for the next one, which ran the jobs again beside their outputs.
        func removeFiles() { files.forEach { unlink($0) } }
    }

    /// Waits for every lock a killed watcher's children still hold and reads what they recorded
    /// (the files stay until `Left.removeFiles`). Children that have not ended `grace` seconds after the wait
    /// began (stuck writing to a share that went away) are ended with SIGKILL and their
    /// temporary outputs removed. Nil if `stop` was set meanwhile.
    static func waitForAll(folder: WatchFolder, grace: Double, stop: CancellationFlag, say: (String) -> Void) -> Left? {
        let directory = Self.folder(folder)
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return Left(unknown: true) }
        let start = Date()
        var left = Left()
        // Oldest run first, so that a job's latest run is the one it keeps.
        let runs = names.compactMap { name -> (id: Int64, run: Int, name: String)? in
            let parts = name.split(separator: "-")
            guard name.hasSuffix(".lock"), parts.count == 3, let id = Int64(parts[1]),
                  let run = Int(parts[2].dropLast(".lock".count)) else { return nil }
            return (id, run, name)
        }.sorted { ($0.id, $0.run) < ($1.id, $1.run) }
        for (id, _, name) in runs {
            let path = directory + "/" + name
            let fd = open(path, O_RDWR | O_CLOEXEC)
            guard fd >= 0 else { continue }
            defer { close(fd) }
            if flock(fd, LOCK_EX | LOCK_NB) != 0 {
                let holders = holders(of: path)
                say("job \(id)'s process\(holders.isEmpty ? "" : " (pid \(holders.map(String.init).joined(separator: ", ")))"), left running by the last watcher, is still ending; waiting for it (up to \(Int(grace.rounded(.up))) s)")
                var killed = false
                while flock(fd, LOCK_EX | LOCK_NB) != 0 {
                    if stop.isCancelled { return nil }
                    if !killed, Date().timeIntervalSince(start) >= grace {
                        killed = true
                        let stuck = Self.holders(of: path)
                        for pid in stuck { kill(pid, SIGKILL) }
                        if let output = recorded(fd)?.output { stuck.forEach { PartialFile.remove(for: output, pid: $0) } }
                        say("job \(id)'s process did not end in \(Int(grace.rounded(.up))) s; stopped it (SIGKILL); its job runs again unless its output was in place")
                    }
                    usleep(50_000)
                }
            }
            left.outputs[id] = .some(recorded(fd))
            left.files.append(path)
        }
        return left
    }

    /// The processes that have `path` open as a job's child does (found by the file, not by a
    /// pid that may have been given to another process since).
    private static func holders(of path: String) -> [pid_t] {
        var lock = stat()
        guard stat(path, &lock) == 0 else { return [] }
        return ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { name in
            guard let pid = pid_t(name) else { return nil }
            var held = stat()
            guard stat("/proc/\(pid)/fd/\(childDescriptor)", &held) == 0, held.st_dev == lock.st_dev, held.st_ino == lock.st_ino else { return nil }
            return pid
        }
    }
}

/// Moves and names files without ever replacing one: `a.mov` taken becomes `a 2.mov`.
public enum SafeFiles {
    /// Renames `from` into `folder` under a free name (creating the folder), syncs both
    /// folders, and returns the new path. Across filesystems (`Originals/` a link to another
    /// disk) the file is copied, synced and compared by size before the original is removed.
    public static func move(_ from: String, into folder: String) throws -> String {
        // Never create folders for a file that is not there (the watched folder may have vanished).
        guard FileManager.default.fileExists(atPath: from) else { throw WatchError("'\(from)' is gone") }
        do {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        } catch {
            throw WatchError("cannot move '\(from)' to '\(folder)': \(fileErrorReason(error))")
        }
        var code: Int32 = EEXIST
        for _ in 0..<100 {
            let to = folder + "/" + FolderWrites.freeName(URL(fileURLWithPath: from).lastPathComponent, in: folder)
            if FolderWrites.renameNoReplace(from, to) == 0 {
                FolderWrites.sync(folder: folder)
                FolderWrites.sync(folder: URL(fileURLWithPath: from).deletingLastPathComponent().path)
                return to
            }
            code = errno
            if code == EEXIST { continue } // taken since the free name was chosen: choose again
            if code == EXDEV { return try copyAcross(from, to: to) }
            break
        }
        throw WatchError("cannot move '\(from)' to '\(folder)': \(String(cString: strerror(code)))")
    }

    /// The same in `folder` and every folder under it: what a killed watcher left in
    /// `Originals/` or `Failed/` (linked to another disk), each as big as the file it copied,
    /// which was otherwise removed only by a later move into the same folder.
    public static func removeStaleCopies(under folder: String) {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: folder, isDirectory: &isDirectory), isDirectory.boolValue else { return }
        removeStaleCopies(in: folder)
        guard let walk = FileManager.default.enumerator(atPath: folder) else { return }
        for case let path as String in walk where walk.fileAttributes?[.type] as? FileAttributeType == .typeDirectory {
            removeStaleCopies(in: folder + "/" + path)
        }
    }

    /// Copies that a process which has since died left half made (`.<name>.<pid>.copying`).
    private static func removeStaleCopies(in folder: String) {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [] where name.hasPrefix(".") && name.hasSuffix(".copying") {
            let parts = name.split(separator: ".")
            guard parts.count >= 3, let pid = pid_t(parts[parts.count - 2]), kill(pid, 0) != 0, errno == ESRCH else { continue }
            unlink(folder + "/" + name)
        }
    }

    /// `from` copied to `to` on another filesystem: written under a hidden name beside `to`,
    /// synced, checked to hold as many bytes as `from`, given `from`'s modification time, then
    /// named; only then is `from` removed, and only if it is still the file that was copied (a
    /// new version put in its place meanwhile stays). A copy `from` cannot be removed after is
    /// taken back, and the move fails.
    private static func copyAcross(_ from: String, to: String) throws -> String {
        let folder = URL(fileURLWithPath: to).deletingLastPathComponent().path
        removeStaleCopies(in: folder)
        let temporary = folder + "/." + URL(fileURLWithPath: to).lastPathComponent + ".\(getpid()).copying"
        let fail = { (what: String) -> WatchError in
            let text = String(cString: strerror(errno))
            unlink(temporary)
            return WatchError("cannot move '\(from)' to '\(folder)' (another disk): \(what): \(text)")
        }
        let input = open(from, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { throw fail("reading it failed") }
        defer { close(input) }
        let output = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard output >= 0 else { throw fail("writing failed") }
        var info = stat()
        fstat(input, &info)
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { buffer.deallocate() }
        var copied: Int64 = 0
        while true {
            let count = read(input, buffer, 1 << 20)
            if count == 0 { break }
            guard count > 0 else { close(output); throw fail("reading it failed") }
            var done = 0
            while done < count {
                let written = write(output, buffer + done, count - done)
                guard written > 0 else { close(output); throw fail("writing failed") }
                done += written
            }
            copied += Int64(count)
        }
        var times = [info.st_atim, info.st_mtim]
        futimens(output, &times)
        fchmod(output, info.st_mode & 0o7777)
        guard fsync(output) == 0 else { close(output); throw fail("writing failed") }
        close(output)
        guard copied == Int64(info.st_size) else {
            unlink(temporary)
            throw WatchError("cannot move '\(from)' to '\(folder)' (another disk): it changed while being copied")
        }
        var target = to
        while FolderWrites.renameNoReplace(temporary, target) != 0 {
            guard errno == EEXIST else { throw fail("naming the copy failed") }
            target = folder + "/" + FolderWrites.freeName(URL(fileURLWithPath: to).lastPathComponent, in: folder)
        }
        var now = stat()
        guard lstat(from, &now) == 0, now.isSameVersion(of: info) else {
            unlink(target)
            throw WatchError("cannot move '\(from)' to '\(folder)' (another disk): it was replaced while being copied")
        }
        guard unlink(from) == 0 else {
            let text = String(cString: strerror(errno))
            unlink(target)
            throw WatchError("cannot move '\(from)' to '\(folder)' (another disk): removing it after the copy failed: \(text)")
        }
        FolderWrites.sync(folder: folder)
        FolderWrites.sync(folder: URL(fileURLWithPath: from).deletingLastPathComponent().path)
        return target
    }
}
