@_spi(Wire) import ChronicleFormat
public import Foundation
import NIOCore
import PostgresNIO
import Synchronization

/// Tenants and device tokens: what `chronicle hub tenant …` and `chronicle hub token …` do.
extension HubDatabase {

    /// Adds a tenant; returns `false` when one of that name exists already.
    ///
    /// - Parameters:
    ///   - maxEvents: the most events the tenant's log may hold (`nil`: no limit).
    ///   - maxBytes: the most bytes of event items it may hold (`nil`: no limit).
    @discardableResult
    public func addTenant(_ name: String, maxEvents: Int64? = nil, maxBytes: Int64? = nil) async throws -> Bool {
        try Self.validate(name: name, what: "tenant")
        let relay = ByteBuffer(bytes: randomIdentifier())
        let epoch = ByteBuffer(bytes: randomIdentifier())
        let chain = ByteBuffer(bytes: RelayRange.emptyChain)
        let rows = try await client.query(
            """
            INSERT INTO tenants (name, relay_id, epoch, chain, max_events, max_bytes)
            VALUES (\(name), \(relay), \(epoch), \(chain), \(maxEvents), \(maxBytes))
            ON CONFLICT (name) DO NOTHING RETURNING id
            """, logger: logger)
        for try await _ in rows { return true }
        return false
    }

    /// A tenant as `chronicle hub tenant list` shows it.
    public struct TenantSummary: Sendable, Equatable {
        /// The tenant's name.
        public var name: String
        /// Devices holding a token.
        public var devices: Int
        /// Events stored.
        public var events: Int64
        /// Bytes stored (event items and wrapped keys).
        public var bytes: Int64
        /// The event quota (`nil`: none).
        public var maxEvents: Int64?
        /// The byte quota (`nil`: none).
        public var maxBytes: Int64?
        /// Revisions kept per key and pushing device (`nil`: the hub's default).
        public var retainRevisions: Int?
    }

    /// Every tenant, by name (tests and small hubs; `chronicle hub tenant list` reads pages).
    public func tenants() async throws -> [TenantSummary] {
        var result: [TenantSummary] = []
        var after: String?
        while true {
            var page: [TenantSummary] = []
            try await tenants(after: after, limit: 1_000) { page.append($0) }
            result += page
            guard page.count == 1_000, let last = page.last else { return result }
            after = last.name
        }
    }

    /// A page of tenants in name order: those after `after` whose names start with `prefix`, at
    /// most `limit`, each handed to `each` as its row arrives. Reads the name index from `after`
    /// (or from `prefix`) and stops at `limit`: the first row comes at once however many tenants
    /// the hub holds.
    public func tenants(
        after: String? = nil, prefix: String = "", limit: Int, _ each: (TenantSummary) async throws -> Void
    ) async throws {
        // From the prefix itself (names equal to it included), or past `after` when that is further on.
        let limit = Int64(max(0, limit))
        let query: PostgresQuery
        if let after, after >= prefix {
            query = """
                SELECT t.name, (SELECT count(*) FROM devices d WHERE d.tenant_id = t.id), t.event_count, t.byte_count, t.max_events,
                    t.max_bytes, t.retain_revisions
                FROM tenants t WHERE t.name > \(after) AND starts_with(t.name, \(prefix)) ORDER BY t.name LIMIT \(limit)
                """
        } else {
            query = """
                SELECT t.name, (SELECT count(*) FROM devices d WHERE d.tenant_id = t.id), t.event_count, t.byte_count, t.max_events,
                    t.max_bytes, t.retain_revisions
                FROM tenants t WHERE t.name >= \(prefix) AND starts_with(t.name, \(prefix)) ORDER BY t.name LIMIT \(limit)
                """
        }
        let rows = try await client.query(query, logger: logger)
        for try await (name, devices, events, bytes, maxEvents, maxBytes, retain) in rows.decode(
            (String, Int64, Int64, Int64, Int64?, Int64?, Int32?).self)
        {
            try await each(
                TenantSummary(
                    name: name, devices: Int(devices), events: events, bytes: bytes, maxEvents: maxEvents, maxBytes: maxBytes,
                    retainRevisions: retain.map(Int.init)))
        }
    }

    /// A device of a tenant as `chronicle hub tenant show` lists it.
    public struct DeviceSummary: Sendable, Equatable {
        /// The device's name.
        public var name: String
        /// When its current token was issued.
        public var created: Date
        /// When it last pulled (`nil`: never).
        public var lastSeen: Date?
        /// Events it pushed.
        public var pushed: Int64
        /// The furthest position served to it.
        public var pulled: Int64
    }

    /// One tenant with its devices; throws when there is none of that name.
    public func tenant(named name: String) async throws -> (summary: TenantSummary, created: Date, devices: [DeviceSummary]) {
        var found: (TenantSummary, Date)?
        for try await (name, events, bytes, maxEvents, maxBytes, retain, created) in try await client.query(
            """
            SELECT name, event_count, byte_count, max_events, max_bytes, retain_revisions, created FROM tenants WHERE name = \(name)
            """, logger: logger
        ).decode((String, Int64, Int64, Int64?, Int64?, Int32?, Date).self) {
            found = (
                TenantSummary(
                    name: name, devices: 0, events: events, bytes: bytes, maxEvents: maxEvents, maxBytes: maxBytes,
                    retainRevisions: retain.map(Int.init)), created
            )
        }
        guard let found else { throw HubRefusal.unknownTenant(name) }
        var summary = found.0
        var devices: [DeviceSummary] = []
        for try await (device, issued, lastSeen, pushed, pulled) in try await client.query(
            """
            SELECT d.name, d.created, d.last_seen, d.pushed, d.pulled FROM devices d JOIN tenants t ON t.id = d.tenant_id
            WHERE t.name = \(name) ORDER BY d.name
            """, logger: logger
        ).decode((String, Date, Date?, Int64, Int64).self) {
            devices.append(DeviceSummary(name: device, created: issued, lastSeen: lastSeen, pushed: pushed, pulled: pulled))
        }
        summary.devices = devices.count
        return (summary, found.1, devices)
    }

    /// Sets a tenant's quotas (`nil`: no limit).
    public func setQuota(tenant: String, maxEvents: Int64?, maxBytes: Int64?) async throws {
        let rows = try await client.query(
            "UPDATE tenants SET max_events = \(maxEvents), max_bytes = \(maxBytes) WHERE name = \(tenant) RETURNING id", logger: logger)
        for try await _ in rows { return }
        throw HubRefusal.unknownTenant(tenant)
    }

    /// Issues a new token for a device of a tenant (replacing the device's previous token) and
    /// returns it; only its hash is stored.
    public func issueToken(tenant: String, device: String) async throws -> String {
        try Self.validate(name: device, what: "device")
        let token = BearerToken.generate()
        let hash = ByteBuffer(bytes: Self.tokenHash(token))
        let rows = try await client.query(
            """
            INSERT INTO devices (tenant_id, name, token_hash)
            SELECT id, \(device), \(hash) FROM tenants WHERE name = \(tenant)
            ON CONFLICT (tenant_id, name) DO UPDATE SET token_hash = EXCLUDED.token_hash, created = now()
            RETURNING tenant_id
            """, logger: logger)
        for try await _ in rows { return token }
        throw HubRefusal.unknownTenant(tenant)
    }

    /// Revokes a device's token: refused from the next request on, on every node. Returns
    /// `false` when the device had none.
    @discardableResult
    public func revokeToken(tenant: String, device: String) async throws -> Bool {
        let rows = try await client.query(
            """
            DELETE FROM devices WHERE name = \(device) AND tenant_id = (SELECT id FROM tenants WHERE name = \(tenant))
            RETURNING tenant_id
            """, logger: logger)
        for try await _ in rows { return true }
        return false
    }

    /// The wrapped-key records a tenant's devices stored, per device (`chronicle hub keys list`).
    public func keyCounts(tenant: String) async throws -> [(device: String, keys: Int)] {
        let rows = try await client.query(
            """
            SELECT coalesce(k.device, ''), count(*) FROM wrapped_keys k JOIN tenants t ON t.id = k.tenant_id
            WHERE t.name = \(tenant) GROUP BY k.device ORDER BY k.device
            """, logger: logger)
        var counts: [(String, Int)] = []
        for try await (device, count) in rows.decode((String, Int64).self) { counts.append((device, Int(count))) }
        return counts
    }

    /// Drops the wrapped-key records a device of the tenant pushed (`nil`: records from before the
    /// hub recorded who pushed them); returns how many. Members hold the keys they opened, so a
    /// genuine record dropped here costs only a device that joins later: it pushes it again.
    @discardableResult
    public func dropKeys(tenant: String, device: String?) async throws -> Int {
        let rows = try await client.query(
            """
            DELETE FROM wrapped_keys WHERE tenant_id = (SELECT id FROM tenants WHERE name = \(tenant))
            AND device IS NOT DISTINCT FROM \(device) RETURNING body
            """, logger: logger)
        var dropped = 0
        var bytes: Int64 = 0
        for try await body in rows.decode(ByteBuffer.self) {
            dropped += 1
            bytes += Int64(body.readableBytes)
        }
        if bytes > 0 {
            try await client.query("UPDATE tenants SET byte_count = greatest(0, byte_count - \(bytes)) WHERE name = \(tenant)", logger: logger)
        }
        return dropped
    }

    /// The device a token belongs to, or `nil` (unknown or revoked).
    ///
    /// A token this node has served is answered from its memory, without a round trip: every
    /// statement that then serves the device (info, a pull, a push) checks in the same
    /// statement that the token still stands, and refuses it with
    /// ``HubRefusal/revokedToken`` (and forgets it) when it does not. A revocation therefore
    /// takes effect on the next request, on every node, as when each request looked it up.
    func device(token: String) async throws -> HubDevice? {
        let digest = Self.tokenHash(token)
        let metrics = self.metrics.withLock { $0 }
        if let known = tokens.withLock({ $0[digest] }) {
            metrics?.count(.tokenLookups, [("result", "hit")])
            return known
        }
        metrics?.count(.tokenLookups, [("result", "miss")])
        let hash = ByteBuffer(bytes: digest)
        let rows = try await client.query(
            "SELECT tenant_id, name FROM devices WHERE token_hash = \(hash)", logger: logger)
        for try await (tenant, name) in rows.decode((Int64, String).self) {
            let device = HubDevice(tenant: tenant, name: name, tokenHash: digest)
            tokens.withLock { tokens in
                // Bounded: only tokens that exist get here, and a node that knows this many
                // forgets one it knows (an arbitrary one: the dictionary's first), not all of them.
                if tokens.count >= Self.maxRememberedTokens, let first = tokens.keys.first { tokens.removeValue(forKey: first) }
                tokens[digest] = device
            }
            return device
        }
        return nil
    }

    /// The database's connections (every client's) by state, as `pg_stat_activity` shows them,
    /// the states named as in ``HubMetrics/connectionStates``.
    func connectionStates() async throws -> [String: Int] {
        var states: [String: Int] = [:]
        for try await (state, count) in try await client.query(
            "SELECT coalesce(state, ''), count(*) FROM pg_stat_activity WHERE datname = current_database() GROUP BY 1", logger: logger
        ).decode((String, Int64).self) {
            let name = state.replacingOccurrences(of: " (aborted)", with: "_aborted").replacingOccurrences(of: " ", with: "_")
            let known = HubMetrics.connectionStates.contains(name) ? name : "other"
            states[known, default: 0] += Int(count)
        }
        return states
    }

    /// Forgets a token a statement found revoked, and says so.
    func revoked(_ device: HubDevice) -> HubRefusal {
        _ = tokens.withLock { $0.removeValue(forKey: device.tokenHash) }
        return .revokedToken
    }

    static func tokenHash(_ token: String) -> [UInt8] { BearerToken.digest(token) }

    static func validate(name: String, what: String) throws(HubRefusal) {
        guard (1...200).contains(name.utf8.count), name.allSatisfy({ $0.isLetter || $0.isNumber || "._-@".contains($0) }) else {
            throw .invalidName("a \(what) name is 1 to 200 letters, digits and . _ - @")
        }
    }
}

/// 16 random bytes from the system's generator (getrandom(2) on Linux), for a tenant's relay id
/// and epoch: identifiers that must not repeat, not secrets.
private func randomIdentifier() -> [UInt8] {
    var generator = SystemRandomNumberGenerator()
    return (0..<16).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
}
