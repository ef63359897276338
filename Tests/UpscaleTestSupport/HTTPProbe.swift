import Foundation

/// One HTTP/1.1 exchange over a plain socket, with every header exactly as given (a test
/// needs to send a foreign `Host` or `Origin`, which URLSession rewrites or refuses).
public struct HTTPProbe {
    public struct Reply {
        public let status: Int
        public let headers: [String: String]
        public let body: Data
        public var text: String { String(decoding: body, as: UTF8.self) }
        public func json() throws -> [String: Any] {
            try JSONSerialization.jsonObject(with: body) as? [String: Any] ?? [:]
        }
        public func header(_ name: String) -> String? { headers[name.lowercased()] }
    }

    public let port: Int
    public init(port: Int) { self.port = port }

    /// `headers` replace the defaults (`Host: 127.0.0.1:PORT`, `Connection: close`).
    public func send(_ method: String, _ path: String, headers: [String: String] = [:], body: String? = nil) throws -> Reply {
        var fields: [String: String] = ["Host": "127.0.0.1:\(port)", "Connection": "close"]
        for (k, v) in headers { fields[k] = v }
        if let body { fields["Content-Length"] = String(body.utf8.count) }
        if body != nil && fields["Content-Type"] == nil { fields["Content-Type"] = "application/json" }
        var request = "\(method) \(path) HTTP/1.1\r\n"
        for (k, v) in fields.sorted(by: { $0.key < $1.key }) { request += "\(k): \(v)\r\n" }
        request += "\r\n" + (body ?? "")

        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ProbeError("socket failed") }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw ProbeError("cannot connect to 127.0.0.1:\(port)") }
        let bytes = Array(request.utf8)
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { throw ProbeError("write failed") }
            sent += n
        }
        var received = Data()
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = read(fd, &chunk, chunk.count)
            if n <= 0 { break }
            received.append(contentsOf: chunk[0..<n])
        }
        guard let split = received.range(of: Data("\r\n\r\n".utf8)) else { throw ProbeError("no HTTP reply from \(method) \(path)") }
        let head = String(decoding: received[..<split.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
        let status = Int(head[0].split(separator: " ")[1]) ?? 0
        var replyHeaders: [String: String] = [:]
        for line in head.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            replyHeaders[name] = replyHeaders[name].map { $0 + "\n" + value } ?? value
        }
        var body = Data(received[split.upperBound...])
        if replyHeaders["transfer-encoding"]?.contains("chunked") == true { body = Self.unchunk(body) }
        return Reply(status: status, headers: replyHeaders, body: body)
    }

    static func unchunk(_ data: Data) -> Data {
        var out = Data()
        var rest = data[...]
        while let line = rest.range(of: Data("\r\n".utf8)) {
            let size = Int(String(decoding: rest[..<line.lowerBound], as: UTF8.self).split(separator: ";")[0], radix: 16) ?? 0
            if size == 0 { break }
            let start = line.upperBound
            out.append(rest[start..<start + size])
            rest = rest[(start + size + 2)...]
        }
        return out
    }
}

public struct ProbeError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
