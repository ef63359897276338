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

/// A running job's lock: `.upscale/running/job-<id>.lock`, locked (flock) by the watcher
/// before the job's child starts and inherited by the child, which holds it until it ends,
/// even if its watcher is killed first. The child then gets SIGTERM, but one already past
/// its last look for a stop (syncing and renaming its finished output) goes on and places
/// its output a moment later. The next watcher waits for every lock left there before it
/// looks at the jobs the last one was running, so it never runs such a job a second time.
public final class JobLock {
    /// The descriptor it has in the job's child.
    public static let childDescriptor: Int32 = 4

    public let path: String
    /// In this process; above the descriptors a child's report pipe and lock take.
    let fd: Int32

    private init(path: String, fd: Int32) {
        self.path = path
        self.fd = fd
    }

    static func folder(_ folder: WatchFolder) -> String { folder.state + "/running" }

    /// Takes job `id`'s lock (waiting, as at start, for a child a killed watcher left holding it).
    static func take(folder: WatchFolder, id: Int64, grace: Double, say: (String) -> Void) throws -> JobLock {
        let directory = Self.folder(folder)
        try WatchFolder.makeFolder(directory, root: folder.root)
        let path = directory + "/job-\(id).lock"
        let opened = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard opened >= 0 else { throw WatchError("cannot create '\(path)': \(String(cString: strerror(errno)))") }
        let fd = fcntl(opened, F_DUPFD_CLOEXEC, 10)
        close(opened)
        guard fd >= 0 else { throw WatchError("cannot open '\(path)': \(String(cString: strerror(errno)))") }
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            waitFor(path: path, fd: fd, output: nil, grace: grace, say: say)
        }
        return JobLock(path: path, fd: fd)
    }

    /// Records the pid of the child that holds it (for the wait of a later watcher).
    func holder(_ pid: pid_t) {
        ftruncate(fd, 0)
        let text = "\(pid)\n"
        _ = text.withCString { pwrite(fd, $0, strlen($0), 0) }
    }

    /// Once the child has ended: the lock file goes (while still locked, so that no later
    /// watcher takes a lock on a name about to be removed) and the lock with it.
    func release() {
        unlink(path)
        close(fd)
    }

    /// Waits for every lock a killed watcher's children still hold, then removes the files.
    /// A child that has not ended `grace` seconds after the wait began (stuck writing to a
    /// share that went away) is ended with SIGKILL and its temporary output removed; its job
    /// then runs again. `outputs` gives each job's planned output by id.
    static func waitForAll(folder: WatchFolder, grace: Double, outputs: [Int64: String], say: (String) -> Void) {
        let directory = Self.folder(folder)
        for name in ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted() {
            let path = directory + "/" + name
            let fd = open(path, O_RDWR | O_CLOEXEC)
            guard fd >= 0 else { continue }
            if flock(fd, LOCK_EX | LOCK_NB) != 0 {
                let id = Int64(name.dropFirst("job-".count).dropLast(".lock".count))
                waitFor(path: path, fd: fd, output: id.flatMap { outputs[$0] }, grace: grace, say: say)
            }
            unlink(path)
            close(fd)
        }
    }

    /// Blocks until `fd`'s lock is taken, ending its holder after `grace` seconds.
    private static func waitFor(path: String, fd: Int32, output: String?, grace: Double, say: (String) -> Void) {
        let holder = readHolder(fd)
        let job = URL(fileURLWithPath: path).deletingPathExtension().lastPathComponent.replacingOccurrences(of: "-", with: " ")
        say("\(job)'s process\(holder.map { " (pid \($0))" } ?? ""), left running by the last watcher, is still ending; waiting for it (up to \(Int(grace.rounded(.up))) s)")
        let start = Date()
        var killed = false
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            if !killed, Date().timeIntervalSince(start) >= grace {
                killed = true
                if let holder, holds(holder, path) {
                    kill(holder, SIGKILL)
                    if let output { PartialFile.remove(for: output, pid: holder) }
                    say("\(job)'s process (pid \(holder)) did not end; stopped it (SIGKILL)")
                } else {
                    say("\(job)'s lock '\(path)' is held by a process that does not end; waiting for it")
                }
            }
            usleep(50_000)
        }
    }

    private static func readHolder(_ fd: Int32) -> pid_t? {
        var bytes = [UInt8](repeating: 0, count: 32)
        let n = pread(fd, &bytes, bytes.count, 0)
        guard n > 0 else { return nil }
        return pid_t(String(decoding: bytes[..<n], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Whether process `pid` has `path` open as a job's child does (not another process that
    /// was given the same pid since).
    private static func holds(_ pid: pid_t, _ path: String) -> Bool {
        var held = stat(), lock = stat()
        guard stat("/proc/\(pid)/fd/\(childDescriptor)", &held) == 0, stat(path, &lock) == 0 else { return false }
        return held.st_dev == lock.st_dev && held.st_ino == lock.st_ino
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
        guard lstat(from, &now) == 0, now.st_dev == info.st_dev, now.st_ino == info.st_ino, now.st_size == info.st_size,
              now.st_mtim.tv_sec == info.st_mtim.tv_sec, now.st_mtim.tv_nsec == info.st_mtim.tv_nsec else {
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
