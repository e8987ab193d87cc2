@testable import Chronicle
@testable import ChronicleFormat
@testable import ChronicleHTTPServer
import ChronicleHTTP
import Foundation
import Testing
import ToolsTestSupport

/// Plain HTTP is allowed only to a loopback IP literal or `localhost`, never to a name that looks like one.
struct LoopbackAddressTests {
    /// `isLoopback` (client) and `serve`'s check take any host starting with "127." as this
    /// machine: `127.0.0.1.attacker.example` is a DNS name that resolves wherever its owner
    /// wants, and the bearer token then crosses the network in the clear without `--insecure`.
    @Test func plainHTTPToADNSNameStartingWith127IsRefused() async throws {
        let url = try #require(URL(string: "http://127.0.0.1.attacker.example:8080"))
        #expect(!HTTPTransport.isLoopback(url))
        #expect(HTTPTransport.isLoopback(host: "127.0.0.1") && HTTPTransport.isLoopback(host: "127.1.2.3") && HTTPTransport.isLoopback(host: "[::1]"))
        #expect(!HTTPTransport.isLoopback(host: "127.0.0.1.attacker.example") && !HTTPTransport.isLoopback(host: "1270.0.0.1"))
        let transport = HTTPTransport(baseURL: url, token: "the-token")
        do {
            _ = try await transport.info()
            Issue.record("info() succeeded")
        } catch {
            #expect("\(error)".contains("plain HTTP"), "not refused up front; the request was attempted: \(error)")
        }
    }
}
