import Foundation
import Testing

/// The `discussion` of every command is written as paragraphs: ArgumentParser wraps them to the
/// terminal's width, so a line break inside a paragraph shows as a ragged line in `--help`.
struct HelpTextTests {
    /// The discussions of the tool's commands, with the file each is in.
    func discussions() throws -> [(file: String, lines: [String])] {
        let tools = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        // Both tools: the everyday one (the CLI package) and chronicle-server.
        let roots = [tools.appendingPathComponent("Sources/chronicle-server"), tools.appendingPathComponent("../CLI/Sources").standardized]
        let files = roots.flatMap { root in
            FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil)?.compactMap { $0 as? URL }.filter { $0.pathExtension == "swift" } ?? []
        }
        var found: [(String, [String])] = []
        for file in files {
            let text = try String(contentsOf: file, encoding: .utf8)
            var rest = text[...]
            // A command's `discussion:` and the root's shared `discussion =`.
            while let start = rest.range(of: #"discussion(: | = )"""\n"#, options: .regularExpression) {
                guard let end = rest[start.upperBound...].range(of: "\"\"\"") else { break }
                found.append((file.lastPathComponent, rest[start.upperBound..<end.lowerBound].components(separatedBy: "\n")))
                rest = rest[end.upperBound...]
            }
        }
        return found
    }

    /// A line of a paragraph either continues (`\`), ends its paragraph (a blank line or the end
    /// follows), or introduces an indented example; indented lines (examples) are taken as they are.
    @Test func helpTextsFlowAsParagraphs() throws {
        let found = try discussions()
        #expect(found.count >= 15, "found \(found.count) discussions: the scan missed the commands")
        for (file, lines) in found {
            let indentation = lines.first { !$0.trimmingCharacters(in: .whitespaces).isEmpty }.map { $0.prefix { $0 == " " }.count } ?? 0
            for (index, line) in lines.enumerated() where !line.trimmingCharacters(in: .whitespaces).isEmpty {
                let indented = line.prefix { $0 == " " }.count > indentation
                guard !indented, !line.hasSuffix("\\"), index + 1 < lines.count else { continue }
                let next = lines[index + 1]
                let nextIsBlank = next.trimmingCharacters(in: .whitespaces).isEmpty
                let nextIsExample = next.prefix { $0 == " " }.count > indentation
                #expect(nextIsBlank || nextIsExample, "\(file): a line break inside a paragraph after \"\(line.trimmingCharacters(in: .whitespaces))\"")
            }
        }
    }
}
