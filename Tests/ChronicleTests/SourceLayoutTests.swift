import Foundation
import Testing

/// The shape of the sources, checked on the files themselves: the facade's folders depend on
/// one another in one direction only, and no source file outgrows a reader. (The modules' wall
/// is the compiler's and scripts/check-layers.sh's.)
struct SourceLayoutTests {
    static let root = DocumentationTests.root

    /// The Swift files under `directory`, by path relative to the package root.
    static func swiftFiles(under directory: String) throws -> [String] {
        let base = root.appendingPathComponent(directory)
        guard let walker = FileManager.default.enumerator(atPath: base.path) else { return [] }
        return walker.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") }.map { "\(directory)/\($0)" }
    }

    static func read(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    /// Folder A uses folder B when a file of A names a type declared in B (comments aside). A
    /// loop (A uses B and B uses A) is two topics that cannot be read apart.
    @Test func theFacadesFoldersDependOneWay() throws {
        let facade = "Sources/Chronicle"
        let files = try Self.swiftFiles(under: facade)
        func folder(_ path: String) -> String { path.dropFirst(facade.count + 1).split(separator: "/").first.map(String.init) ?? "" }
        let declaration = try Regex(
            #"(?m)^(?:public |package |internal |private |fileprivate )?(?:final )?(?:actor|class|struct|enum|protocol|typealias)\s+(\w+)"#)
        var owner: [String: String] = [:]
        var code: [String: String] = [:]
        for file in files {
            let text = try Self.read(file)
            code[file] = text.split(separator: "\n", omittingEmptySubsequences: false)
                .map { line in line.firstRange(of: "//").map { String(line[..<$0.lowerBound]) } ?? String(line) }
                .joined(separator: "\n")
            for match in text.matches(of: declaration) {
                if let name = match.output[1].substring { owner[String(name)] = folder(file) }
            }
        }
        var uses: [String: [String: String]] = [:]  // folder → used folder → an example
        for (file, text) in code {
            let words = Set(text.split { !$0.isLetter && !$0.isNumber && $0 != "_" }.map(String.init))
            for word in words {
                guard let other = owner[word], other != folder(file) else { continue }
                uses[folder(file), default: [:]][other] = "\(file) names \(word)"
            }
        }
        for (a, used) in uses {
            for (b, example) in used where a < b {
                if let back = uses[b]?[a] {
                    Issue.record("the folders \(a) and \(b) use each other: \(example); \(back)")
                }
            }
        }
    }

    /// One way through the store: the facade's public operations, whatever their topic, are in
    /// `Store/`; the other folders hold the types it uses or the types that use it.
    @Test func everyExtensionOfStoreIsInTheStoreFolder() throws {
        let elsewhere = try Self.swiftFiles(under: "Sources/Chronicle").filter { file in
            try !file.hasPrefix("Sources/Chronicle/Store/") && Self.read(file).contains("\nextension Store ")
        }
        #expect(elsewhere.isEmpty, "\(elsewhere)")
    }

    /// No source file of the library or the tools over 450 lines.
    @Test func noSourceFileIsOver450Lines() throws {
        var long: [String] = []
        for directory in ["Sources", "Tools/Sources"] {
            for file in try Self.swiftFiles(under: directory) {
                let lines = try Self.read(file).split(separator: "\n", omittingEmptySubsequences: false).count
                if lines > 450 { long.append("\(file): \(lines) lines") }
            }
        }
        #expect(long.isEmpty, "\(long)")
    }

    /// No function of the library or the tools over 90 lines (a reader holds about 80).
    @Test func noFunctionIsOver90Lines() throws {
        let start = try Regex(#"^\s*(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|package|private|fileprivate|internal|static|override|mutating|nonisolated|final|convenience|required)\s+)*(?:func|init)[\s(<]"#)
        let literal = try Regex(#""(?:[^"\\]|\\.)*""#)
        var long: [String] = []
        for directory in ["Sources", "Tools/Sources"] {
            for file in try Self.swiftFiles(under: directory) {
                let lines = try Self.read(file).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
                for (index, line) in lines.enumerated() where line.firstMatch(of: start) != nil {
                    var depth = 0
                    var opened = false
                    for end in index..<lines.count {
                        let code = lines[end].replacing(literal, with: "\"\"")
                        depth += code.filter { $0 == "{" }.count - code.filter { $0 == "}" }.count
                        opened = opened || code.contains("{")
                        if opened, depth <= 0 {
                            if end - index + 1 > 90 { long.append("\(file):\(index + 1): \(end - index + 1) lines") }
                            break
                        }
                    }
                }
            }
        }
        #expect(long.isEmpty, "\(long)")
    }

    /// A type's declaration and extensions, summed over its module: no type spans more than 800
    /// lines, a few more than a reader holds in mind at once. Counted from a declaration at the
    /// file's top level to its closing brace.
    ///
    /// `Store`, the public facade, is the one exception, and only for its DocC: its code (lines
    /// that are neither comments nor blank) stays under 800 like any type's, the work behind it
    /// lives in parts (`ValueMigration`, `LogCopy`, `StoreSalvage`, `KeysByName` for the tools), and
    /// its whole span, the reference an app developer reads on each declaration, may not grow.
    /// Moving public API off `Store` to meet the count would cost what `store.` completion finds.
    @Test func noTypeSpansOver800Lines() throws {
        let declaration = try Regex(#"^(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|package|private|fileprivate|internal|final)\s+)*(?:class|struct|enum|actor|extension)\s+([A-Za-z_]\w*)"#)
        let allowed = ["Chronicle.Store": 1_400]
        var spans: [String: Int] = [:]
        var storeCode = 0
        for directory in ["Sources", "Tools/Sources", "CLI/Sources"] {
            for file in try Self.swiftFiles(under: directory) {
                let module = file.dropFirst(directory.count + 1).split(separator: "/").first.map(String.init) ?? ""
                let lines = try Self.read(file).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
                var index = 0
                while index < lines.count {
                    guard let match = lines[index].firstMatch(of: declaration), let name = match.output[1].substring else {
                        index += 1
                        continue
                    }
                    var end = index
                    if !(lines[index].contains("{") && lines[index].hasSuffix("}")) {
                        while end < lines.count, lines[end] != "}" { end += 1 }
                    }
                    spans["\(module).\(name)", default: 0] += end - index + 1
                    if module == "Chronicle", name == "Store" {
                        storeCode += lines[index...min(end, lines.count - 1)].filter { line in
                            let text = line.trimmingCharacters(in: .whitespaces)
                            return !text.isEmpty && !text.hasPrefix("//")
                        }.count
                    }
                    index = end + 1
                }
            }
        }
        let long = spans.filter { $0.value > (allowed[$0.key] ?? 800) }.map { "\($0.key): \($0.value) lines" }
        #expect(long.isEmpty, "split these types (a part that owns its state, as KeyEncryptionKeys did for Keyring): \(long)")
        #expect(storeCode > 0 && storeCode <= 800, "Store's code (comments and blank lines aside): \(storeCode) lines; move the work behind an operation into a part")
        #expect(spans["Chronicle.Keyring"].map { $0 <= 800 } ?? false, "Keyring: \(spans["Chronicle.Keyring"] ?? 0) lines")
    }
}
