@_spi(Wire) @testable import Chronicle
@_spi(Wire) @testable import ChronicleFormat
@testable import ChronicleHub
import ChronicleTesting
import Foundation
import PostgresNIO
import Testing
import ToolsTestSupport

/// What `GET /v1/range` answers from any position: bounds, chains and events that join up.
extension HubTests {
@Suite struct HubRangeTests {
    /// Ten events pushed, then pulls after 0, 4, 10, 11 and 2⁶⁴ − 1 (the last two past the
    /// head: a device whose checkpoint outlived a restored database): each range starts at
    /// min(after, head), its after-chain is the up-to-chain of the range that ended there, and
    /// its events are the ones after its start.
    @Test func rangesFromAnyPositionJoinUp() async throws {
        try await withHub(nodes: 1) { hub in
            let tenant = try await hub.tenant()
            let token = try await hub.token(tenant, "d")
            try await withTemporaryStores(1) { stores in
                for i in 0..<10 { try stores[0].set(i, for: Key<Int>("range.k\(i)", default: 0, sync: .automaticSmall)) }
                _ = try await Replicator(store: stores[0], peers: [hub.peer(node: 0, token: token)]).sync()
            }
            func pull(after: String, max: Int? = nil) async throws -> EventRange {
                var items: [URLQueryItem] = [.init(name: "after", value: after)]
                if let max { items.append(.init(name: "max", value: String(max))) }
                let response = try await rawRequest(hub.urls[0].appendingPathComponent("v1/range").appending(queryItems: items), token: token)
                #expect(response.status == 200, "\(response.body)")
                return try EventRange(decoding: Array(response.data))
            }
            let firstFour = try await pull(after: "0", max: 4)
            #expect((firstFour.after, firstFour.upTo, firstFour.head) == (0, 4, 10))
            #expect(firstFour.afterChain == RelayRange.emptyChain)
            #expect(firstFour.events.count == 4)
            let rest = try await pull(after: "4")
            #expect((rest.after, rest.upTo, rest.head) == (4, 10, 10))
            #expect(rest.afterChain == firstFour.upToChain, "the range after 4 starts where the one ending at 4 ended")
            #expect(rest.events.count == 6)
            #expect(rest.events.map(\.key) == (4..<10).map { "range.k\($0)" })
            for after in ["10", "11", "18446744073709551615"] {
                let empty = try await pull(after: after)
                #expect((empty.after, empty.upTo, empty.head) == (10, 10, 10), "after \(after)")
                #expect(empty.afterChain == rest.upToChain, "after \(after)")
                #expect(empty.events.isEmpty)
            }
        }
    }

    /// Forty events of 100 KB: a pull reads about a mebibyte of bodies from the database (the
    /// range's own bound), not every body its 4,096-position window holds, which at the limit
    /// of a gigabyte PostgreSQL cannot put in one value; the rest comes in the next pulls.
    @Test func aPullReadsAboutAMebibyteOfBodiesFromTheDatabase() async throws {
        try await withHub(nodes: 1) { hub in
            let tenant = try await hub.tenant()
            let token = try await hub.token(tenant, "d")
            try await withTemporaryStores(1) { stores in
                for i in 0..<40 {
                    let payload = Data((0..<100_000).map { _ in UInt8.random(in: 0...255) })
                    try stores[0].set(payload, for: Key<Data>("range.big\(i)", default: Data(), sync: .manual))
                }
                _ = try await Replicator(store: stores[0], peers: [hub.peer(node: 0, token: token)]).sync()
            }
            let database = hub.nodes[0].database
            let device = try #require(try await database.device(token: token))
            var after: UInt64 = 0
            var pulls = 0
            while after < 40 {
                let range = try await database.reads.range(device: device, after: after, filter: .syncable, excluding: nil, maxEvents: 4_096)
                #expect(range.sentBytes <= HubDatabase.pullBytes + 110_000, "sent \(range.sentBytes) bytes of bodies in one pull")
                #expect(range.upTo > after)
                after = range.upTo
                pulls += 1
            }
            #expect(pulls >= 4, "40 events of 100 KB in \(pulls) pulls of about 1 MiB")
        }
    }

    /// The range statement's filter and writer exclusion, run by PostgreSQL over rows of every
    /// policy (−1: an opaque item), payload size and writer, against `RelayRange.admits`: each
    /// row's body has its own length, so the bytes sent say which rows were.
    @Test func aPullSendsWhatRelayRangeAdmits() async throws {
        try await withHub(nodes: 1) { hub in
            let tenant = try await hub.tenant()
            let token = try await hub.token(tenant, "d")
            let database = hub.nodes[0].database
            let device = try #require(try await database.device(token: token))
            let writers = [[UInt8](repeating: 1, count: 16), [UInt8](repeating: 2, count: 16)]
            var rows: [(policy: Int16, size: Int32, writer: [UInt8], length: Int)] = []
            for policy: Int16 in [-1, 0, 1, 2] {
                for size: Int32 in [10, 11] {  // at the limit, and past it
                    for writer in writers { rows.append((policy, size, writer, 1 << rows.count)) }  // lengths 1, 2, 4, … : sums say which
                }
            }
            #expect(rows.count == 16)  // bodies of 1 to 32,768 bytes: well within a range's mebibyte
            for (index, row) in rows.enumerated() {
                let body = ByteBuffer(bytes: [UInt8](repeating: 7, count: row.length))
                try await hub.admin.client.query(
                    """
                    INSERT INTO events (tenant_id, position, writer, counter, policy, payload_size, body, chain)
                    VALUES (\(device.tenant), \(Int64(index + 1)), \(ByteBuffer(bytes: row.writer)), \(Int64(index + 1)), \(row.policy),
                        \(row.size), \(body), \(ByteBuffer(bytes: [UInt8](repeating: UInt8(index), count: 32))))
                    """)
            }
            try await hub.admin.client.query("UPDATE tenants SET head = \(Int64(rows.count)) WHERE id = \(device.tenant)")
            for filter in [RangeFilter.syncable, .automaticSmall(maxPayload: 10)] {
                for excluded in [nil] + writers {
                    let range = try await database.reads.range(device: device, after: 0, filter: filter, excluding: excluded, maxEvents: 4_096)
                    let expected = rows.filter { row in
                        RelayRange.admits(filter, policy: row.policy < 0 ? nil : UInt8(row.policy), payloadSize: Int(row.size))
                            && row.writer != excluded
                    }
                    #expect(range.sentBytes == expected.reduce(0) { $0 + $1.length }, "\(filter), excluding \(excluded?.first ?? 0)")
                    #expect((range.events, range.upTo) == (expected.count, 16), "\(filter), excluding \(excluded?.first ?? 0)")
                }
            }
        }
    }

    /// The operator's view of each device's progress: a pull that advances records where it
    /// ended and when; one that does not (nothing new, or past the head) leaves both alone.
    @Test func aPullRecordsTheDevicesProgress() async throws {
        try await withHub(nodes: 1) { hub in
            let tenant = try await hub.tenant()
            let token = try await hub.token(tenant, "d")
            try await withTemporaryStores(1) { stores in
                for i in 0..<6 { try stores[0].set(i, for: Key<Int>("range.k\(i)", default: 0, sync: .automaticSmall)) }
                _ = try await Replicator(store: stores[0], peers: [hub.peer(node: 0, token: token)]).sync()
            }
            let database = hub.nodes[0].database
            let device = try #require(try await database.device(token: token))
            func progress() async throws -> (pulled: Int64, seen: Bool) {
                let rows = try await hub.admin.client.query(
                    "SELECT pulled, last_seen IS NOT NULL FROM devices WHERE tenant_id = \(device.tenant) AND name = 'd'")
                for try await row in rows.decode((Int64, Bool).self) { return row }
                return (-1, false)
            }
            try await hub.admin.client.query("UPDATE devices SET last_seen = NULL WHERE tenant_id = \(device.tenant)")
            _ = try await database.reads.range(device: device, after: 6, filter: .syncable, excluding: nil, maxEvents: 4_096)
            #expect(try await progress() == (0, false), "nothing new: nothing recorded")
            _ = try await database.reads.range(device: device, after: 0, filter: .syncable, excluding: nil, maxEvents: 4)
            #expect(try await progress() == (4, true))
            _ = try await database.reads.range(device: device, after: 1, filter: .syncable, excluding: nil, maxEvents: 1)
            #expect(try await progress() == (4, true), "never back")
            _ = try await database.reads.range(device: device, after: 4, filter: .syncable, excluding: nil, maxEvents: 4_096)
            #expect(try await progress() == (6, true))
        }
    }

    /// An automatic-mode device behind large manual events, and a device behind its own large
    /// events: what the filter or the writer exclusion leaves out is neither read from the
    /// database nor counted against the range's mebibyte, so one pull passes all of it.
    @Test func whatAPullLeavesOutIsNotReadFromTheDatabase() async throws {
        try await withHub(nodes: 1) { hub in
            let tenant = try await hub.tenant()
            let token = try await hub.token(tenant, "d")
            try await withTemporaryStores(1) { stores in
                for i in 0..<30 {
                    let payload = Data((0..<100_000).map { _ in UInt8.random(in: 0...255) })
                    try stores[0].set(payload, for: Key<Data>("range.big\(i)", default: Data(), sync: .manual))
                }
                for i in 0..<5 { try stores[0].set(i, for: Key<Int>("range.small\(i)", default: 0, sync: .automaticSmall)) }
                _ = try await Replicator(store: stores[0], peers: [hub.peer(node: 0, token: token)]).sync()
            }
            let database = hub.nodes[0].database
            let device = try #require(try await database.device(token: token))
            let first = try await database.reads.range(device: device, after: 0, filter: .syncable, excluding: nil, maxEvents: 1)
            let writer = try #require(try EventRange(decoding: first.bytes).events.first).origin.bytes
            let automatic = try await database.reads.range(
                device: device, after: 0, filter: .automaticSmall(maxPayload: 1_024), excluding: nil, maxEvents: 4_096)
            #expect((automatic.events, automatic.upTo) == (5, 35), "past the 30 manual events in one pull")
            #expect(automatic.sentBytes < 10_000)
            let own = try await database.reads.range(device: device, after: 0, filter: .syncable, excluding: writer, maxEvents: 4_096)
            #expect((own.events, own.upTo) == (0, 35), "its own events, all left out, in one pull")
            #expect(own.sentBytes == 0)
            // The bound still counts what is sent: the same range with nothing left out takes several pulls.
            let all = try await database.reads.range(device: device, after: 0, filter: .syncable, excluding: nil, maxEvents: 4_096)
            #expect(all.upTo < 30 && all.events == Int(all.upTo))
            // And the event bound: at most `maxEvents` sent, ending at the last one sent.
            let two = try await database.reads.range(device: device, after: 0, filter: .automaticSmall(maxPayload: 1_024), excluding: nil, maxEvents: 2)
            #expect((two.events, two.upTo) == (2, 32))
        }
    }
}
}
