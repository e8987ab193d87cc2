@testable import Chronicle
@testable import ChronicleLog
import ChronicleTesting
import Foundation
import Testing

/// A shared folder as file-sync services really treat it: each device writes into its own
/// copy, the service copies files across later (in any order), and renames one copy of a clash.
struct MailboxTests {
    /// Copies every range file of `from` into `into`, as a sync service would: a name taken by
    /// a file with other bytes gets the service's conflict name instead.
    private func syncService(from: URL, into: URL, conflictName: (String) -> String) throws {
        let source = from.appendingPathComponent("ranges")
        let target = into.appendingPathComponent("ranges")
        try FileManager.default.createDirectory(at: target, withIntermediateDirectories: true)
        for name in try FileManager.default.contentsOfDirectory(atPath: source.path) {
            let bytes = try Data(contentsOf: source.appendingPathComponent(name))
            var destination = target.appendingPathComponent(name)
            if let existing = try? Data(contentsOf: destination) {
                if existing == bytes { continue }
                destination = target.appendingPathComponent(conflictName(name))
            }
            try bytes.write(to: destination)
        }
        let id = into.appendingPathComponent("mailbox.id")
        if !FileManager.default.fileExists(atPath: id.path) {
            try FileManager.default.copyItem(at: from.appendingPathComponent("mailbox.id"), to: id)
        }
    }

    @Test func twoDevicesPushingIntoTheirCopiesOfAFolderLoseNothing() async throws {
        try await withTemporaryStores(3) { stores in
            let (phone, laptop, tablet) = (stores[0], stores[1], stores[2])
            let phoneFolder = temporaryDirectory()
            let laptopFolder = temporaryDirectory()
            defer { for folder in [phoneFolder, laptopFolder] { try? FileManager.default.removeItem(at: folder) } }
            // The same mailbox on both devices (the service synced mailbox.id before).
            try await Replicator(store: phone, peers: [.directory(phoneFolder)]).sync()
            try FileManager.default.createDirectory(at: laptopFolder, withIntermediateDirectories: true)
            try FileManager.default.copyItem(at: phoneFolder.appendingPathComponent("mailbox.id"), to: laptopFolder.appendingPathComponent("mailbox.id"))
            phone[.note] = "from the phone"
            laptop[Key<String>("sync.other", default: "", sync: .manual)] = "from the laptop"
            try await Replicator(store: phone, peers: [.directory(phoneFolder)]).sync()
            try await Replicator(store: laptop, peers: [.directory(laptopFolder)]).sync()
            // The service merges both ways; nothing clashes, since names are per device.
            try syncService(from: laptopFolder, into: phoneFolder) { $0.replacingOccurrences(of: ".range", with: " (conflicted copy).range") }
            let names = try FileManager.default.contentsOfDirectory(atPath: phoneFolder.appendingPathComponent("ranges").path)
            #expect(names.count == 2 && !names.contains { $0.contains("conflicted") })
            try await Replicator(store: tablet, peers: [.directory(phoneFolder)]).sync()
            #expect(tablet[.note] == "from the phone")
            #expect(tablet[Key<String>("sync.other", default: "", sync: .manual)] == "from the laptop")
        }
    }

    @Test func filesRenamedBySyncServicesAreRead() async throws {
        try await withTemporaryStores(2) { stores in
            let (writer, reader) = (stores[0], stores[1])
            let folder = temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: folder) }
            let ranges = folder.appendingPathComponent("ranges")
            var names: [String] = []
            for (index, value) in ["one", "two", "three"].enumerated() {
                writer[Key<String>("sync.k\(index)", default: "", sync: .manual)] = value
                try await Replicator(store: writer, peers: [.directory(folder)]).sync()
                let current = try FileManager.default.contentsOfDirectory(atPath: ranges.path)
                names.append(try #require(current.first { !names.contains($0) }))
            }
            // Dropbox, Syncthing and iCloud Drive renamings.
            let renamed = [
                names[0].replacingOccurrences(of: ".range", with: " (Phone's conflicted copy 2026-11-22).range"),
                names[1].replacingOccurrences(of: ".range", with: ".sync-conflict-20261122-101010-ABCDEFG.range"),
                names[2].replacingOccurrences(of: ".range", with: " 2.range"),
            ]
            for (old, new) in zip(names, renamed) {
                try FileManager.default.moveItem(at: ranges.appendingPathComponent(old), to: ranges.appendingPathComponent(new))
            }
            try await Replicator(store: reader, peers: [.directory(folder)]).sync()
            for (index, value) in ["one", "two", "three"].enumerated() {
                #expect(reader[Key<String>("sync.k\(index)", default: "", sync: .manual)] == value)
            }
        }
    }

    @Test func aLateFileSortingBeforeTheCheckpointIsStillRead() async throws {
        try await withTemporaryStores(3) { stores in
            let (early, late, reader) = (stores[0], stores[1], stores[2])
            let folder = temporaryDirectory()
            let offline = temporaryDirectory()
            defer { for item in [folder, offline] { try? FileManager.default.removeItem(at: item) } }
            try await Replicator(store: early, peers: [.directory(folder)]).sync()
            try FileManager.default.createDirectory(at: offline, withIntermediateDirectories: true)
            try FileManager.default.copyItem(at: folder.appendingPathComponent("mailbox.id"), to: offline.appendingPathComponent("mailbox.id"))
            // The late device pushes into its offline copy first (an older name)…
            late[Key<String>("sync.late", default: "", sync: .manual)] = "written offline"
            try await Replicator(store: late, peers: [.directory(offline)]).sync()
            try await Task.sleep(for: .milliseconds(5))
            early[.note] = "written online"
            try await Replicator(store: early, peers: [.directory(folder)]).sync()
            try await Replicator(store: reader, peers: [.directory(folder)]).sync()
            #expect(reader[.note] == "written online")
            // …and its file reaches the shared folder only now, sorting before the reader's checkpoint.
            try syncService(from: offline, into: folder) { $0 }
            try await Replicator(store: reader, peers: [.directory(folder)]).sync()
            #expect(reader[Key<String>("sync.late", default: "", sync: .manual)] == "written offline")
        }
    }

    /// A folder whose `mailbox.id` claims another peer's replica id (a store's, or a hub's
    /// tenant) would share that peer's checkpoints: the second of the two is refused with what to
    /// do, and the first still syncs. Two peers of one id and kind (two nodes of one hub) are fine.
    @Test func aMailboxClaimingAnotherPeersIdIsRefused() async throws {
        try await withTemporaryStores(3) { stores in
            let (device, other, second) = (stores[0], stores[1], stores[2])
            let folder = temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: folder) }
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try Data((try other.replicaInfo().replicaID.hex + "\n").utf8).write(to: folder.appendingPathComponent("mailbox.id"))
            other[.note] = "from the store"
            let replicator = Replicator(store: device, peers: [.store(other), .directory(folder)])
            let error = await #expect(throws: ChronicleError.self) { try await replicator.sync() }
            #expect("\(error.map { $0 } as Any)".contains("mailbox.id"), "\(String(describing: error))")
            #expect(device[.note] == "from the store", "the first peer still synced")

            // The folder listed first: the mailbox is still the one refused, from the round that
            // finds the claim on, and the store still syncs.
            let reversed = Replicator(store: second, peers: [.directory(folder), .store(other)])
            try await reversed.sync()
            other[.note] = "later"
            let again = await #expect(throws: ChronicleError.self) { try await reversed.sync() }
            #expect("\(again.map { $0 } as Any)".contains("mailbox.id"))
            #expect(second[.note] == "later")
            // Done as the error says, the same replicator syncs the folder again.
            try FileManager.default.removeItem(at: folder.appendingPathComponent("mailbox.id"))
            try await reversed.sync()

            let twice = Replicator(store: second, peers: [.store(other), .store(other)])
            try await twice.sync()
            #expect(second[.note] == "later")
        }
    }

    @Test func absurdNamesAndPruningStallNobody() async throws {
        try await withTemporaryStores(2) { stores in
            let (writer, reader) = (stores[0], stores[1])
            let folder = temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: folder) }
            writer[.note] = "one"
            try await Replicator(store: writer, peers: [.directory(folder)]).sync()
            writer[.note] = "one, again"
            try await Replicator(store: writer, peers: [.directory(folder)]).sync()
            let ranges = folder.appendingPathComponent("ranges")
            let newest = try #require(try FileManager.default.contentsOfDirectory(atPath: ranges.path).max())
            for name in ["18446744073709551615.range", "99999999999999999999999999999.range", "-1.range", ".range", "\u{1B}[31m.range"] {
                try Data("junk".utf8).write(to: ranges.appendingPathComponent(name))
            }
            try await Replicator(store: reader, peers: [.directory(folder)]).sync()
            #expect(reader[.note] == "one, again")
            // Pruning: every device has synced, so the old files go (the newest stays, as when
            // pruning by age). Nobody pushes everything again.
            for name in try FileManager.default.contentsOfDirectory(atPath: ranges.path) where name != newest {
                try FileManager.default.removeItem(at: ranges.appendingPathComponent(name))
            }
            writer[.note] = "two"
            let report = try await Replicator(store: writer, peers: [.directory(folder)]).sync()
            #expect(report.sent == 1)
            try await Replicator(store: reader, peers: [.directory(folder)]).sync()
            #expect(reader[.note] == "two")
            // Files are private to their owner.
            for name in try FileManager.default.contentsOfDirectory(atPath: ranges.path) {
                let mode = try FileManager.default.attributesOfItem(atPath: ranges.appendingPathComponent(name).path)[.posixPermissions] as? Int
                #expect(mode == 0o600)
            }
        }
    }
}
