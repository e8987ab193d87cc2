import Foundation
import Testing

/// The tests' own rules, checked on the test files of both packages (as `SourceLayoutTests`
/// checks the sources): every case of a parametrized test runs, every test that runs only under
/// a condition has that condition set by `scripts/test.sh`, and every wait uses the hang guard
/// rather than a guess at how slow a loaded machine is.
struct TestSuiteRulesTests {
    static let folders = ["Tests", "Tools/Tests"]

    /// Each test file with its text, by path relative to the package root.
    static func testFiles() throws -> [(path: String, text: String)] {
        try folders.flatMap { try SourceLayoutTests.swiftFiles(under: $0) }.map { ($0, try SourceLayoutTests.read($0)) }
    }

    /// A parametrized test whose literal argument list holds one case never runs the others its
    /// name promises (a squat test once had `[false]`, so its compacted case never ran).
    @Test func everyParametrizedTestHasMoreThanOneCase() throws {
        let parametrized = try Regex(#"@Test\((?:[^()]*,\s*)?arguments:\s*\["#)
        var single: [String] = []
        var lists = 0
        for (path, text) in try Self.testFiles() {
            for match in text.matches(of: parametrized) {
                guard let cases = Self.topLevelElements(of: text[match.range.upperBound...]) else { continue }
                lists += 1
                if cases < 2 { single.append(path) }
            }
        }
        #expect(lists > 10, "found only \(lists) parametrized tests: the pattern no longer matches them")
        #expect(single.isEmpty, "parametrized tests with one case: \(single)")
    }

    /// A test that runs only when a condition holds runs in CI only if `scripts/test.sh` makes it
    /// hold: an environment variable it sets, or the test database it starts. `.disabled` is not
    /// used: a test that cannot run is removed, with a note in docs/TESTING.md.
    @Test func everyConditionalTestRunsInTheTestScript() throws {
        let script = try SourceLayoutTests.read("scripts/test.sh")
        let condition = try Regex(#"\.enabled\(if:([^\n]*)"#)
        let variable = try Regex(#"environment\["([A-Z_]+)"\]"#)
        var unset: [String] = []
        let disabled = ".disabled" + "("  // spelled apart, so this file does not match itself
        var conditions = 0
        for (path, text) in try Self.testFiles() {
            if text.contains(disabled) { unset.append("\(path): a disabled test") }
            for match in text.matches(of: condition) {
                conditions += 1
                let clause = String(text[match.range])
                if clause.contains("hasTestDatabase") {
                    if !script.contains("with-postgres.sh") { unset.append("\(path): the test database") }
                } else if let name = clause.firstMatch(of: variable)?.output[1].substring {
                    if !script.contains("\(name)=1 swift test") { unset.append("\(path): \(name)") }
                } else {
                    unset.append("\(path): \(clause)")
                }
            }
        }
        #expect(conditions > 0, "no conditional test found: the pattern no longer matches them")
        #expect(unset.isEmpty, "conditions scripts/test.sh never sets: \(unset)")
    }

    /// A wait's bound tells a hang from slowness, so it is one constant (`hangGuard`, in each
    /// package's test support), never a number of seconds a test guessed: three suites at once on
    /// two cores outran guesses of 30 and 90 s.
    @Test func everyWaitUsesTheHangGuard() throws {
        let guesses = try Regex(
            #"Task\.sleep\(for: \.seconds\((?:[1-9]\d+)\)\)|within: \.seconds\(\d+\)|wait\(timeout: \.now\(\) \+|execute\([^()\n]*timeout: \.seconds\(\d+\)\)"#
        )
        var found: [String] = []
        for (path, text) in try Self.testFiles() {
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
            where line.contains(guesses) && !line.contains("hangGuard") {
                found.append("\(path):\(number + 1)")
            }
        }
        #expect(found.isEmpty, "waits bounded by a guess rather than hangGuard: \(found)")
    }

    /// `HTTPClient.shared` gives up on a response after 90 s without a byte: a deadline standing in
    /// for speed. Under three suites at once, a push queued behind other clients' Argon2id
    /// derivations waited longer and failed with `readTimeout`. Tests send through
    /// `testHTTPClient`, whose read timeout is the hang guard.
    @Test func noTestSendsThroughTheSharedHTTPClient() throws {
        let shared = "HTTPClient" + ".shared."  // spelled apart, so this line is not a use
        var found: [String] = []
        for (path, text) in try Self.testFiles() {
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
            where line.contains(shared) {
                found.append("\(path):\(number + 1)")
            }
        }
        #expect(found.isEmpty, "requests with a 90 s read timeout: \(found)")
    }

    /// The number of top-level elements of an array literal whose opening bracket precedes
    /// `text`; nil when the literal does not close.
    static func topLevelElements(of text: Substring) -> Int? {
        var depth = 0
        var commas = 0
        var empty = true
        for character in text {
            switch character {
            case "[", "(": depth += 1
            case ")": depth -= 1
            case "]" where depth == 0: return empty ? 0 : commas + 1
            case "]": depth -= 1
            case "," where depth == 0: commas += 1
            default: break
            }
            if !character.isWhitespace { empty = false }
        }
        return nil
    }
}
