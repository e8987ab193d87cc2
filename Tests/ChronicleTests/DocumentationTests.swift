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
}
