import Foundation
import HTTPTypes
import Hummingbird

/// Who may read and steer the queue.
///
/// - With a token (required off loopback): every API request carries it, as the page's cookie
///   or `Authorization: Bearer`; without it, 401. The page itself and its script load without
///   it (they hold no data) and ask for the token.
/// - Without a token (loopback only): the `Host` must name loopback, so a web page that
///   rebinds its own domain to 127.0.0.1 is refused (403).
/// - Actions are POST only (anything else on their paths: 403) and must come from this page:
///   a browser's `Origin` must be this server; a request without `Origin` (curl, scripts) must
///   carry the token as `Authorization: Bearer`. Otherwise 403.
/// - Every response forbids framing, inline script and content sniffing.
struct AccessGuard: RouterMiddleware {
    typealias Context = BasicRequestContext
    let token: String?

    static let cookie = "upscale_token"
    static let securityHeaders: [(HTTPField.Name, String)] = [
        (.contentSecurityPolicy, "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
        (HTTPField.Name("X-Content-Type-Options")!, "nosniff"),
        (HTTPField.Name("X-Frame-Options")!, "DENY"),
        (HTTPField.Name("Referrer-Policy")!, "no-referrer"),
    ]
    static let publicPaths: Set<String> = ["/", "/app.js", "/app.css", "/api/login"]
    static let actionPrefixes = ["/api/pause", "/api/resume", "/api/login"]

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response = try await decide(request, context: context, next: next)
        // HEAD is GET without the body (the reads' routes answer both).
        if request.method == .head { response.body = ResponseBody() }
        for (name, value) in Self.securityHeaders { response.headers[name] = value }
        return response
    }

    private func decide(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let path = request.uri.path
        let authority = request.head.authority ?? ""
        if token == nil && !Self.isLoopback(authority: authority) {
            return DashboardServer.problem(.forbidden, "this dashboard answers only to 127.0.0.1/localhost (Host was '\(authority)')")
        }
        let bearer = request.headers[.authorization].flatMap { value -> String? in
            value.lowercased().hasPrefix("bearer ") ? String(value.dropFirst(7)).trimmingCharacters(in: .whitespaces) : nil
        }
        let bearerValid = token.map { expected in bearer.map { Self.same($0, expected) } ?? false } ?? false
        let cookieValid = token.map { expected in request.cookies[Self.cookie].map { Self.same($0.value, expected) } ?? false } ?? false
        let isAction = Self.isAction(path)
        if isAction && request.method != .post {
            var response = DashboardServer.problem(.methodNotAllowed, "actions are POST only")
            response.headers[.allow] = "POST"
            return response
        }
        if !isAction && request.method != .get && request.method != .head {
            var response = DashboardServer.problem(.methodNotAllowed, "\(request.method) is not answered here: GET reads, POST to /api/… acts")
            response.headers[.allow] = "GET, HEAD"
            return response
        }
        if token != nil && !(bearerValid || cookieValid) && !Self.publicPaths.contains(path) {
            var response = DashboardServer.problem(.unauthorized, "this dashboard needs its token (Authorization: Bearer, or log in on the page)")
            response.headers[.wwwAuthenticate] = "Bearer"
            return response
        }
        if request.method != .get && request.method != .head {
            if let origin = request.headers[.origin] {
                guard origin == "http://" + authority || origin == "https://" + authority else {
                    return DashboardServer.problem(.forbidden, "refused: the request came from another site (Origin \(origin))")
                }
            } else if !bearerValid && path != "/api/login" {
                // Without a token there is none to send: said how scripts get one.
                return DashboardServer.problem(.forbidden, token == nil
                    ? "refused: actions without a token come only from the dashboard's page (its Origin); for scripts, start the dashboard with --token-file and send Authorization: Bearer"
                    : "refused: an action without Origin must carry the token (Authorization: Bearer)")
            }
        }
        do {
            return try await next(request, context)
        } catch let error as HTTPError {
            // Hummingbird's own refusals (a body that does not decode, an id that is not a
            // number, no such path) in the API's one shape, {"error": "…"}: they came as
            // {"error": {"message": "…"}}, or with no body at all.
            var response = DashboardServer.problem(error.status, error.body ?? error.status.reasonPhrase)
            for field in error.headers where response.headers[field.name] == nil { response.headers.append(field) }
            return response
        } catch let error as HTTPResponseError {
            throw error
        } catch {
            // The store could not be read or written (PostgreSQL unreachable, a locked disk):
            // one line for the page's status, and the next poll tries again.
            let line = String(describing: error).split(separator: "\n").first.map(String.init) ?? "\(error)"
            return DashboardServer.problem(.serviceUnavailable, line)
        }
    }

    static func isAction(_ path: String) -> Bool {
        if actionPrefixes.contains(path) { return true }
        let parts = path.split(separator: "/")
        return parts.count == 4 && parts[0] == "api" && parts[1] == "jobs" && ["retry", "cancel", "priority"].contains(parts[3])
    }

    /// "127.0.0.1:8080", "localhost:8080", "[::1]:8080" (the Host header's forms of loopback).
    static func isLoopback(authority: String) -> Bool {
        var host = authority
        if host.hasPrefix("[") {
            host = String(host.dropFirst().prefix { $0 != "]" })
        } else if let colon = host.lastIndex(of: ":") {
            host = String(host[..<colon])
        }
        return isLoopback(host: host.lowercased())
    }

    static func isLoopback(host: String) -> Bool {
        if host == "localhost" || host == "::1" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }

    /// Compares without stopping at the first difference (the time taken says nothing about the token).
    static func same(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        var difference = UInt8(x.count == y.count ? 0 : 1)
        for i in 0..<max(x.count, y.count) {
            difference |= (i < x.count ? x[i] : 0) ^ (i < y.count ? y[i] : 0)
        }
        return difference == 0
    }
}
