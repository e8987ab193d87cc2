import Logging
import NIOCore
import NIOPosix
import PostgresNIO

/// The hub's database cannot be used: unreachable, refusing the login, without TLS where TLS was
/// required, or without the hub's tables. `reason` names the server, the cause and what to do.
public struct HubDatabaseUnavailable: Error, CustomStringConvertible {
    /// What went wrong and what to do, in one line.
    public let reason: String
    public var description: String { reason }

    /// - Parameter reason: what went wrong and what to do, in one line.
    public init(reason: String) { self.reason = reason }
}

extension HubDatabase {
    /// Opens one connection with the pool's settings, runs `SELECT 1` and closes it: a database
    /// this node cannot reach or log in to is reported at once with the reason (the pool itself
    /// retries for about a minute, then says only that its circuit breaker tripped).
    /// - Throws: ``HubDatabaseUnavailable``.
    public func checkConnection() async throws(HubDatabaseUnavailable) {
        do {
            var connectionConfiguration = PostgresConnection.Configuration(
                host: target.host, port: target.port, username: target.user, password: target.password, database: target.database,
                tls: try target.connectionTLS())
            connectionConfiguration.options.connectTimeout = .seconds(10)
            let connection = try await PostgresConnection.connect(configuration: connectionConfiguration, id: 0, logger: logger)
            defer { Task { try? await connection.close() } }
            try await connection.query("SELECT 1", logger: logger)
        } catch {
            throw HubDatabaseUnavailable(reason: Self.describe(error, at: target))
        }
    }

    /// A database error as an operator reads it: the server, the cause, the next step; `nil`
    /// for an error that is not the database's.
    public static func describe(_ error: any Error) -> String? {
        guard error is PSQLError || error is PostgresTransactionError || error is HubDatabaseUnavailable
            || "\(type(of: error))".contains("ConnectionPoolError")
        else {
            return nil
        }
        return describe(error, at: nil)
    }

    static func describe(_ error: any Error, at target: Target?) -> String {
        if let error = error as? HubDatabaseUnavailable { return error.reason }
        let server = target.map { "the hub's database at \($0.host):\($0.port)" } ?? "the hub's database"
        if let error = error as? PostgresTransactionError, let inner = error.closureError ?? error.beginError ?? error.commitError {
            return describe(inner, at: target)
        }
        if let error = error as? PSQLError {
            switch error.code {
            case .sslUnsupported:
                return "\(server) does not offer TLS, and the URL requires it (sslmode=require): enable TLS on the server, or use sslmode=disable on a network you trust"
            case .failedToAddSSLHandler, .receivedUnencryptedDataAfterSSLRequest:
                return "\(server): the TLS handshake failed (\(error.underlying.map { "\($0)" } ?? "no detail")); check the server's certificate and sslmode"
            case .server:
                let message = error.serverInfo?[.message] ?? "an error"
                let state = error.serverInfo?[.sqlState] ?? ""
                switch state {
                case "28000", "28P01":
                    return "\(server) refused the login: \(message); check the user and the password (CHRONICLE_HUB_DATABASE or --database-file)"
                case "3D000":
                    return "\(server): \(message); create it, or name another database in the URL"
                case "42P01", "42703":
                    return "\(server) lacks the hub's tables (\(message)): run `chronicle hub migrate` first"
                case "53300":
                    return "\(server) has no connection left (\(message)): raise max_connections or run fewer nodes"
                default:
                    return "\(server) answered: \(message) (SQLSTATE \(state))"
                }
            case .unsupportedAuthMechanism, .authMechanismRequiresPassword, .saslError:
                return "\(server) asks for a login this URL cannot give (\(error.code)): put the password in CHRONICLE_HUB_DATABASE or --database-file"
            case .connectionError:
                return "cannot connect to \(server): \(error.underlying.map(Self.networkReason) ?? "no answer"); check the host, the port and that PostgreSQL is running"
            case .serverClosedConnection, .clientClosedConnection, .uncleanShutdown:
                return "\(server) closed the connection (\(error.code)); retry, and check the server's log"
            default:
                return "\(server): \(error.code)"
            }
        }
        if "\(type(of: error))".contains("ConnectionPoolError") {
            return "\(server) could not be reached for about a minute (\(error)); `chronicle hub migrate` shows the cause at once"
        }
        return "\(server): \(networkReason(error))"
    }

    /// A socket error without NIO's type names: "connection refused", "no answer within 10 s".
    static func networkReason(_ error: any Error) -> String {
        if let error = error as? NIOConnectionError {
            if let first = error.connectionErrors.first { return networkReason(first.error) }
            if error.dnsAError != nil || error.dnsAAAAError != nil { return "the host name does not resolve" }
        }
        if let error = error as? IOError {
            switch error.errnoCode {
            case ECONNREFUSED: return "connection refused"
            case EHOSTUNREACH, ENETUNREACH: return "host unreachable"
            case ETIMEDOUT: return "no answer"
            default: return "\(error.description)"
            }
        }
        if error is ChannelError, case ChannelError.connectTimeout = error { return "no answer within 10 s" }
        let text = "\(error)"
        if text.contains("connectTimeout") { return "no answer within 10 s" }
        if text.contains("NXDOMAIN") || text.contains("unknown host") || text.contains("Name or service not known") { return "the host name does not resolve" }
        return text
    }
}
