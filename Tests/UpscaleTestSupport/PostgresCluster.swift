import Foundation

/// A throwaway PostgreSQL cluster from Debian's `postgresql` package: `initdb` into a temp
/// folder, `pg_ctl start` on a free loopback port with its socket in that folder, stopped and
/// removed at the end. initdb refuses root, so as root the cluster runs as the package's
/// `postgres` user (`runuser -u postgres --`) in a folder it owns.
public final class PostgresCluster {
    public let folder: String
    public let port: Int
    public let bin: String
    private let asPostgres: Bool

    public var url: String { "postgres://upscale@127.0.0.1:\(port)/postgres" }

    /// With `tls`, the server also accepts TLS, with a self-signed certificate made here.
    public let tls: Bool

    public init(tls: Bool = false) throws {
        self.tls = tls
        let roots = ((try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? [])
            .compactMap(Int.init).sorted()
        guard let version = roots.last else {
            throw NSError(domain: "PostgresCluster", code: 1, userInfo: [NSLocalizedDescriptionKey:
                "PostgreSQL is not installed (apt-get install postgresql; .ci/run does)"])
        }
        bin = "/usr/lib/postgresql/\(version)/bin"
        var template = Array("/tmp/upscale-pg-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw NSError(domain: "PostgresCluster", code: 2) }
        folder = String(cString: made)
        asPostgres = getuid() == 0
        if asPostgres, let pw = getpwnam("postgres") {
            chown(folder, pw.pointee.pw_uid, pw.pointee.pw_gid)
        }
        port = Self.freePort()
        try run([bin + "/initdb", "-D", folder + "/data", "-U", "upscale", "-A", "trust", "-E", "UTF8", "--no-sync"])
        if tls {
            try run(["/usr/bin/openssl", "req", "-new", "-x509", "-days", "2", "-nodes", "-subj", "/CN=upscale-test",
                     "-newkey", "rsa:2048", "-keyout", folder + "/server.key", "-out", folder + "/server.crt"])
            try run(["/bin/chmod", "600", folder + "/server.key"])
        }
        try start()
    }

    deinit { stop() }

    private var options: String {
        "-p \(port) -k \(folder) -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=60"
            + (tls ? " -c ssl=on -c ssl_cert_file=\(folder)/server.crt -c ssl_key_file=\(folder)/server.key" : "")
    }

    public func start() throws {
        try run([bin + "/pg_ctl", "-D", folder + "/data", "-l", folder + "/log", "-w", "-o", options, "start"])
    }

    /// `pg_ctl restart -m immediate`: the server dies without a shutdown checkpoint, as in a crash.
    public func restartImmediately() throws {
        try run([bin + "/pg_ctl", "-D", folder + "/data", "-l", folder + "/log", "-w", "-m", "immediate", "-o", options, "restart"])
    }

    public func stop() {
        _ = try? run([bin + "/pg_ctl", "-D", folder + "/data", "-m", "immediate", "-w", "stop"])
        try? FileManager.default.removeItem(atPath: folder)
    }

    /// Runs a command and waits with waitpid. (Foundation's Process waits for a descriptor that
    /// the server pg_ctl starts inherits, so it would never see pg_ctl exit.)
    @discardableResult
    public func run(_ command: [String]) throws -> String {
        // Run from the cluster's folder (the postgres user may not be allowed into ours).
        let inFolder = ["/bin/sh", "-c", "cd \"$0\" && exec \"$@\"", folder] + command
        let argv = asPostgres ? ["/usr/sbin/runuser", "-u", "postgres", "--"] + inFolder : inFolder
        let outPath = NSTemporaryDirectory() + "upscale-pg-\(UUID().uuidString).out"
        defer { unlink(outPath) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, outPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        var cargs = argv.map { strdup($0) } + [nil]
        defer { cargs.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, argv[0], &actions, nil, &cargs, environ)
        guard spawned == 0 else { throw NSError(domain: "PostgresCluster", code: Int(spawned)) }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let text = (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? ""
        guard status == 0 else {
            throw NSError(domain: "PostgresCluster", code: Int(status), userInfo: [NSLocalizedDescriptionKey:
                "\(command.joined(separator: " ")) failed: \(text)"])
        }
        return text
    }

    public static func freePort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = 0
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) } }
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        return Int(UInt16(bigEndian: addr.sin_port))
    }
}
