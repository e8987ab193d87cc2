@_spi(Wire) @testable import Chronicle
@_spi(Wire) @testable import ChronicleFormat
@testable import ChronicleHub
import ChronicleHTTP
import ChronicleTesting
import Foundation
import PostgresNIO
import Testing
import ToolsTestSupport

/// The hub's retention against a carrier that holds a device token of the tenant.
@Suite(.serialized, .enabled(if: hasTestDatabase, "needs CHRONICLE_TEST_DATABASE: run scripts/test.sh"))
struct HubRetentionCarrierTests {
    /// FORMAT.md 13: "no token's pushes can evict another device's events". Rows are counted
    /// per *pushing* device, and an identity another device already pushed with the same bytes
    /// is not stored again. A carrier that got a member's event first (a peer-to-peer sync, a
    /// relay) pushes it before the member does: the member's own push is then a duplicate, and
    /// the event sits in the carrier's partition, where the carrier's own newer (unauthenticated)
    /// revisions would evict it, but the member's push vouches for the row too (it counts in the
    /// member's partition), so a member that pulls later gets the genuine value.
    @Test func aMembersEventACarrierPushedFirstStaysAtTheHub() async throws {
        try await withHub(nodes: 1) { hub in
            let tenant = try await hub.tenant()
            let (memberToken, carrierToken, laterToken) = (
                try await hub.token(tenant, "member"), try await hub.token(tenant, "carrier"), try await hub.token(tenant, "later")
            )
            try await hub.admin.setRetention(tenant: tenant, revisions: 3)
            let theme = Key<String>("hub.attack.theme", default: "", sync: .manual)
            try await withTemporaryStores(2, configuration: groupConfiguration("hub attack")) { members in
                try await withTemporaryStore { carrier, _ async throws in
                    let (member, later) = (members[0], members[1])
                    try member.set("genuine", for: theme)
                    // The carrier gets the member's event directly, and pushes it to the hub first.
                    try await Replicator(store: carrier, peers: [.store(member)]).sync()
                    #expect(carrier[theme] == "genuine")
                    try await Replicator(store: carrier, peers: [hub.peer(node: 0, token: carrierToken)]).sync()
                    // The member's own push: the same identity and bytes, stored already.
                    try await Replicator(store: member, peers: [hub.peer(node: 0, token: memberToken)]).sync()
                    let id = try await hub.tenantID(tenant)
                    var byDevice: [String: Int64] = [:]
                    for try await (device, count) in try await hub.admin.client.query(
                        "SELECT device, count(*) FROM events WHERE tenant_id = \(id) GROUP BY device"
                    ).decode((String, Int64).self) { byDevice[device] = count }
                    #expect(byDevice == ["carrier": 1], "the member's event is stored once, as the carrier's: \(byDevice)")
                    // The carrier's own newer revisions of the key (members will quarantine them).
                    let junk = Key<String>(theme.name, default: "", sync: .manual, retention: .forever)
                    for index in 1...10 { try carrier.set("junk \(index)", for: junk) }
                    try await Replicator(store: carrier, peers: [hub.peer(node: 0, token: carrierToken)]).sync()
                    _ = try await hub.admin.trim(tenant: try await hub.tenantID(tenant))
                    try await Replicator(store: later, peers: [hub.peer(node: 0, token: laterToken)]).sync()
                    #expect(later[theme] == "genuine", "a member pulling from the hub reads \"\(later[theme])\"")
                }
            }
        }
    }

    /// One commit in which two devices vouch for the same stored row (a node commits the pushes
    /// waiting on it together): both are recorded, so each device's partition counts the row.
    /// The push statement is run as a node runs it, with both vouches for each row.
    @Test func twoVouchesForOneRowInOneCommitAreBothKept() async throws {
        try await withHub(nodes: 1) { hub in
            let tenant = try await hub.tenant()
            let carrier = try await hub.token(tenant, "carrier")
            let id = try await hub.tenantID(tenant)
            try await withTemporaryStore { store, _ async throws in
                try store.set(1, for: Key<Int>("hub.vouch.k", default: 0, sync: .manual))
                try await Replicator(store: store, peers: [hub.peer(node: 0, token: carrier)]).sync()
            }
            var stored: (writer: ByteBuffer, counter: Int64, body: ByteBuffer)?
            for try await row in try await hub.admin.client.query(
                "SELECT writer, counter, body FROM events WHERE tenant_id = \(id)"
            ).decode((ByteBuffer, Int64, ByteBuffer).self) { stored = row }
            let row = try #require(stored)
            let statement = PushWriteStatement(
                tenant: id, positions: [], writers: [], counters: [], policies: [], sizes: [], bodies: [], chains: [],
                keys: [], hlcs: [], devices: [], head: 0, chain: ByteBuffer(), addedEvents: 0, addedBytes: 0, appendedSinceTrim: 0,
                vouchWriters: [row.writer, row.writer], vouchCounters: [row.counter, row.counter], vouchBodies: [row.body, row.body],
                vouchDevices: ["m1", "m2"], changed: false, pushers: [], pushedCounts: [],
                channel: HubDatabase.channel, payload: String(id), notify: false)
            for try await _ in try await hub.admin.client.execute(statement) {}
            var vouchers: [String] = []
            for try await pushers in try await hub.admin.client.query(
                "SELECT also_pushed_by FROM events WHERE tenant_id = \(id)"
            ).decode([String].self) { vouchers = pushers.sorted() }
            #expect(vouchers == ["m1", "m2"])
            var marked: Int64 = 0
            for try await count in try await hub.admin.client.query(
                "SELECT count(*) FROM trim_pending WHERE tenant_id = \(id)"
            ).decode(Int64.self) { marked = count }
            #expect(marked == 1, "the vouched row's key is marked for the next trim")
        }
    }
}
