import ChronicleHub
import Foundation
import Logging
import PostgresNIO
import Testing
import ToolsTestSupport

/// A database the hub cannot use is reported by every hub command at once, with the reason and
/// the next step, and a non-zero status: not a minute of retries ending in the connection pool's
/// "circuitBreakerTripped", nor PostgresNIO's generic "PSQLError".
@Suite(.enabled(if: hasTestDatabase, "needs CHRONICLE_TEST_DATABASE: run scripts/test.sh"))
struct HubDatabaseConnectionTests {
    static func refusal(_ url: String, command: [String] = ["hub", "tenant", "list"]) async throws -> ToolResult {
        let result = try await runChronicle(command + ["--database", url])
        #expect(result.status == 2, "\(url): \(result.stdout) \(result.stderr)")
        #expect(!result.stderr.contains("ConnectionPoolError") && !result.stderr.contains("circuitBreaker"), "\(result.stderr)")
        #expect(!result.stderr.contains("Generic description"), "\(result.stderr)")
        return result
    }

    @Test func tlsRequiredOfAServerWithoutTLS() async throws {
        let result = try await Self.refusal(try #require(testDatabase) + "?sslmode=require", command: ["hub", "migrate"])
        #expect(result.stderr.contains("does not offer TLS"), "\(result.stderr)")
    }

    @Test func aLoginTheServerRefuses() async throws {
        let url = try #require(testDatabase).replacingOccurrences(of: "://chronicle@", with: "://no_such_role@")
        let result = try await Self.refusal(url)
        #expect(result.stderr.contains("refused the login") && result.stderr.contains("no_such_role"), "\(result.stderr)")
    }

    @Test func aDatabaseThatDoesNotExist() async throws {
        let url = try #require(testDatabase).replacingOccurrences(of: "/postgres", with: "/no_such_database")
        let result = try await Self.refusal(url)
        #expect(result.stderr.contains("\"no_such_database\" does not exist"), "\(result.stderr)")
    }

    @Test func nothingListeningOnThePort() async throws {
        let result = try await Self.refusal("postgres://chronicle@127.0.0.1:1/postgres?sslmode=disable", command: ["hub", "migrate"])
        #expect(result.stderr.contains("127.0.0.1:1: connection refused"), "\(result.stderr)")
    }

    /// A database without the hub's tables: the error says to run `chronicle hub migrate`.
    @Test func aDatabaseWithoutTheHubsTables() async throws {
        try await withEmptyDatabase { url in
            let result = try await Self.refusal(url)
            #expect(result.stderr.contains("run `chronicle hub migrate` first"), "\(result.stderr)")
        }
    }
}
