@testable import Chronicle
@testable import ChronicleLog
import Dispatch
import ChronicleTesting
import Foundation
import ChronicleLMDB
import Synchronization
import Testing

struct CorruptionTests {
    /// Flips one bit in every occurrence of `needle` in the store's data file (LMDB's copy-on-write
    /// can leave stale copies of a page; the live one is among them).
    func flipByte(after needle: [UInt8], in directory: URL) throws {
        let file = directory.appendingPathComponent("data.mdb")
        let bytes = [UInt8](try Data(contentsOf: file))
        var altered = bytes
        let hits = (0...(bytes.count - needle.count)).filter { bytes[$0..<$0 + needle.count].elementsEqual(needle) }
        try #require(!hits.isEmpty)
        for index in hits { altered[index + needle.count - 1] ^= 0x01 }
        let handle = try FileHandle(forWritingTo: file)  // in place: the file keeps its inode
        try handle.write(contentsOf: Data(altered))
        try handle.close()
    }

    @Test func alteredRecordIsReportedWithItsSequence() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let marker = "MARKER-7f3a9c"
        let key = Key<String>("victim", default: "")
        do {
            let store = try Store(directory: directory)
            try store.set(1, for: .launches)
            try store.set(marker, for: key)  // sequence 2
            try store.set(3, for: .launches)
        }
        // In the log record the payload follows the key name and its 4-byte length.
        try flipByte(after: Array("victim".utf8) + UInt32(marker.utf8.count).bigEndianBytes + Array(marker.utf8), in: directory)

        let store = try Store(directory: directory)
        let report = try store.verify()
        #expect(!report.isSound)
        #expect(report.firstBadSequence == 2)

        #expect {
            try store.rebuildViews()
        } throws: { error in
            guard case ChronicleError.corruptRecord(2, _) = error else { return false }
            return true
        }
        #expect(store[key] == marker)  // nothing was applied by the failed rebuild
    }

    @Test func undecodableRecordIsReportedNotCrashed() async throws {
        try await withTemporaryStore { store, _ async throws in
            try store.set(.dark, for: .theme)
            let eventLog = try store.eventLog
            // Write a record whose body does not decode, with a valid chain hash: decoding must fail by name.
            try eventLog.environment.write { txn in
                var head = try LogHead.read(txn, eventLog.dbs)
                head.sequence += 1
                let body: [UInt8] = [1, 2, 3]
                let hash = LogRecord.chainHash(previous: head.chain, sequence: head.sequence, kind: .event, body: body, key: nil)
                try txn.put(eventLog.dbs.events, key: head.sequence.bigEndianBytes, value: LogRecord(kind: .event, body: body, hash: hash).encoded())
                head.chain = hash
                try head.write(txn, eventLog.dbs, chainKey: nil)
            }
            let report = try store.verify()
            #expect(report.firstBadSequence == 2)
            #expect(throws: ChronicleError.self) { try store.rebuildViews() }
            #expect(throws: ChronicleError.self) { try store.logEntries() }
            #expect(store[.theme] == .dark)
        }
    }

    @Test func rebuiltViewsEqualTheViewsBefore() async throws {
        try await withTemporaryStore { store, _ async throws in
            for i in 0..<50 {
                store[Key<Int>("n.\(i % 7)", default: 0)] = i
                if i % 5 == 0 { try store.remove(Key<Int>("n.\(i % 3)", default: 0)) }
            }
            store[.profile] = Profile(name: "x", tags: [], scores: [:], nested: nil)
            let before = (0..<7).map { store[Key<Int>("n.\($0)", default: -1)] }
            try store.rebuildViews()
            let after = (0..<7).map { store[Key<Int>("n.\($0)", default: -1)] }
            #expect(before == after)
            #expect(store[.profile]?.name == "x")
            #expect(try store.history(of: Key<Int>("n.0", default: 0)).count > 5)
            #expect(try store.verify().isSound)
        }
    }
}

/// A corruption error says what is corrupt: a view entry of a named key, a named `meta`
/// entry; a system error carries its errno name.
struct ErrorModelTests {
    @Test func corruptionErrorsNameWhatIsCorrupt() throws {
        try withTemporaryStore { store, _ in
            try store.set(.dark, for: .theme)
            let eventLog = try store.eventLog
            try eventLog.environment.write { txn in
                try txn.put(eventLog.dbs.defaults, key: Array(Keys.theme.name.utf8), value: [0xEE, 1, 2])
            }
            #expect(throws: ChronicleError.corruptViewEntry(key: Keys.theme.name, reason: "view entry version 238 is not supported")) {
                try store.value(for: .theme)
            }
            try store.rebuildViews()
            #expect(try store.value(for: .theme) == .dark)
            try eventLog.environment.write { txn in try txn.put(eventLog.dbs.meta, key: MetaKey.sequence, value: [1, 2, 3]) }
            #expect {
                try store.set(.light, for: .theme)
            } throws: { error in
                guard case ChronicleError.corruptMeta(entry: "seq", _) = error else { return false }
                return true
            }
        }
    }

    @Test func aKeyIDOfTheWrongLengthInMetaIsCorruptMetaNotAnotherKey() throws {
        try withTemporaryStore { store, _ in
            try store.set(.dark, for: .theme)
            let eventLog = try store.eventLog
            try eventLog.environment.write { txn in try txn.put(eventLog.dbs.meta, key: MetaKey.chainKey, value: [1, 2, 3, 4, 5]) }
            #expect(throws: ChronicleError.corruptMeta(entry: "chain key", reason: "5 bytes, not 16")) {
                try store.set(.light, for: .theme)
            }
        }
    }

    @Test func systemErrorsCarryTheirErrnoName() {
        let error = ChronicleError.wrap(LMDBError.noSpace)
        #expect("\(error)".contains("ENOSPC"))
    }
}
