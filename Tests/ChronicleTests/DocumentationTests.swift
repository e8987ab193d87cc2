import Chronicle
import Foundation
import Testing

/// Every Swift code block of README.md and of the DocC articles is the visible part of a
/// snippet in `Snippets/`, which every `swift build` compiles: the documentation cannot
/// drift from the API without this suite or the build failing.
struct DocumentationTests {
    /// The package's root, found from this file's path.
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Which snippet holds the code blocks of which document.
    static let documents: [(document: String, snippet: String)] = [
        ("README.md", "Snippets/ReadmeUsage.swift"),
        ("Sources/Chronicle/Documentation.docc/Chronicle.md", "Snippets/OverviewArticle.swift"),
        ("Sources/Chronicle/Documentation.docc/GettingStarted.md", "Snippets/GettingStartedArticle.swift"),
        ("Sources/Chronicle/Documentation.docc/Secrets.md", "Snippets/SecretsArticle.swift"),
        ("Sources/Chronicle/Documentation.docc/Replication.md", "Snippets/ReplicationArticle.swift"),
    ]

    /// The ```swift blocks of a Markdown text.
    static func codeBlocks(_ markdown: String) -> [String] {
        var blocks: [String] = []
        var current: [Substring]?
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
            if current == nil, line.trimmingCharacters(in: .whitespaces) == "```swift" {
                current = []
            } else if current != nil, line.trimmingCharacters(in: .whitespaces) == "```" {
                if let lines = current { blocks.append(lines.joined(separator: "\n")) }
                current = nil
            } else {
                current?.append(line)
            }
        }
        return blocks
    }

    /// The runs of lines between `// snippet.show` and the next `// snippet.hide` (or the end).
    static func visibleRuns(_ snippet: String) -> [String] {
        var runs: [String] = []
        var current: [Substring]?
        for line in snippet.split(separator: "\n", omittingEmptySubsequences: false) {
            switch line.trimmingCharacters(in: .whitespaces) {
            case "// snippet.show": current = []
            case "// snippet.hide":
                if let run = current { runs.append(run.joined(separator: "\n")) }
                current = nil
            default: current?.append(line)
            }
        }
        if let run = current { runs.append(run.joined(separator: "\n")) }
        return runs.map { $0.trimmingCharacters(in: .newlines) }
    }

    @Test(arguments: documents.map(\.document))
    func everyCodeBlockIsACompiledSnippet(document: String) throws {
        let snippet = try #require(Self.documents.first { $0.document == document }?.snippet)
        let markdown = try String(contentsOf: Self.root.appendingPathComponent(document), encoding: .utf8)
        let source = try String(contentsOf: Self.root.appendingPathComponent(snippet), encoding: .utf8)
        let blocks = Self.codeBlocks(markdown).map { $0.trimmingCharacters(in: .newlines) }
        #expect(!blocks.isEmpty, "\(document) has no Swift code block")
        #expect(blocks == Self.visibleRuns(source), "the Swift blocks of \(document) differ from the visible code of \(snippet)")
    }

    @Test func everyDocumentWithSwiftCodeHasASnippet() throws {
        let articles = try FileManager.default.contentsOfDirectory(
            atPath: Self.root.appendingPathComponent("Sources/Chronicle/Documentation.docc").path)
        let documents = ["README.md"] + articles.filter { $0.hasSuffix(".md") }.map { "Sources/Chronicle/Documentation.docc/\($0)" }
        for document in documents {
            let markdown = try String(contentsOf: Self.root.appendingPathComponent(document), encoding: .utf8)
            guard !Self.codeBlocks(markdown).isEmpty else { continue }
            #expect(Self.documents.contains { $0.document == document }, "\(document) has Swift code but no snippet")
        }
    }

    /// README.md, the documents of docs/ and the DocC articles.
    static func linkedDocuments() throws -> [String] {
        let docs = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("docs").path)
        let articles = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("Sources/Chronicle/Documentation.docc").path)
        return ["README.md", "CHANGELOG.md"] + docs.filter { $0.hasSuffix(".md") }.map { "docs/\($0)" }
            + articles.filter { $0.hasSuffix(".md") }.map { "Sources/Chronicle/Documentation.docc/\($0)" }
    }

    /// The targets of a Markdown text's inline links, `[text](target)`, outside code blocks and spans.
    static func linkTargets(_ markdown: String) -> [String] {
        var targets: [String] = []
        var inBlock = false
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.trimmingCharacters(in: .whitespaces).hasPrefix("```") {
                inBlock.toggle()
                continue
            }
            guard !inBlock else { continue }
            // Code spans may hold brackets that are no link.
            let text = line.split(separator: "`", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 0 }.map(\.element).joined()
            var rest = Substring(text)
            while let open = rest.range(of: "](") {
                let after = rest[open.upperBound...]
                guard let close = after.firstIndex(of: ")") else { break }
                targets.append(String(after[..<close]))
                rest = after[close...]
            }
        }
        return targets
    }

    /// GitHub's anchor of a heading: lowercased, punctuation dropped, spaces as hyphens.
    static func anchor(_ heading: String) -> String {
        String(heading.lowercased().compactMap { character -> Character? in
            if character == " " { return "-" }
            return character.isLetter || character.isNumber || character == "-" || character == "_" ? character : nil
        })
    }

    /// Every relative link of the README, docs/ and the DocC articles names a file that exists,
    /// and every `#anchor` a heading of its document: the README points newcomers at docs/, and
    /// a moved section must not leave a dead link behind.
    @Test func everyRelativeLinkResolves() throws {
        for document in try Self.linkedDocuments() {
            let url = Self.root.appendingPathComponent(document)
            let markdown = try String(contentsOf: url, encoding: .utf8)
            for target in Self.linkTargets(markdown) where !target.contains("://") && !target.hasPrefix("mailto:") && !target.hasPrefix("doc:") {
                let parts = target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
                let file = parts[0].isEmpty ? url : url.deletingLastPathComponent().appendingPathComponent(parts[0])
                #expect(FileManager.default.fileExists(atPath: file.path), "\(document) links to \(target), which does not exist")
                guard parts.count == 2, file.pathExtension == "md", let linked = try? String(contentsOf: file, encoding: .utf8) else { continue }
                let anchors = linked.split(separator: "\n").filter { $0.hasPrefix("#") }.map { Self.anchor($0.drop { $0 == "#" }.trimmingCharacters(in: .whitespaces)) }
                #expect(anchors.contains(parts[1]), "\(document) links to \(target), whose heading does not exist")
            }
        }
    }

    /// Every file a document names (in backticks: `Sources/…`, `Tests/…`, `scripts/…`, …) exists,
    /// at the root or in the Tools package, and every test suite it names (`…Tests`) is a suite
    /// or a test target: the documents drift when code moves, and this notices.
    @Test func everyFileAndSuiteADocumentNamesExists() throws {
        let documents = ["README.md"] + (try FileManager.default.contentsOfDirectory(atPath: Self.root.appendingPathComponent("docs").path))
            .filter { $0.hasSuffix(".md") }.map { "docs/" + $0 }
        let file = try Regex(#"`((?:Sources|Tests|Tools|scripts|Benchmarks|Snippets|docs|api|\.ci)/[A-Za-z0-9_./+-]+\.(?:swift|sh|md|json|py|txt))`"#)
        let suite = try Regex(#"`([A-Z][A-Za-z]+Tests)(?:\.[a-zA-Z]+)?`"#)
        var suites = Set<String>()
        for directory in ["Tests", "Tools/Tests"] {
            let base = Self.root.appendingPathComponent(directory)
            let files = FileManager.default.enumerator(at: base, includingPropertiesForKeys: nil)?.compactMap { $0 as? URL } ?? []
            for url in files {
                if url.hasDirectoryPath { suites.insert(url.lastPathComponent) }
                guard url.pathExtension == "swift", let text = try? String(contentsOf: url, encoding: .utf8) else { continue }
                for match in text.matches(of: try Regex(#"(?:struct|extension|class|enum) ([A-Z][A-Za-z]+Tests)\b"#)) {
                    if let name = match.output[1].substring { suites.insert(String(name)) }
                }
            }
        }
        var checked = 0
        for document in documents {
            let text = try String(contentsOf: Self.root.appendingPathComponent(document), encoding: .utf8)
            for match in text.matches(of: file) {
                guard let path = match.output[1].substring.map(String.init) else { continue }
                checked += 1
                let exists = [path, "Tools/" + path].contains { FileManager.default.fileExists(atPath: Self.root.appendingPathComponent($0).path) }
                #expect(exists, "\(document) names \(path), which does not exist")
            }
            for match in text.matches(of: suite) {
                guard let name = match.output[1].substring.map(String.init) else { continue }
                let known = suites.contains(name)
                #expect(known, "\(document) names the test suite \(name), which does not exist")
            }
        }
        #expect(checked > 10, "found only \(checked) file names in the documents: the pattern missed them")
    }

    /// The README stays a ten-minute read: what a newcomer needs, the rest in docs/.
    /// FORMAT.md's appendix lists every refusal the document states with the tests that prove
    /// it: each test it names exists, as a `@Test` function in a file that declares its suite
    /// (the library's tests here, the tool's, the server's and the hub's in `Tools/Tests`).
    @Test func everyRefusalOfTheFormatHasATest() throws {
        let format = try String(contentsOf: Self.root.appendingPathComponent("docs/FORMAT.md"), encoding: .utf8)
        let appendix = try #require(format.range(of: "## Appendix A.").map { format[$0.lowerBound...] }, "FORMAT.md has no appendix of refusals")
        let rows = appendix.split(separator: "\n").filter { $0.hasPrefix("| ") && !$0.hasPrefix("| §") }
        #expect(rows.count >= 40, "the appendix lists \(rows.count) refusals")
        var sources: [String] = []
        for folder in ["Tests", "Tools/Tests"] {
            let files = FileManager.default.enumerator(at: Self.root.appendingPathComponent(folder), includingPropertiesForKeys: nil)?
                .compactMap { $0 as? URL } ?? []
            for file in files where file.pathExtension == "swift" { sources.append(try String(contentsOf: file, encoding: .utf8)) }
        }
        #expect(!sources.isEmpty)
        for row in rows {
            let cells = row.split(separator: "|", omittingEmptySubsequences: false)
            let tests = try #require(cells.dropLast().last, "a row without a tests column: \(row)")
            let names = tests.split(separator: "`").enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) }
            #expect(!names.isEmpty, "a refusal without a test: \(row)")
            for name in names {
                let parts = name.split(separator: ".")
                guard parts.count == 2 else {
                    Issue.record("not Suite.function: \(name)")
                    continue
                }
                let (suite, function) = (String(parts[0]), String(parts[1]))
                let found = sources.contains { source in
                    guard source.contains("struct \(suite)") || source.contains("extension \(suite)"),
                        let at = source.range(of: "func \(function)(")
                    else { return false }
                    let start = source.index(at.lowerBound, offsetBy: -300, limitedBy: source.startIndex) ?? source.startIndex
                    return source[start..<at.lowerBound].contains("@Test")
                }
                #expect(found, "FORMAT.md's appendix names \(name), which is no test")
            }
        }
    }

    /// The library's version, the CHANGELOG's newest section and the version the README tells
    /// an app to depend on are one.
    @Test func theVersionIsTheSameEverywhere() throws {
        let readme = try String(contentsOf: Self.root.appendingPathComponent("README.md"), encoding: .utf8)
        let changelog = try String(contentsOf: Self.root.appendingPathComponent("CHANGELOG.md"), encoding: .utf8)
        let wanted = readme.components(separatedBy: "chronicle.git\", from: \"").dropFirst().map { $0.prefix { $0 != "\"" } }
        #expect(!wanted.isEmpty && wanted.allSatisfy { $0 == chronicleVersion }, "README asks for \(wanted), the library is \(chronicleVersion)")
        let newest = changelog.split(separator: "\n").first { $0.hasPrefix("## ") }
        #expect(newest?.hasPrefix("## \(chronicleVersion)") == true, "CHANGELOG's newest section is \(newest ?? "none")")
    }

    @Test func theReadmeStaysShort() throws {
        let readme = try String(contentsOf: Self.root.appendingPathComponent("README.md"), encoding: .utf8)
        let words = readme.split { $0.isWhitespace }.count
        #expect(words < 3_200, "README.md has \(words) words; move detail to docs/")
    }
}
