@testable import Chronicle
import ChronicleTesting
import Foundation
import Testing

struct ConvergenceTests {
    static let keys: [Key<Int>] = [
        Key("c.auto1", default: -1), Key("c.auto2", default: -1), Key("c.manual1", default: -1, sync: .manual),
        Key("c.manual2", default: -1, sync: .manual), Key("c.shared", default: -1),
    ]
    static let local = Key<Int>("c.local", default: -1, sync: .never)

    /// Random operations on 3–5 replicas, random pairwise exchanges with dropped,
    /// duplicated and reordered batches and failing transports; then one full
    /// round of syncs. Every replica must end with the same views and winners.
    @Test(arguments: 0..<24)
    func replicasConverge(seed: UInt64) async throws {
        var random = SeededGenerator(seed: seed)
        let count = Int.random(in: 3...5, using: &random)
        try await withStores(count) { stores in
            for _ in 0..<60 {
                let store = stores[Int.random(in: 0..<count, using: &random)]
                switch Int.random(in: 0..<10, using: &random) {
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
}
