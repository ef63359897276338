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

    /// The store, creating `.upscale/` when `create` (the watcher); `upscale queue` only opens an existing one.
    public func openStore(create: Bool) throws -> SQLiteJobStore {
        if !FileManager.default.fileExists(atPath: storePath) {
            guard create else { throw WatchError("'\(root)' has no queue yet (no .upscale/queue.sqlite); start 'upscale watch \(root)' first") }
            try FileManager.default.createDirectory(atPath: logs, withIntermediateDirectories: true)
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
        try FileManager.default.createDirectory(atPath: folder.state, withIntermediateDirectories: true)
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
}

/// Moves and names files without ever replacing one: `a.mov` taken becomes `a 2.mov`.
public enum SafeFiles {
    /// Renames `from` into `folder` under a free name (creating the folder), syncs both
    /// folders, and returns the new path. Same filesystem only: the file is never copied.
    public static func move(_ from: String, into folder: String) throws -> String {
        // Never create folders for a file that is not there (the watched folder may have vanished).
        guard FileManager.default.fileExists(atPath: from) else { throw WatchError("'\(from)' is gone") }
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let name = FolderWrites.freeName(URL(fileURLWithPath: from).lastPathComponent, in: folder)
        let to = folder + "/" + name
        // link + unlink instead of rename: link fails rather than replace a file that appeared meanwhile.
        if link(from, to) != 0 {
            let reason = String(cString: strerror(errno))
            throw WatchError("cannot move '\(from)' to '\(folder)': \(reason)")
        }
        unlink(from)
        FolderWrites.sync(folder: folder)
        FolderWrites.sync(folder: URL(fileURLWithPath: from).deletingLastPathComponent().path)
        return to
    }
}
