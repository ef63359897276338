import CProcess
import Foundation

/// Decides when a file dropped into the folder is complete and may be taken:
/// - its size and modification time are unchanged over checks at least `settle` seconds
///   apart (two observations, the first and the latest);
/// - no process on this machine has it open for writing (a scan of /proc/*/fd, see
///   `OpenWriters`; it catches `cp`, `rsync`, browsers and editors that pause longer
///   than the settle time while still holding the file open);
/// - on a network filesystem (NFS, SMB/CIFS: writers on other machines are invisible to
///   /proc and to inotify) the quiet time is at least `networkSettle` seconds instead;
/// - FFmpeg can open it (checked by the caller).
/// The folder is polled (every second by the watcher) rather than watched with inotify:
/// polling works the same on local disks and network mounts, and a full scan each time
/// means nothing is missed after a restart or an unmount.
public final class FileSettler {
    struct Observation {
        var size: Int64
        var modified: Double
        var since: Double
    }

    public let settle: Double
    public let networkSettle: Double
    private var seen: [String: Observation] = [:]

    public init(settle: Double, networkSettle: Double = 30) {
        self.settle = settle
        self.networkSettle = networkSettle
    }

    /// Files that look complete now, among `files` (path → size, mtime) observed at `now`.
    /// `network` says whether the folder is on a network filesystem.
    public func settled(_ files: [String: (size: Int64, modified: Double)], now: Double, network: Bool,
                        openForWriting: Set<String>) -> [String] {
        var ready: [String] = []
        let quiet = network ? max(settle, networkSettle) : settle
        for (path, stat) in files {
            if var seen = seen[path], seen.size == stat.size, seen.modified == stat.modified {
                if now - seen.since >= quiet && !openForWriting.contains(path) { ready.append(path) }
                if openForWriting.contains(path) { seen.since = now; self.seen[path] = seen }
            } else {
                seen[path] = Observation(size: stat.size, modified: stat.modified, since: now)
            }
        }
        for path in seen.keys where files[path] == nil { seen[path] = nil }
        return ready.sorted()
    }

    /// Forget a file (taken, or to be looked at afresh).
    public func forget(_ path: String) { seen[path] = nil }

    /// Files still waiting to settle.
    public var pending: Int { seen.count }
}

/// Paths that some process on this machine has open for writing, from /proc/<pid>/fd
/// (the link target) and /proc/<pid>/fdinfo (the open flags). Processes of other users
/// are visible to root only; for a watcher running as a normal user, a writer of another
/// user is caught by the settle time alone.
public enum OpenWriters {
    /// Files under `folder` that some other process holds open for writing, named under
    /// `folder` as given. The kernel names open files by their real path: a folder watched
    /// through a symbolic link (~/Inbox on a data disk) is matched by its real path, or no
    /// writer was ever seen and a file was taken in mid-copy.
    public static func scan(under folder: String) -> Set<String> {
        let given = folder.hasSuffix("/") ? folder : folder + "/"
        let real = URL(fileURLWithPath: folder).resolvingSymlinksInPath().path
        let prefix = real.hasSuffix("/") ? real : real + "/"
        var result: Set<String> = []
        forEachWritten(where: { $0.hasPrefix(prefix) }) { _, target in result.insert(given + target.dropFirst(prefix.count)) }
        return result
    }

    /// Other processes that hold `path` open for writing (a recorder or a copy still at it),
    /// with their names, for a note: what is read now is only what they have written so far.
    public static func writers(of path: String) -> [(pid: Int32, name: String)] {
        let real = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        var result: [(pid: Int32, name: String)] = []
        forEachWritten(where: { $0 == real }) { pid, _ in
            guard !result.contains(where: { $0.pid == pid }) else { return }
            let name = (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
            result.append((pid, name ?? "?"))
        }
        return result
    }

    /// Calls `body` with each other process and file (by its real path, as the kernel names
    /// it) that process holds open for writing, of the files `wanted` picks.
    private static func forEachWritten(where wanted: (String) -> Bool, _ body: (Int32, String) -> Void) {
        guard let pids = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return }
        let me = getpid()
        for entry in pids {
            guard let pid = Int32(entry), pid != me,
                  let fds = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd") else { continue }
            for fd in fds {
                guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)"),
                      wanted(target),
                      let info = try? String(contentsOfFile: "/proc/\(pid)/fdinfo/\(fd)", encoding: .utf8),
                      let line = info.split(separator: "\n").first(where: { $0.hasPrefix("flags:") }),
                      let flags = Int(line.dropFirst("flags:".count).trimmingCharacters(in: .whitespaces), radix: 8) else { continue }
                if flags & Int(O_ACCMODE) != Int(O_RDONLY) { body(pid, target) }
            }
        }
    }
}

/// Whether `path` is on a network filesystem (NFS, SMB/CIFS, and FUSE mounts such as sshfs).
public func isNetworkFilesystem(_ path: String) -> Bool {
    let type = upscale_filesystem_type(path)
    guard type >= 0 else { return false }
    let networkTypes: Set<Int> = [0x6969 /* NFS */, 0xFF534D42 /* CIFS */, 0xFE534D42 /* SMB2 */, 0x517B /* SMB */,
                                  0x65735546 /* FUSE */]
    return networkTypes.contains(type)
}
