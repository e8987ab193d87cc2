@_spi(Tools) @testable import Chronicle
@testable import ChronicleFormat
@testable import ChronicleLog
import ChronicleTesting
import Foundation
import Testing

/// What is left of purged revisions in a store's files, measured by scanning `data.mdb` for
/// their bytes: plain values as written, sealed ones as the log held their ciphertext.
struct PurgedBytesTests {
    /// Occurrences of each needle in the file.
    func found(_ needles: [[UInt8]], in directory: URL) throws -> Int {
        let bytes = [UInt8](try Data(contentsOf: directory.appendingPathComponent("data.mdb")))
        return needles.filter { needle in
            guard let first = needle.first, needle.count <= bytes.count else { return false }
            var index = 0
            while index <= bytes.count - needle.count {
                if bytes[index] == first, Array(bytes[index..<(index + needle.count)]) == needle { return true }
                index += 1
            }
            return false
        }.count
    }

    /// Five plain and five sealed revisions of two keys, each a recognizable value, then the
    /// newest of each; returns the purged plain values and the purged sealed payloads.
    func writeRevisions(_ store: Store) throws -> (plain: [[UInt8]], sealed: [[UInt8]]) {
        let note = Key<String>("purge.note", default: "", sync: .manual, retention: .forever)
        let token = SecretKey<String?>("purge.token", sync: .manual, retention: .forever)
        var plain: [[UInt8]] = []
        for index in 1...5 {
            let value = "plain-revision-\(index)-" + UUID().uuidString
            plain.append(Array(value.utf8))
            try store.set(value, for: note)
            try store.set("sealed-revision-\(index)-" + UUID().uuidString, for: token)
        }
        let sealed = try EventRange(decoding: Array(try store.exportRange(after: 0))).events.filter { $0.key == token.name }.map(\.payload)
        #expect(sealed.count == 5)
        try store.set("the newest", for: note)
        try store.set("the newest", for: token)
        #expect(try store.purgeHistory(of: note) == 5)
        #expect(try store.purgeHistory(of: token) == 5)
        return (plain, sealed)
    }

    /// After `purgeHistory`, the purged revisions' bytes stay in freed pages until later writes
    /// reuse them; reclaiming the file (a compacting copy that keeps every sequence) removes
    /// them, with the store's log, readers' places and identity unchanged.
    @Test func purgedRevisionsLeaveTheFileWhenItIsReclaimed() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let (plain, sealed, head) = try { () throws -> ([[UInt8]], [[UInt8]], UInt64) in
            let store = try Store(directory: directory, configuration: passphraseConfiguration("purge"))
            let (plain, sealed) = try writeRevisions(store)
            return (plain, sealed, try store.replicaInfo().head)
        }()
        let before = (plain: try found(plain, in: directory), sealed: try found(sealed, in: directory))
        _ = try Store.reclaimSpace(directory: directory)
        #expect(try found(plain, in: directory) == 0, "\(before.plain) of 5 purged plain revisions in the file before, still there after")
        #expect(try found(sealed, in: directory) == 0, "\(before.sealed) of 5 purged sealed revisions in the file before, still there after")
        let store = try Store(directory: directory, configuration: passphraseConfiguration("purge"))
        #expect(try store.replicaInfo().head == head, "reclaiming renumbered the log")
        #expect(store[Key<String>("purge.note", default: "", sync: .manual)] == "the newest")
        #expect(try store.verify().isSound)
    }

    /// A purge marks the store; the next opening by a process that finds no other process
    /// attached rewrites the file (an app needs no tool and no renumbering). While another
    /// process has the store open, an opening leaves the file and the mark as they are.
    @Test func purgedRevisionsLeaveTheFileAtAnOpeningNoOtherProcessShares() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.resolvingSymlinksInPath().path
        let (plain, sealed, head) = try await { () async throws -> ([[UInt8]], [[UInt8]], UInt64) in
            let store = try Store(directory: directory, configuration: passphraseConfiguration("purge"))
            let (plain, sealed) = try writeRevisions(store)
            #expect(PurgedBytes.isMarked(path: path))
            // Another process opens the store while this one has it open: nothing is rewritten.
            let child = try await runChild(["get", directory.path, "purge.count"], environment: ["CHRONICLE_PASSPHRASE": "purge"])
            #expect(child.status == 0, "\(child.stderr)")
            #expect(try found(plain, in: directory) == 5, "the file was rewritten while another process had it open")
            #expect(PurgedBytes.isMarked(path: path))
            return (plain, sealed, try store.replicaInfo().head)
        }()
        // The next opening here finds no other process attached.
        let store = try Store(directory: directory, configuration: passphraseConfiguration("purge"))
        #expect(try found(plain, in: directory) == 0, "purged plain revisions are still in the file")
        #expect(try found(sealed, in: directory) == 0, "purged sealed revisions are still in the file")
        #expect(!PurgedBytes.isMarked(path: path))
        #expect(try store.replicaInfo().head == head, "the rewrite renumbered the log")
        #expect(store[Key<String>("purge.note", default: "", sync: .manual)] == "the newest")
        #expect(try store.verify().isSound)
    }
}
