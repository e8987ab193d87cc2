@testable import Chronicle
@testable import ChronicleLog
import ChronicleTesting
import Foundation
import Testing

struct ConvergenceTests {
    static let keys: [Key<Int>] = [
        Key("c.auto1", default: -1, sync: .automaticSmall), Key("c.auto2", default: -1, sync: .automaticSmall),
        Key("c.manual1", default: -1, sync: .manual), Key("c.manual2", default: -1, sync: .manual),
        Key("c.shared", default: -1, sync: .automaticSmall),
    ]
    static let local = Key<Int>("c.local", default: -1, sync: .never)

    /// Random operations on 3–5 replicas, random pairwise exchanges with dropped,
    /// duplicated and reordered batches, failing transports and compactions by retention; then
    /// one full round of syncs. Every replica must end with the same views and winners.
    @Test(arguments: 0..<24)
    func replicasConverge(seed: UInt64) async throws {
        var random = SeededGenerator(seed: seed)
        let count = Int.random(in: 3...5, using: &random)
        // Every replica keeps two revisions a key, and compacts between other steps.
        var configuration = Store.Configuration()
        configuration.retention = .revisions(2)
        try await withTemporaryStores(count, configuration: configuration) { stores in
            for _ in 0..<60 {
                let store = stores[Int.random(in: 0..<count, using: &random)]
                switch Int.random(in: 0..<11, using: &random) {
                case 10:
                    _ = try store.applyRetention()
                case 0..<5:
                    store[Self.keys.randomElement(using: &random)!] = Int.random(in: 0..<1000, using: &random)
                case 5:
                    try store.remove(Self.keys.randomElement(using: &random)!)
                case 6:
                    store[Self.local] = Int.random(in: 0..<1000, using: &random)
                case 7:
                    try store.write { batch in
                        for key in Self.keys.shuffled(using: &random).prefix(3) { batch[key] = Int.random(in: 0..<1000, using: &random) }
                    }
                case 8:
                    // Raw ranges: some batches dropped, some duplicated, some out of order.
                    let (from, to) = (stores[Int.random(in: 0..<count, using: &random)], stores[Int.random(in: 0..<count, using: &random)])
                    var ranges: [Data] = []
                    var after: UInt64 = 0
                    while true {
                        let data = try from.exportRange(after: after, maxEvents: Int.random(in: 1...4, using: &random))
                        let range = try EventRange(decoding: Array(data))
                        ranges.append(data)
                        if range.reachesHead || range.upTo == after { break }
                        after = range.upTo
                    }
                    for data in ranges.shuffled(using: &random) {
                        switch Int.random(in: 0..<4, using: &random) {
                        case 0: continue  // dropped
                        case 1: _ = try to.importRange(data); _ = try to.importRange(data)  // duplicated
                        default: _ = try to.importRange(data)
                        }
                    }
                default:
                    let (a, b) = (Int.random(in: 0..<count, using: &random), Int.random(in: 0..<count, using: &random))
                    let failure: [FailingTransport.Failure] = Bool.random(using: &random) ? [.pushAfterDelivery(1)] : []
                    let peer = Peer(name: "peer", transport: FailingTransport(StoreTransport(store: stores[b]), failing: failure))
                    var configuration = Replicator.Configuration()
                    configuration.batchEvents = Int.random(in: 1...8, using: &random)
                    _ = try? await Replicator(store: stores[a], peers: [peer], configuration: configuration).sync()
                }
            }
            // A full round: everyone syncs with everyone (twice, so relayed events reach all).
            for _ in 0..<2 {
                for (index, store) in stores.enumerated() {
                    let peers = stores.enumerated().filter { $0.offset != index }.map { Peer.store($0.element) }
                    try await Replicator(store: store, peers: peers).sync()
                }
            }
            let engines = try stores.map { try $0.eventLog }
            for key in Self.keys {
                let winners = try engines.map { try $0.entry(.defaults, key.name).map { "\($0.origin.short):\($0.counter):\($0.op)" } }
                #expect(Set(winners).count == 1, "seed \(seed): replicas disagree on \(key.name): \(winners)")
                let values = stores.map { $0[key] }
                #expect(Set(values).count == 1, "seed \(seed): values of \(key.name) differ: \(values)")
            }
            for store in stores {
                #expect(try store.verify().isSound, "seed \(seed)")
                #expect(try store.logEntries().filter { $0.key == Self.local.name }.allSatisfy { $0.origin == (try store.replicaID) })
            }
        }
    }

    static let secret = SecretKey<Int?>("c.secret", sync: .manual)

    /// A sync group of honest members, a Byzantine carrier that forges, re-dates, squats and
    /// garbles what it carries, and one member rolled back to an earlier copy of its files
    /// mid-run. Honest members never crash or stall, and end with identical views.
    @Test(arguments: 0..<8)
    func honestMembersConvergeDespiteAByzantinePeerAndARollback(seed: UInt64) async throws {
        var random = SeededGenerator(seed: 1_000 + seed)
        let count = 3
        let directories = (0..<count).map { _ in temporaryDirectory() }
        defer { for directory in directories { try? FileManager.default.removeItem(at: directory) } }
        let configuration = passphraseConfiguration("the group")
        var stores = try directories.map { try Store(directory: $0, configuration: configuration) }
        var snapshot: (index: Int, bytes: Data)?
        for step in 0..<60 {
            let index = Int.random(in: 0..<count, using: &random)
            let store = stores[index]
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<4:
                store[Self.keys.randomElement(using: &random)!] = Int.random(in: 0..<1000, using: &random)
            case 4:
                try store.set(Int.random(in: 0..<1000, using: &random), for: Self.secret)
            case 5:
                try store.remove(Self.keys.randomElement(using: &random)!)
            case 6, 7:
                // The Byzantine carrier: takes what some member exports and forges it for another.
                let target = stores[Int.random(in: 0..<count, using: &random)]
                var range = try EventRange(decoding: Array(try store.exportRange(after: 0, maxEvents: 8)))
                for event in range.events.indices {
                    switch Int.random(in: 0..<5, using: &random) {
                    case 0: range.events[event].payload = Int64.random(in: 0..<1000, using: &random).bigEndianBytes
                    case 1: range.events[event].hlc = HLC(rawValue: range.events[event].hlc.rawValue + (5_000 << 16))
                    case 2: range.events[event].counter = .max
                    case 3: range.events[event].origin = ReplicaID.random()
                    default: range.events[event].op = range.events[event].op == .remove ? .set : .remove
                    }
                }
                if Bool.random(using: &random) {
                    var bytes = range.encoded()
                    bytes[Int.random(in: 0..<bytes.count, using: &random)] ^= 0x5A
                    _ = try? target.importRange(Data(bytes))  // garbage: refused whole, or harmless
                } else {
                    // Every event was altered: a member applies none of them, and refuses nothing else.
                    let receipt = try target.importRange(Data(range.encoded()), from: "a Byzantine peer")
                    #expect(receipt.applied == 0, "seed \(seed): a forged event was applied")
                }
            default:
                let other = Int.random(in: 0..<count, using: &random)
                _ = try? await Replicator(store: store, peers: [.store(stores[other])]).sync()
            }
            if step == 20 {
                snapshot = (index, try Data(contentsOf: directories[index].appendingPathComponent("data.mdb")))
            }
            if step == 40, let (rolled, bytes) = snapshot {
                // Roll the member back to its earlier copy, in place (same inode).
                stores[rolled] = try Store(directory: directories[(rolled + 1) % count], configuration: configuration)
                let handle = try FileHandle(forWritingTo: directories[rolled].appendingPathComponent("data.mdb"))
                try handle.truncate(atOffset: 0)
                try handle.write(contentsOf: bytes)
                try handle.close()
                stores[rolled] = try Store(directory: directories[rolled], configuration: configuration)
            }
        }
        for _ in 0..<2 {
            for (index, store) in stores.enumerated() {
                let peers = stores.enumerated().filter { $0.offset != index }.map { Peer.store($0.element) }
                try await Replicator(store: store, peers: peers).sync()
            }
        }
        for key in Self.keys {
            let values = stores.map { $0[key] }
            #expect(Set(values).count == 1, "seed \(seed): values of \(key.name) differ: \(values)")
        }
        let secrets = try stores.map { try $0.value(for: Self.secret) }
        #expect(Set(secrets).count == 1, "seed \(seed): secrets differ: \(secrets)")
        for store in stores {
            #expect(try store.verify().isSound, "seed \(seed)")
            #expect(try store.logEntries().allSatisfy { $0.counter <= Event.maxCounter })
        }
    }
}
