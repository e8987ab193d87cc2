import Chronicle
import Foundation
import Testing
import ToolsTestSupport

/// What the owner's tool sees after someone with the files and no key edited a member's store.
///
/// The edits are made by `Tools/Tests/Forger/forge_store.py`, written from docs/FORMAT.md alone
/// (py-lmdb and hashlib's BLAKE2b): an outside implementation, so these tests also check that
/// the document says enough to forge what it claims is caught. A control run proves the forger
/// hashes as the tool does (a store it re-chains without changing anything verifies).
struct ToolTamperEvidenceTests {
    static let value = Key<String>("tamper.value", default: "", sync: .manual)

    /// A member store written three times (sequences: chain-key record 1, events 2…4), closed,
    /// edited by the forger with each of `edits`; `body` gets the directory, the passphrase file
    /// and the data file as the forger left it.
    func withForgedMemberStore(_ edits: [[String]], _ body: (URL, URL, Data) async throws -> Void) async throws {
        let directories = Directories()
        let directory = directories.make()
        let passphraseFile = directories.make().appendingPathComponent("passphrase")
        try FileManager.default.createDirectory(at: passphraseFile.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data("owner".utf8).write(to: passphraseFile)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: passphraseFile.path)
        do {
            let store = try Store(directory: directory, configuration: passphraseConfiguration("owner"))
            for value in ["a", "b", "c"] { try store.set(value, for: Self.value) }
        }
        for edit in edits { try forge(directory, edit) }
        try await body(directory, passphraseFile, try Data(contentsOf: directory.appendingPathComponent("data.mdb")))
    }

    /// `chronicle verify` with the key exits 1 naming `damage`, twice (nothing the first run did
    /// made the second pass), and the data file is as the forger left it.
    func expectVerifyFails(_ directory: URL, _ passphraseFile: URL, naming damage: String, before: Data) async throws {
        for _ in 0..<2 {
            let verify = try await runChronicle(["verify", "--store", directory.path, "--passphrase-file", passphraseFile.path])
            #expect(verify.status == 1, "verify: \(verify.status) \(verify.stdout) \(verify.stderr)")
            #expect(verify.stderr.contains(damage), "verify did not name \(damage): \(verify.stderr)")
        }
        #expect(try Data(contentsOf: directory.appendingPathComponent("data.mdb")) == before, "a refused store was written to")
    }

    /// The review's hole: the newest record cut and `meta`'s `chain.key` deleted. `chronicle log`
    /// with the key used to re-key the chain and sign the cut head, after which `verify` passed.
    /// Now every command refuses the store, with the key or without, and writes nothing.
    @Test func aCutTailWithTheChainKeyDeletedIsRefused() async throws {
        try await withForgedMemberStore([["cut-tail"], ["forget", "chain.key"]]) { directory, passphraseFile, before in
            let log = try await runChronicle(["log", "--store", directory.path, "--passphrase-file", passphraseFile.path])
            #expect(log.status == 2 && log.stderr.contains("chain.key"), "log: \(log.status) \(log.stderr)")
            let keyless = try await runChronicle(["log", "--store", directory.path])
            #expect(keyless.status == 2 && keyless.stderr.contains("chain.key"), "log without the key: \(keyless.status) \(keyless.stderr)")
            try await expectVerifyFails(directory, passphraseFile, naming: "chain.key", before: before)
            let json = try await runChronicle(["verify", "--json", "--store", directory.path])
            #expect(json.status == 1 && json.stdout.contains("\"sound\":false"), "verify --json: \(json.stdout)")
        }
    }

    /// The cut with `head.mac` and `chain.inlog` deleted: read as a store keyed by format 1, whose
    /// MAC comes with its next write, the cut verified and the next `set` signed it. Refused.
    @Test func aCutTailMadeToLookLikeFormatOneIsRefused() async throws {
        try await withForgedMemberStore([["cut-tail"], ["forget", "head.mac", "chain.inlog"]]) { directory, passphraseFile, before in
            let set = try await runChronicle(["set", "tamper.other", "x", "--store", directory.path, "--passphrase-file", passphraseFile.path])
            #expect(set.status == 2 && set.stderr.contains("chain.inlog"), "set: \(set.status) \(set.stderr)")
            try await expectVerifyFails(directory, passphraseFile, naming: "chain.inlog", before: before)
        }
    }

    /// The same cut with `meta` untouched: the head MAC does not verify.
    @Test func aCutTailIsRefused() async throws {
        try await withForgedMemberStore([["cut-tail"]]) { directory, passphraseFile, before in
            try await expectVerifyFails(directory, passphraseFile, naming: "head.mac", before: before)
        }
    }

    /// `dk.active` deleted (what a forger who wants the next opening to mint a key leaves), and
    /// every key record deleted (the chain key's record among them).
    @Test(arguments: [(["dk.active"], "dk.active"), (["dk.active", "dk/", "dk.travel/"], "\"dk/\"")])
    func deletedKeyRecordsAreRefused(entries: [String], named: String) async throws {
        try await withForgedMemberStore([["forget"] + entries]) { directory, passphraseFile, before in
            let set = try await runChronicle(["set", "tamper.value", "d", "--store", directory.path, "--passphrase-file", passphraseFile.path])
            #expect(set.status == 2 && set.stderr.contains(named), "set: \(set.status) \(set.stderr)")
            try await expectVerifyFails(directory, passphraseFile, naming: named, before: before)
        }
    }

    /// A kept record replaced by a gap made without the key (its MAC the unkeyed checksum): the
    /// gap's MAC does not verify, and with `chain.key` deleted as well the store is refused.
    @Test func aGapForgedWithoutTheKeyIsFound() async throws {
        try await withForgedMemberStore([["forge-gap", "3"]]) { directory, passphraseFile, before in
            try await expectVerifyFails(directory, passphraseFile, naming: "sequence: 3", before: before)
        }
        try await withForgedMemberStore([["forge-gap", "3"], ["forget", "chain.key"]]) { directory, passphraseFile, before in
            try await expectVerifyFails(directory, passphraseFile, naming: "chain.key", before: before)
        }
    }

    /// Every authenticator stripped (the stored hashes kept: the forger cannot make keyed ones):
    /// the first stripped event breaks the keyed chain.
    @Test func strippedAuthenticatorsAreFound() async throws {
        try await withForgedMemberStore([["strip-authenticators"]]) { directory, passphraseFile, before in
            try await expectVerifyFails(directory, passphraseFile, naming: "sequence: 2", before: before)
        }
    }

    /// The whole log re-chained without the key (chain-key record dropped, every hash unkeyed,
    /// `chain.key`, `chain.inlog` and `head.mac` deleted), authenticators stripped or not: the
    /// member's opening refuses it instead of keying it afresh.
    @Test(arguments: [false, true])
    func aRechainedLogIsRefused(stripped: Bool) async throws {
        let edits = (stripped ? [["strip-authenticators"]] : []) + [["rechain"]]
        try await withForgedMemberStore(edits) { directory, passphraseFile, before in
            let log = try await runChronicle(["log", "--store", directory.path, "--passphrase-file", passphraseFile.path])
            #expect(log.status == 2 && log.stderr.contains("chain.key"), "log: \(log.status) \(log.stderr)")
            try await expectVerifyFails(directory, passphraseFile, naming: "chain.key", before: before)
        }
    }

    /// The explicit repair over the tool: `chronicle salvage` copies what verifies of a refused
    /// store into a new directory, writing nothing to the damaged one; the copy verifies and works.
    @Test func aRefusedStoreIsSalvaged() async throws {
        try await withForgedMemberStore([["cut-tail"], ["forget", "chain.key"]]) { directory, passphraseFile, before in
            let target = temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: target) }
            let salvage = try await runChronicle(["salvage", "--store", directory.path, "--into", target.path, "--passphrase-file", passphraseFile.path])
            #expect(salvage.status == 0, "salvage: \(salvage.status) \(salvage.stderr)")
            #expect(salvage.stderr.contains("chain.key") && salvage.stdout.contains("through sequence 3"), "\(salvage.stdout) \(salvage.stderr)")
            #expect(try Data(contentsOf: directory.appendingPathComponent("data.mdb")) == before, "the salvage wrote to the damaged store")
            let verify = try await runChronicle(["verify", "--store", target.path, "--passphrase-file", passphraseFile.path])
            #expect(verify.status == 0, "the salvaged copy does not verify: \(verify.stderr)")
            let get = try await runChronicle(["get", "tamper.value", "--store", target.path, "--passphrase-file", passphraseFile.path])
            #expect(get.stdout.contains("b"), "\(get.stdout)")
        }
    }

    /// Control: the forger re-chains a plain store (no key, nothing changed) exactly as the tool
    /// hashes, so the refusals above are the tool's, not a broken forger's.
    @Test func theForgerHashesAsTheDocumentSays() async throws {
        let directories = Directories()
        let directory = directories.make()
        do {
            let store = try Store(directory: directory)
            for value in ["a", "b", "c"] { try store.set(value, for: Self.value) }
        }
        try forge(directory, ["rechain"])
        let verify = try await runChronicle(["verify", "--store", directory.path])
        #expect(verify.status == 0, "a plain store the forger re-chained does not verify: \(verify.stderr)")
    }
}

/// Runs the forger (Tools/Tests/Forger/forge_store.py) on a closed store.
func forge(_ directory: URL, _ arguments: [String]) throws {
    let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Forger/forge_store.py")
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
    process.arguments = [script.path, directory.path] + arguments
    let errors = Pipe()
    process.standardError = errors
    try process.run()
    let message = errors.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    try #require(process.terminationStatus == 0, "forge_store.py \(arguments): \(String(decoding: message, as: UTF8.self))")
}
