@_spi(Wire) @testable import Chronicle
@testable import ChronicleHub
import ChronicleHTTP
import ChronicleTesting
import Foundation
import Subprocess
import SystemPackage
import Testing
import ToolsTestSupport

/// The hub's database restored from a `pg_dump` taken mid-way: what devices pushed after the
/// dump is pushed again by the devices that still hold it, whether the hub's head is below
/// where their last push left it or other devices' pushes moved it past. Against a real
/// PostgreSQL, with its own `pg_dump` and `pg_restore`.
@Suite(.serialized, .enabled(if: hasTestDatabase, "needs CHRONICLE_TEST_DATABASE: run scripts/test.sh"))
struct HubRestoreTests {
    static let early = Key<Int>("hub.restore.early", default: 0, sync: .manual)
    static let late = Key<Int>("hub.restore.late", default: 0, sync: .manual)
    static let after = Key<Int>("hub.restore.after", default: 0, sync: .manual)

    /// PostgreSQL's client program `name`, beside the test server's `pg_ctl`, or on the path.
    static func tool(_ name: String) -> Executable {
        if let pgCtl = ProcessInfo.processInfo.environment["CHRONICLE_TEST_PG_CTL"] {
            let path = URL(fileURLWithPath: pgCtl).deletingLastPathComponent().appendingPathComponent(name).path
            if FileManager.default.isExecutableFile(atPath: path) { return .path(FilePath(path)) }
        }
        return .name(name)
    }

    static func run(_ name: String, _ arguments: [String]) async throws {
        let result = try await Subprocess.run(tool(name), arguments: Arguments(arguments), output: .discarded, error: .string(limit: 1 << 20))
        #expect(result.terminationStatus == .exited(0), "\(name): \(result.standardError)")
    }

    /// `othersPushFirst`: after the restore, another device pushes before the writer syncs, so
    /// the hub's head passes where the writer's last push left it (under another chain hash).
    @Test(arguments: [false, true])
    func aRestoredHubGetsBackWhatDevicesPushedAfterTheDump(othersPushFirst: Bool) async throws {
        try await withEmptyDatabase { url in
            let directory = temporaryDirectory()
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let dump = directory.appendingPathComponent("hub.dump").path
            try await withTemporaryStores(3) { stores in
                let (writer, other, newcomer) = (stores[0], stores[1], stores[2])
                let tokens = try await withHub(nodes: 1, database: url) { hub in
                    let tenant = try await hub.tenant()
                    let tokens = [try await hub.token(tenant, "writer"), try await hub.token(tenant, "other"), try await hub.token(tenant, "newcomer")]
                    try writer.set(1, for: Self.early)
                    try await Replicator(store: writer, peers: [hub.peer(node: 0, token: tokens[0])]).sync()
                    try await Self.run("pg_dump", ["-Fc", "-f", dump, url])
                    try writer.set(2, for: Self.late)
                    try await Replicator(store: writer, peers: [hub.peer(node: 0, token: tokens[0])]).sync()
                    return tokens
                }
                // The nodes are stopped; the database goes back to the dump.
                try await Self.run("pg_restore", ["--clean", "--if-exists", "-d", url, dump])
                try await withHub(nodes: 1, database: url) { hub in
                    if othersPushFirst {
                        try other.set(3, for: Self.after)
                        try other.set(4, for: Key<Int>("hub.restore.more", default: 0, sync: .manual))
                        try await Replicator(store: other, peers: [hub.peer(node: 0, token: tokens[1])]).sync()
                    }
                    let report = try await Replicator(store: writer, peers: [hub.peer(node: 0, token: tokens[0])]).sync()
                    #expect(report.sent >= 1, "the writer pushed nothing again")
                    try await Replicator(store: newcomer, peers: [hub.peer(node: 0, token: tokens[2])]).sync()
                    #expect(newcomer[Self.early] == 1)
                    #expect(newcomer[Self.late] == 2, "what the writer pushed after the dump is back at the hub")
                    if othersPushFirst { #expect(newcomer[Self.after] == 3) }
                    // Pushed once more, it is not pushed a third time.
                    let again = try await Replicator(store: writer, peers: [hub.peer(node: 0, token: tokens[0])]).sync()
                    #expect(again.sent == 0, "sent \(again.sent) again")
                }
            }
        }
    }
    /// Restores the dump of `url` taken after `before` and undoes everything `after` did.
    static func dumped(_ url: String, in directory: URL, before: () async throws -> Void, after: () async throws -> Void) async throws {
        let dump = directory.appendingPathComponent("hub-\(UUID().uuidString).dump").path
        try await before()
        try await Self.run("pg_dump", ["-Fc", "-f", dump, url])
        try await after()
        try await Self.run("pg_restore", ["--clean", "--if-exists", "-d", url, dump])
    }

    /// After the restore another device pushes past where the writer's last push left the hub,
    /// and a trim deletes those rows before the writer syncs: the hub cannot show the writer a
    /// chain hash there, and still the writer learns that the hub lost its push.
    @Test func aRestoreHiddenByOtherDevicesTrimmedPushesIsNoticed() async throws {
        try await withEmptyDatabase { url in
            let directory = temporaryDirectory()
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            try await withTemporaryStores(3) { stores in
                let (writer, other, newcomer) = (stores[0], stores[1], stores[2])
                let churn = Key<Int>("hub.restore.churn", default: 0, sync: .manual)
                var setup: (tenant: String, tokens: [String]) = ("", [])
                try await Self.dumped(url, in: directory) {
                    setup = try await withHub(nodes: 1, database: url) { hub in
                        let tenant = try await hub.tenant()
                        let tokens = [try await hub.token(tenant, "writer"), try await hub.token(tenant, "other"), try await hub.token(tenant, "newcomer")]
                        try writer.set(1, for: Self.early)
                        try await Replicator(store: writer, peers: [hub.peer(node: 0, token: tokens[0])]).sync()
                        return (tenant, tokens)
                    }
                } after: {
                    let tokens = setup.tokens
                    try await withHub(nodes: 1, database: url) { hub in
                        try writer.set(2, for: Self.late)
                        try await Replicator(store: writer, peers: [hub.peer(node: 0, token: tokens[0])]).sync()
                    }
                }
                let (tenant, tokens) = setup
                try await withHub(nodes: 1, database: url) { hub in
                    // The other device's revisions take the positions the writer's push had, and
                    // the trim keeps only the newest: the position the writer marked is gone.
                    try await hub.admin.setRetention(tenant: tenant, revisions: 1)
                    for value in 1...5 { try other.set(value, for: churn) }
                    try await Replicator(store: other, peers: [hub.peer(node: 0, token: tokens[1])]).sync()
                    let trimmed = try await hub.admin.trim(tenant: try await hub.tenantID(tenant))
                    #expect(trimmed.deleted == 4)
                    try await Replicator(store: writer, peers: [hub.peer(node: 0, token: tokens[0])]).sync()
                    try await Replicator(store: newcomer, peers: [hub.peer(node: 0, token: tokens[2])]).sync()
                    #expect(newcomer[Self.early] == 1)
                    #expect(newcomer[Self.late] == 2, "what the writer pushed after the dump is back at the hub")
                    #expect(newcomer[churn] == 5)
                }
            }
        }
    }

    /// A device pushes again what the restored hub lacks, not its whole log: a restore makes
    /// every device's next sync cost what it pushed since the backup, so no herd of whole logs.
    @Test func aDevicePushesAgainOnlyWhatTheRestoredHubLacks() async throws {
        try await withEmptyDatabase { url in
            let directory = temporaryDirectory()
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            try await withTemporaryStores(2) { stores in
                let (writer, newcomer) = (stores[0], stores[1])
                var issued: [String] = []
                try await Self.dumped(url, in: directory) {
                    issued = try await withHub(nodes: 1, database: url) { hub in
                        let tenant = try await hub.tenant()
                        let tokens = [try await hub.token(tenant, "writer"), try await hub.token(tenant, "newcomer")]
                        for index in 0..<20 { try writer.set(index, for: Key<Int>("hub.restore.before.\(index)", default: -1, sync: .manual)) }
                        let first = try await Replicator(store: writer, peers: [hub.peer(node: 0, token: tokens[0])]).sync()
                        #expect(first.sent == 20)
                        return tokens
                    }
                } after: {
                    let tokens = issued
                    try await withHub(nodes: 1, database: url) { hub in
                        for index in 0..<3 { try writer.set(index, for: Key<Int>("hub.restore.after.\(index)", default: -1, sync: .manual)) }
                        let second = try await Replicator(store: writer, peers: [hub.peer(node: 0, token: tokens[0])]).sync()
                        #expect(second.sent == 3)
                    }
                }
                let tokens = issued
                try await withHub(nodes: 1, database: url) { hub in
                    let report = try await Replicator(store: writer, peers: [hub.peer(node: 0, token: tokens[0])]).sync()
                    #expect(report.sent == 3, "the writer pushed \(report.sent) events again; the hub lacked 3")
                    try await Replicator(store: newcomer, peers: [hub.peer(node: 0, token: tokens[1])]).sync()
                    for index in 0..<3 { #expect(newcomer[Key<Int>("hub.restore.after.\(index)", default: -1, sync: .manual)] == index) }
                    #expect(newcomer[Key<Int>("hub.restore.before.19", default: -1, sync: .manual)] == 19)
                    let again = try await Replicator(store: writer, peers: [hub.peer(node: 0, token: tokens[0])]).sync()
                    #expect(again.sent == 0)
                }
            }
        }
    }

    /// A push in flight across a restore: the device read its mark before the restore, and its
    /// push (not from 0) reaches a hub restored to before it had any mark for the device. That
    /// push proves nothing about what came before it, so the device's next sync pushes from 0.
    @Test func aPushInFlightAcrossARestoreLosesNothing() async throws {
        try await withEmptyDatabase { url in
            let directory = temporaryDirectory()
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            try await withTemporaryStores(2) { stores in
                let (writer, newcomer) = (stores[0], stores[1])
                let keys = (1...10).map { Key<Int>("hub.inflight.\($0)", default: 0, sync: .manual) }
                var issued: [String] = []
                try await Self.dumped(url, in: directory) {
                    issued = try await withHub(nodes: 1, database: url) { hub in
                        let tenant = try await hub.tenant()
                        return [try await hub.token(tenant, "writer"), try await hub.token(tenant, "newcomer")]
                    }
                } after: {
                    let tokens = issued
                    try await withHub(nodes: 1, database: url) { hub in
                        for key in keys.prefix(5) { try writer.set(1, for: key) }
                        try await Replicator(store: writer, peers: [hub.peer(node: 0, token: tokens[0])]).sync()
                    }
                }
                let tokens = issued
                try await withHub(nodes: 1, database: url) { hub in
                    // The push the writer had in flight: the rest of its log, after its checkpoint.
                    for key in keys.suffix(5) { try writer.set(1, for: key) }
                    _ = try await HTTPTransport(baseURL: hub.urls[0], token: tokens[0]).push(try writer.exportRange(after: 5), filter: .syncable)
                    try await Replicator(store: writer, peers: [hub.peer(node: 0, token: tokens[0])]).sync()
                    try await Replicator(store: newcomer, peers: [hub.peer(node: 0, token: tokens[1])]).sync()
                    for key in keys { #expect(newcomer[key] == 1, "\(key.name)") }
                }
            }
        }
    }

    /// A device restored from its own backup writes again under sequences it had pushed, and then
    /// the hub is restored to a point whose mark covers the old records there: the mark's chain
    /// hash is not the device's, so it pushes from 0 and nothing it wrote since is lost.
    @Test func aDeviceRestoredFromItsOwnBackupThenARestoredHubLosesNothing() async throws {
        try await withEmptyDatabase { url in
            let directory = temporaryDirectory()
            let device = temporaryDirectory()
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { for item in [directory, device] { try? FileManager.default.removeItem(at: item) } }
            try await withTemporaryStores(1) { stores in
                let newcomer = stores[0]
                let written = (6...12).map { Key<Int>("hub.rewritten.\($0)", default: 0, sync: .manual) }
                var issued: [String] = []
                var backup = Data()
                try await Self.dumped(url, in: directory) {
                    issued = try await withHub(nodes: 1, database: url) { hub in
                        let tenant = try await hub.tenant()
                        return [try await hub.token(tenant, "device"), try await hub.token(tenant, "newcomer")]
                    }
                    let tokens = issued
                    let first = try Store(directory: device)
                    for index in 1...5 { try first.set(index, for: Key<Int>("hub.original.\(index)", default: 0, sync: .manual)) }
                    backup = try Data(contentsOf: device.appendingPathComponent("data.mdb"))
                    for index in 6...10 { try first.set(index, for: Key<Int>("hub.original.\(index)", default: 0, sync: .manual)) }
                    try await withHub(nodes: 1, database: url) { hub in
                        _ = try await Replicator(store: first, peers: [hub.peer(node: 0, token: tokens[0])]).sync()
                    }
                } after: {
                    // The device goes back to its own backup (the store above is closed), writes
                    // again under sequences 6…12, and pushes them.
                    let handle = try FileHandle(forWritingTo: device.appendingPathComponent("data.mdb"))
                    try handle.truncate(atOffset: 0)
                    try handle.write(contentsOf: backup)
                    try handle.close()
                    let tokens = issued
                    let restored = try Store(directory: device)
                    for key in written { try restored.set(7, for: key) }
                    try await withHub(nodes: 1, database: url) { hub in
                        _ = try await Replicator(store: restored, peers: [hub.peer(node: 0, token: tokens[0])]).sync()
                    }
                }
                let tokens = issued
                let restored = try Store(directory: device)
                try await withHub(nodes: 1, database: url) { hub in
                    try await Replicator(store: restored, peers: [hub.peer(node: 0, token: tokens[0])]).sync()
                    try await Replicator(store: newcomer, peers: [hub.peer(node: 0, token: tokens[1])]).sync()
                    for key in written { #expect(newcomer[key] == 7, "\(key.name)") }
                }
            }
        }
    }

    /// As above, but retention dropped the device's record where the hub's mark stands (a hot
    /// key kept `.latest`): a gap cannot be compared, so the mark is not taken as the device's
    /// own, and what the device wrote after going back reaches the restored hub again.
    @Test func aMarkInsideAGapOfTheDevicesLogIsNotTakenAsItsOwn() async throws {
        try await withEmptyDatabase { url in
            let directory = temporaryDirectory()
            let device = temporaryDirectory()
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { for item in [directory, device] { try? FileManager.default.removeItem(at: item) } }
            try await withTemporaryStores(1) { stores in
                let newcomer = stores[0]
                let setting = Key<Int>("hub.gap.setting", default: 0, sync: .manual)
                let hot = Key<Int>("hub.gap.hot", default: 0, sync: .manual, retention: .latest)
                var issued: [String] = []
                var backup = Data()
                try await Self.dumped(url, in: directory) {
                    issued = try await withHub(nodes: 1, database: url) { hub in
                        let tenant = try await hub.tenant()
                        return [try await hub.token(tenant, "device"), try await hub.token(tenant, "newcomer")]
                    }
                    let tokens = issued
                    let first = try Store(directory: device)
                    for index in 1...10 { try first.set(index, for: Key<Int>("hub.gap.original.\(index)", default: 0, sync: .manual)) }
                    backup = try Data(contentsOf: device.appendingPathComponent("data.mdb"))
                    for index in 11...20 { try first.set(index, for: Key<Int>("hub.gap.original.\(index)", default: 0, sync: .manual)) }
                    try await withHub(nodes: 1, database: url) { hub in
                        _ = try await Replicator(store: first, peers: [hub.peer(node: 0, token: tokens[0])]).sync()
                    }
                } after: {
                    // The device goes back to its backup (head 10), writes the setting at 11 and a
                    // hot key over 12…61, whose dropped revisions become one gap over the mark (20).
                    let handle = try FileHandle(forWritingTo: device.appendingPathComponent("data.mdb"))
                    try handle.truncate(atOffset: 0)
                    try handle.write(contentsOf: backup)
                    try handle.close()
                    let tokens = issued
                    let restored = try Store(directory: device)
                    try restored.set(7, for: setting)
                    for value in 1...50 { try restored.set(value, for: hot) }
                    _ = try restored.applyRetention()
                    try await withHub(nodes: 1, database: url) { hub in
                        _ = try await Replicator(store: restored, peers: [hub.peer(node: 0, token: tokens[0])]).sync()
                    }
                }
                let tokens = issued
                let restored = try Store(directory: device)
                try await withHub(nodes: 1, database: url) { hub in
                    try await Replicator(store: restored, peers: [hub.peer(node: 0, token: tokens[0])]).sync()
                    try await Replicator(store: newcomer, peers: [hub.peer(node: 0, token: tokens[1])]).sync()
                    #expect(newcomer[setting] == 7, "the setting the device wrote after going back is at the hub")
                    #expect(newcomer[hot] == 50)
                }
            }
        }
    }
}
