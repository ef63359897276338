import CSQLite
import Foundation

/// A value bound to or read from an SQLite statement.
enum SQLValue: Equatable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)

    var int: Int? { if case .integer(let v) = self { return Int(v) }; return nil }
    var int64: Int64? { if case .integer(let v) = self { return v }; return nil }
    var double: Double? {
        switch self {
        case .real(let v): return v
        case .integer(let v): return Double(v)
        default: return nil
        }
    }
    var string: String? { if case .text(let v) = self { return v }; return nil }
}

protocol SQLBindable { var sqlValue: SQLValue { get } }
extension Int: SQLBindable { var sqlValue: SQLValue { .integer(Int64(self)) } }
extension Int64: SQLBindable { var sqlValue: SQLValue { .integer(self) } }
extension Double: SQLBindable { var sqlValue: SQLValue { .real(self) } }
extension String: SQLBindable { var sqlValue: SQLValue { .text(self) } }
extension Optional: SQLBindable where Wrapped: SQLBindable { var sqlValue: SQLValue { self?.sqlValue ?? .null } }

struct SQLiteError: Error, CustomStringConvertible {
    let description: String
    /// SQLITE_FULL: the disk holding the database is full.
    var diskFull = false
}

/// One connection to an SQLite file: WAL journal, FULL sync (a state change is on disk when
/// the call returns), a busy timeout so the watcher and `upscale queue` commands can share
/// the file. Not thread-safe: each thread opens its own connection.
final class SQLiteDatabase {
    private var handle: OpaquePointer?
    let path: String

    /// `readOnly`: for a user who may read the store but not write it. With no watcher running
    /// the WAL's shared-memory file is gone and that user cannot make it, so the file is then
    /// opened as unchanging (`immutable`): a snapshot, which is what a listing is.
    init(path: String, readOnly: Bool = false) throws {
        self.path = path
        var flags = SQLITE_OPEN_NOMUTEX
        var name = path
        if readOnly {
            flags |= SQLITE_OPEN_READONLY | SQLITE_OPEN_URI
            let escaped = path.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "?#"))) ?? path
            name = "file:\(escaped)?mode=ro" + (access(path + "-shm", R_OK) == 0 ? "" : "&immutable=1")
        } else {
            flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
        }
        let opened = sqlite3_open_v2(name, &handle, flags, nil)
        guard opened == SQLITE_OK else {
            let text = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "error \(opened)"
            sqlite3_close(handle)
            throw SQLiteError(description: "cannot open the job store '\(path)': \(text)")
        }
        sqlite3_busy_timeout(handle, 10_000)
        guard !readOnly else { return }
        try execute("PRAGMA journal_mode=WAL")
        try execute("PRAGMA synchronous=FULL")
        try execute("PRAGMA foreign_keys=ON")
    }

    deinit { sqlite3_close(handle) }

    private var message: String { String(cString: sqlite3_errmsg(handle)) }

    /// Runs one or more statements without parameters.
    func execute(_ sql: String) throws {
        var error: UnsafeMutablePointer<CChar>?
        if sqlite3_exec(handle, sql, nil, nil, &error) != SQLITE_OK {
            let text = error.map { String(cString: $0) } ?? message
            sqlite3_free(error)
            throw SQLiteError(description: "job store '\(path)': \(text)", diskFull: sqlite3_errcode(handle) & 0xff == SQLITE_FULL)
        }
    }

    /// Runs one statement and returns its rows, each column by name.
    @discardableResult
    func query(_ sql: String, _ values: [SQLBindable] = []) throws -> [[String: SQLValue]] {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(handle, sql, -1, &statement, nil) == SQLITE_OK else {
            throw SQLiteError(description: "job store '\(path)': \(message) in \(sql)")
        }
        defer { sqlite3_finalize(statement) }
        for (i, value) in values.enumerated() {
            let index = Int32(i + 1)
            switch value.sqlValue {
            case .null: sqlite3_bind_null(statement, index)
            case .integer(let v): sqlite3_bind_int64(statement, index, v)
            case .real(let v): sqlite3_bind_double(statement, index, v)
            case .text(let v): sqlite3_bind_text(statement, index, v, -1, upscale_sqlite_transient())
            }
        }
        var rows: [[String: SQLValue]] = []
        // Column names once per statement, not per row (a 10,000-job listing spent a third of
        // its time naming columns and growing dictionaries).
        let names = (0..<sqlite3_column_count(statement)).map { String(cString: sqlite3_column_name(statement, $0)) }
        while true {
            let step = sqlite3_step(statement)
            if step == SQLITE_DONE { break }
            guard step == SQLITE_ROW else {
                throw SQLiteError(description: "job store '\(path)': \(message)", diskFull: sqlite3_errcode(handle) & 0xff == SQLITE_FULL)
            }
            var row = [String: SQLValue](minimumCapacity: names.count)
            for (c, name) in zip(Int32(0)..., names) {
                switch sqlite3_column_type(statement, c) {
                case SQLITE_INTEGER: row[name] = .integer(sqlite3_column_int64(statement, c))
                case SQLITE_FLOAT: row[name] = .real(sqlite3_column_double(statement, c))
                case SQLITE_TEXT: row[name] = .text(String(cString: sqlite3_column_text(statement, c)))
                default: row[name] = .null
                }
            }
            rows.append(row)
        }
        return rows
    }

    /// Rows changed by the last statement.
    var changes: Int { Int(sqlite3_changes(handle)) }

    /// `body` inside BEGIN IMMEDIATE … COMMIT: the write lock is taken first, so two
    /// processes cannot both read a queued job and then both claim it.
    func transaction<T>(_ body: () throws -> T) throws -> T {
        try execute("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }
}
