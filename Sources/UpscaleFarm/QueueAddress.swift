import Foundation

/// `postgres://user@host:port/database?sslmode=require`: where the shared queue lives.
/// `sslmode` as libpq reads it: `disable` (default), `require` (TLS, the server's certificate
/// not checked), `verify-full` (TLS, certificate checked against the system's CAs and the host).
/// The password never comes from the command line: `PGPASSWORD`, then `~/.pgpass`
/// (`host:port:database:user:password`, `*` matching anything), as libpq does.
public struct QueueAddress: Sendable, Equatable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public var user: String
    public var database: String
    public var requireTLS: Bool
    /// With TLS: check the server's certificate (`verify-full`).
    public var verifyCertificate: Bool
    public var password: String?

    public var description: String {
        "postgres://\(user)@\(host.contains(":") ? "[\(host)]" : host):\(port)/\(database)" + (requireTLS ? "?sslmode=\(verifyCertificate ? "verify-full" : "require")" : "")
    }

    public init(_ text: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        guard let url = URLComponents(string: text), ["postgres", "postgresql"].contains(url.scheme ?? ""),
              let host = url.host, !host.isEmpty else {
            throw FarmError("'\(text)' is not a queue address; write postgres://user@host:port/database")
        }
        if url.password != nil {
            throw FarmError("put the queue's password in PGPASSWORD or ~/.pgpass, not in the address (it would show in `ps` and shell history)")
        }
        // An IPv6 literal without its brackets: with them it was looked up as a host name
        // ("cannot reach the queue at postgres://…@[::1]:5432/…").
        self.host = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        port = url.port ?? 5432
        user = url.user ?? environment["PGUSER"] ?? environment["USER"] ?? "postgres"
        let path = url.path.hasPrefix("/") ? String(url.path.dropFirst()) : url.path
        database = path.isEmpty ? user : path
        let mode = url.queryItems?.first { $0.name == "sslmode" }?.value ?? "disable"
        guard ["disable", "require", "verify-full"].contains(mode) else {
            throw FarmError("sslmode '\(mode)' is not supported; use sslmode=require, sslmode=verify-full or leave it out")
        }
        requireTLS = mode != "disable"
        verifyCertificate = mode == "verify-full"
        password = environment["PGPASSWORD"] ?? Self.passfile(environment: environment, host: self.host, port: port, database: database, user: user)
    }

    /// The first matching line of ~/.pgpass (or PGPASSFILE).
    static func passfile(environment: [String: String], host: String, port: Int, database: String, user: String) -> String? {
        let path = environment["PGPASSFILE"] ?? (environment["HOME"].map { "\($0)/.pgpass" } ?? "")
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            // Fields split on unescaped colons; \: and \\ are literal.
            var fields: [String] = [""]
            var escaped = false
            for c in line {
                if escaped { fields[fields.count - 1].append(c); escaped = false }
                else if c == "\\" { escaped = true }
                else if c == ":" { fields.append("") }
                else { fields[fields.count - 1].append(c) }
            }
            guard fields.count == 5 else { continue }
            let wanted = [host, String(port), database, user]
            if zip(fields.prefix(4), wanted).allSatisfy({ $0 == "*" || $0 == $1 }) { return fields[4] }
        }
        return nil
    }
}

/// A queue problem in one line, for the user.
public struct FarmError: Error, CustomStringConvertible {
    public let description: String
    /// Another worker took this worker's name while it was cut off from the queue: it stops.
    public let nameTaken: Bool
    public init(_ description: String, nameTaken: Bool = false) {
        self.description = description
        self.nameTaken = nameTaken
    }
}

/// Rewrites path prefixes for this machine (`--map /mnt/nas=/Volumes/nas`): the queue keeps
/// paths as the submitting machine saw them.
public struct PathMap: Sendable {
    public let rules: [(from: String, to: String)]

    /// Refused: a rule that is not FROM=TO, a relative prefix (paths on the queue are absolute,
    /// so it would never match), and one prefix mapped twice to different places (only one
    /// of them could apply).
    public init(_ specs: [String]) throws {
        rules = try specs.map { spec in
            guard let eq = spec.firstIndex(of: "="), eq != spec.startIndex, spec.index(after: eq) != spec.endIndex else {
                throw FarmError("--map '\(spec)' should be FROM=TO (two path prefixes)")
            }
            let rule = (from: String(spec[..<eq]), to: String(spec[spec.index(after: eq)...]))
            guard rule.from.hasPrefix("/"), rule.to.hasPrefix("/") else {
                throw FarmError("--map '\(spec)': both prefixes must be absolute paths (FROM as submitted, TO on this machine)")
            }
            return rule
        }
        var seen: [String: String] = [:]
        for rule in rules {
            let from = Self.trimmed(rule.from), to = Self.trimmed(rule.to)
            if let other = seen.updateValue(to, forKey: from), other != to {
                throw FarmError("--map gives '\(from)' twice, to '\(other)' and to '\(to)'; keep one")
            }
        }
    }

    /// A prefix without its trailing slash ("/" stays).
    private static func trimmed(_ prefix: String) -> String {
        prefix.count > 1 && prefix.hasSuffix("/") ? String(prefix.dropLast()) : prefix
    }

    /// `path` with its longest matching prefix replaced (whole path components only).
    public func apply(_ path: String) -> String {
        let matching = rules.filter { rule in
            let from = rule.from.hasSuffix("/") ? String(rule.from.dropLast()) : rule.from
            return path == from || path.hasPrefix(from + "/")
        }
        guard let rule = matching.max(by: { $0.from.count < $1.from.count }) else { return path }
        let from = rule.from.hasSuffix("/") ? String(rule.from.dropLast()) : rule.from
        let to = rule.to.hasSuffix("/") ? String(rule.to.dropLast()) : rule.to
        return to + path.dropFirst(from.count)
    }
}
