import Foundation
import ChronicleLMDB
import Testing

/// A fresh directory for one test, removed afterwards.
func withTemporaryDirectory<R>(_ body: (String) throws -> R) throws -> R {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("lmdb-tests-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: path) }
    return try body(path)
}

struct EnvironmentTests {
    @Test func putGetDeleteRoundTrip() throws {
        try withTemporaryDirectory { path in
            let env = try Environment(path: path)
            let db = try env.openDatabase(named: "kv")
            try env.write { txn in
                try txn.put(db, key: Array("a".utf8), value: [1, 2, 3])
                try txn.put(db, key: Array("b".utf8), value: [])
            }
            #expect(try env.read { try $0.get(db, key: Array("a".utf8)) } == [1, 2, 3])
            #expect(try env.read { try $0.get(db, key: Array("b".utf8)) } == [])
            #expect(try env.read { try $0.get(db, key: Array("c".utf8)) } == nil)
            #expect(try env.write { try $0.delete(db, key: Array("a".utf8)) })
            #expect(try env.write { try $0.delete(db, key: Array("a".utf8)) } == false)
            #expect(try env.read { try $0.count(db) } == 1)
        }
    }

    @Test func insertRefusesExistingKeysAndAppendRequiresOrder() throws {
        try withTemporaryDirectory { path in
            let env = try Environment(path: path)
            let db = try env.openDatabase(named: "kv")
            #expect(try env.write { try $0.insert(db, key: [1], value: [1]) })
            #expect(try env.write { try $0.insert(db, key: [1], value: [2]) } == false)
            #expect(try env.read { try $0.get(db, key: [1]) } == [1])
            try env.write { try $0.put(db, key: [5], value: [], flags: .append) }
            #expect(throws: LMDBError.keyExists) {
                try env.write { try $0.put(db, key: [3], value: [], flags: .append) }
            }
        }
    }

    /// Bytes lent in place are the bytes an array would hold: a sequence big-endian (so LMDB sorts
    /// it like the number, and `.append` accepts it after a smaller one), a name as its UTF-8, a
    /// prefix followed by a big-endian integer (a dot).
    @Test func bytesLentInPlaceAreTheArraysBytes() throws {
        try withTemporaryDirectory { path in
            let env = try Environment(path: path)
            let db = try env.openDatabase(named: "kv")
            try env.write { txn in
                try txn.put(db, key: .bigEndian(255), value: .utf8("naïve"), flags: .append)
                try txn.put(db, key: .bigEndian(256), value: .array([7]), flags: .append)
                #expect(try txn.insert(db, key: .bigEndian(256), value: .bigEndian(1)) == false)
                #expect(try txn.insert(db, key: .utf8("k"), value: .bigEndian(0x0102_0304_0506_0708)))
                try txn.put(db, key: .bigEndianWords(9, 0x0A0B, 3), value: .bigEndian(4))
            }
            #expect(try env.read { try $0.get(db, key: [0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0x0A, 0x0B, 0, 0, 0, 0, 0, 0, 0, 3]) } == [0, 0, 0, 0, 0, 0, 0, 4])
            #expect(try env.read { try $0.get(db, key: [0, 0, 0, 0, 0, 0, 0, 255]) } == Array("naïve".utf8))
            #expect(try env.read { try $0.get(db, key: [0, 0, 0, 0, 0, 0, 1, 0]) } == [7])
            #expect(try env.read { try $0.get(db, key: Array("k".utf8)) } == [1, 2, 3, 4, 5, 6, 7, 8])
            #expect(try env.read { txn in try txn.withValue(db, key: .utf8("k")) { _ in } })
            #expect(try env.read { txn in try txn.withValue(db, key: .bigEndian(3)) { _ in } } == false)
        }
    }

    @Test func abortedWriteLeavesNothing() throws {
        struct Stop: Error {}
        try withTemporaryDirectory { path in
            let env = try Environment(path: path)
            let db = try env.openDatabase(named: "kv")
            #expect(throws: Stop.self) {
                try env.write { txn in
                    try txn.put(db, key: [1], value: [1])
                    throw Stop()
                }
            }
            #expect(try env.read { try $0.count(db) } == 0)
        }
    }

    @Test func scanVisitsInOrderFromAStartKey() throws {
        try withTemporaryDirectory { path in
            let env = try Environment(path: path)
            let db = try env.openDatabase(named: "kv")
            try env.write { txn in
                for i: UInt8 in [9, 3, 7, 1, 5] { try txn.put(db, key: [i], value: [i * 2]) }
            }
            var seen: [UInt8] = []
            try env.read { txn in
                try txn.scan(db, from: [4]) { key, value in
                    #expect(value == [key[0] * 2])
                    seen.append(key[0])
                    return key[0] < 7
                }
            }
            #expect(seen == [5, 7])
            #expect(try env.read { try $0.last(db) }?.key == [9])
        }
    }

    @Test func mapGrowsWhenFull() throws {
        try withTemporaryDirectory { path in
            var options = EnvironmentOptions()
            options.mapSize = 128 * 1024
            let env = try Environment(path: path, options: options)
            let db = try env.openDatabase(named: "kv")
            let value = [UInt8](repeating: 7, count: 64 * 1024)
            for i in 0..<64 {
                try env.write { try $0.put(db, key: UInt32(i).bigEndianBytesForTest, value: value) }
            }
            #expect(env.mapSize > 4 * 1024 * 1024)
            #expect(try env.read { try $0.count(db) } == 64)
            #expect(try env.read { try $0.get(db, key: UInt32(63).bigEndianBytesForTest) } == value)
        }
    }

    @Test func lastTransactionIDAdvancesOnCommit() throws {
        try withTemporaryDirectory { path in
            let env = try Environment(path: path)
            let db = try env.openDatabase(named: "kv")
            let before = env.lastTransactionID
            try env.write { try $0.put(db, key: [1], value: [1]) }
            #expect(env.lastTransactionID == before + 1)
        }
    }

    @Test func concurrentReadersAndWriters() async throws {
        try await withTemporaryDirectoryAsync { path in
            let env = try Environment(path: path)
            let db = try env.openDatabase(named: "kv")
            try await withThrowingTaskGroup(of: Void.self) { group in
                for writer in 0..<4 {
                    group.addTask {
                        for i in 0..<50 {
                            try env.write { try $0.put(db, key: [UInt8(writer), UInt8(i)], value: [UInt8(i)]) }
                        }
                    }
                }
                for _ in 0..<4 {
                    group.addTask {
                        for _ in 0..<200 { _ = try env.read { try $0.count(db) } }
                    }
                }
                try await group.waitForAll()
            }
            #expect(try env.read { try $0.count(db) } == 200)
        }
    }

    @Test func errorsCarryLMDBMessages() {
        #expect(LMDBError.mapFull.message.contains("MDB_MAP_FULL"))
        #expect(LMDBError.notFound.description.contains("MDB_NOTFOUND"))
    }
}

func withTemporaryDirectoryAsync(_ body: (String) async throws -> Void) async throws {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("lmdb-tests-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: path) }
    try await body(path)
}

extension UInt32 {
    var bigEndianBytesForTest: [UInt8] { withUnsafeBytes(of: bigEndian) { Array($0) } }
}
