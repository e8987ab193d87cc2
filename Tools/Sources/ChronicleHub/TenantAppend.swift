@_spi(Wire) import ChronicleFormat
import NIOCore
import PostgresNIO
import Synchronization

/// A tenant's pushes appended to its log: the node's turns (`AppendQueue`), the decision on each push against quotas, and the writes.
struct TenantAppend: Sendable {
    let database: HubDatabase

    private var logger: Logger { database.logger }
}

extension HubDatabase {
    var appends: TenantAppend { TenantAppend(database: self) }
}

extension TenantAppend {
    /// The most pushes one transaction commits together.
    static let maxPushesPerCommit = 64
    /// About the most body bytes one transaction commits together (the first push always goes,
    /// whatever its size).
    static let maxBytesPerCommit = 8 << 20

    /// Appends a pushed range's new items to the tenant's log: keys the tenant has not seen,
    /// events whose identity it has not stored (in range order); quotas checked before anything
    /// is written. Notifies every node.
    ///
    /// A tenant's appends take turns on this node. The push whose turn it is commits the pushes
    /// waiting behind it in the same transaction, each in arrival order and with its own
    /// receipt or refusal, as if each had committed alone: one lock, lookup and commit for many
    /// devices instead of one each. A database failure fails every push of that transaction
    /// (each device retries); nothing of it is written.
    ///
    /// A push that names its `filter` moves the device's push mark for the range's log and that
    /// filter (``PushMarks``) in the same transaction.
    func append(_ body: [UInt8], filter: RangeFilter? = nil, device: HubDevice) async throws -> RangeReceipt {
        // A range that carries nothing (a device that pulled and had nothing to push) only moves
        // its mark: no turn, no tenant lock, no quota.
        if let filter, body.count <= Self.maxMarkOnlyBody, let range = try? RelayRange(decoding: body), range.events.isEmpty, range.keys.isEmpty {
            return try await moveMark(range, filter: filter, device: device)
        }
        let own = AppendQueue.Push(body: body, device: device, filter: filter)
        switch await database.appendQueue.enqueue(own) {
        case let .done(result):
            return try result.get()
        case .lead:
            let others = database.appendQueue.take(device.tenant, budget: Self.maxBytesPerCommit - body.count, count: Self.maxPushesPerCommit - 1)
            let pushes = [own] + others.map(\.push)
            // In a task of its own: a leader's request cancelled (its client gone) must not
            // cancel the other devices' pushes it carries.
            let (results, trimDue) = await Task { await self.commit(pushes, tenant: device.tenant) }.value
            // The trim starts before any push it follows is answered.
            if trimDue { database.startTrim(tenant: device.tenant) }
            for (waiting, result) in zip(others, results.dropFirst()) { waiting.continuation.resume(returning: .done(result)) }
            database.appendQueue.finish(device.tenant)
            // `commit` returns one result per push, in order, and `pushes` starts with this one.
            return try results[0].get()
        }
    }

    /// The largest body looked at for a range that carries nothing (an empty range of version 2
    /// takes 161 bytes): a larger one is decoded in the tenant's turn, once.
    static let maxMarkOnlyBody = 512

    /// Moves the device's mark over a range that carries nothing, in a short transaction of its
    /// own: the tenant's row is not locked, so no append waits for it. The device's row is
    /// updated first (its token checked, `last_seen` set): that lock comes before any mark, as an
    /// ordinary push's (its `seen` update) does, so a device's mark writes take turns and never
    /// wait on each other in opposite orders; a revocation waits for it.
    private func moveMark(_ range: RelayRange, filter: RangeFilter, device: HubDevice) async throws -> RangeReceipt {
        var marks = PushMarks()
        marks.add(device: device.name, range: range, filter: filter)
        let hash = ByteBuffer(bytes: device.tokenHash)
        let moved = try await database.transaction { connection -> Bool in
            var stands = false
            for try await _ in try await connection.query(
                "UPDATE devices SET last_seen = now() WHERE tenant_id = \(device.tenant) AND token_hash = \(hash) RETURNING 1", logger: logger
            ).decode(Int32.self) { stands = true }
            guard stands else { return false }
            try await marks.write(tenant: device.tenant, on: connection, logger: logger)
            return true
        }
        guard moved else { throw database.revoked(device) }
        return RangeReceipt()
    }

    /// One result per push, in order: all pushes fail alike when the transaction does. The
    /// bodies are decoded before the transaction, so not under the tenant's row lock.
    /// Also whether the tenant is due a trim (its count of events appended since the last one
    /// passed the threshold, or a push met its quota).
    private func commit(_ pushes: [AppendQueue.Push], tenant: Int64) async -> (results: [Result<RangeReceipt, any Error>], trimDue: Bool) {
        let ranges: [Result<RelayRange, any Error>] = pushes.map { push in
            Result { () throws(ChronicleError) in try RelayRange(decoding: push.body) }.mapError { $0 }
        }
        do {
            return try await database.transaction { connection in try await self.append(pushes, ranges, tenant: tenant, on: connection) }
        } catch {
            return (pushes.map { _ in .failure(error) }, false)
        }
    }

    /// The tenant's row and counts, read under its row lock.
    private struct TenantState {
        var head: Int64
        var chain: [UInt8]
        var events: Int64
        var bytes: Int64
        var maxEvents: Int64?
        var maxBytes: Int64?
        /// Events appended since a node last started a trim (``HubDatabase/trim(tenant:)``).
        var appendedSinceTrim: Int64
        /// Wrapped keys stored, in all and per device (read only when a push brings keys).
        var keys: Int64 = 0
        var keysByDevice: [String: Int64] = [:]
    }

    /// What the transaction writes, pushes in order.
    private struct Writes {
        var positions: [Int64] = [], writers: [ByteBuffer] = [], counters: [Int64] = [], policies: [Int16] = []
        var sizes: [Int32] = [], bodies: [ByteBuffer] = [], chains: [ByteBuffer] = []
        var keys: [ByteBuffer] = [], hlcs: [Int64] = [], devices: [String] = []
        /// Events a device pushed that the tenant stores already (another device pushed them
        /// first): each row counts for this device's retention too.
        var vouchWriters: [ByteBuffer] = [], vouchCounters: [Int64] = [], vouchBodies: [ByteBuffer] = [], vouchDevices: [String] = []
        var keyDigests: [ByteBuffer] = [], keyBodies: [ByteBuffer] = [], keyIDs: [ByteBuffer] = [], keyDevices: [String] = []
        var addedBytes: Int64 = 0
        /// Events appended per device (every device that pushed, with 0 when nothing was new).
        var pushedByDevice: [String: Int64] = [:]
        /// How far each accepted push that named its filter carries its log.
        var marks = PushMarks()
    }

    /// Decides each push against the tenant's state as the pushes before it left it, then
    /// writes what was accepted in one statement (two when keys come).
    private func append(
        _ pushes: [AppendQueue.Push], _ decoded: [Result<RelayRange, any Error>], tenant id: Int64, on connection: PostgresConnection
    ) async throws -> (results: [Result<RangeReceipt, any Error>], trimDue: Bool) {
        guard var tenant = try await lockTenant(id, on: connection) else { return (pushes.map { .failure(database.revoked($0.device)) }, false) }
        let (ranges, knownBodies) = try await checkStanding(pushes, decoded, tenant: id, on: connection)
        var known = knownBodies
        // Wrapped keys named by an event of their push (a record no event names is never sent to
        // anyone, so it is not kept), and which of them the tenant has stored.
        let namedKeys = ranges.map { result -> [(digest: [UInt8], key: RelayRange.Key)] in
            guard case let .success(range) = result else { return [] }
            let named = Set(range.events.flatMap(\.keyIDs))
            return range.keys.filter { named.contains($0.id) }.map { (digest: $0.digest, key: $0) }
        }
        var storedDigests = try await readKeys(Set(namedKeys.joined().map(\.digest)), into: &tenant, tenant: id, on: connection)

        var writes = Writes()
        var results: [Result<RangeReceipt, any Error>] = []
        var keysOfPush: [[[UInt8]]] = []  // the digests each accepted push stores
        for (index, push) in pushes.enumerated() {
            let before = writes.keyDigests.count
            results.append(ranges[index].flatMap { range in
                Result {
                    let receipt = try Self.decide(
                        range, keys: namedKeys[index], device: push.device.name, storedDigests: &storedDigests, tenant: &tenant, known: &known,
                        writes: &writes)
                    if let filter = push.filter { writes.marks.add(device: push.device.name, range: range, filter: filter) }
                    return receipt
                }
            })
            keysOfPush.append(writes.keyDigests[before...].map { Array(buffer: $0) })
        }
        let storedKeys = try await storeKeys(writes, tenant: id, on: connection)
        // A trim is due once enough was appended since the last (whichever node appended it), and
        // at once when a push met the quota: the device's retry then finds the garbage gone.
        let metQuota = results.contains { result in
            if case let .failure(error) = result, let refusal = error as? HubRefusal, case .quotaExceeded = refusal { true } else { false }
        }
        let trimDue = metQuota || tenant.appendedSinceTrim + Int64(writes.positions.count) >= HubDatabase.trimThreshold
        try await write(writes, tenant: tenant, id: id, trimDue: trimDue, notify: !writes.positions.isEmpty || !storedKeys.isEmpty, on: connection)
        try await writes.marks.write(tenant: id, on: connection, logger: logger)
        let receipts = zip(results, keysOfPush).map { result, digests in
            result.map { receipt in
                var receipt = receipt
                receipt.keys = digests.filter { storedKeys.contains($0) }.count
                return receipt
            }
        }
        return (receipts, trimDue)
    }

    /// Takes the tenant's row lock, which serializes its appends across nodes (positions are
    /// numbered under it), and reads its state; `nil` when the tenant is gone.
    private func lockTenant(_ id: Int64, on connection: PostgresConnection) async throws -> TenantState? {
        var tenant: TenantState?
        for try await (head, chain, events, bytes, maxEvents, maxBytes, appended) in try await connection.query(
            """
            SELECT head, chain, event_count, byte_count, max_events, max_bytes, appended_since_trim
            FROM tenants WHERE id = \(id) FOR UPDATE
            """, logger: logger
        ).decode((Int64, ByteBuffer, Int64, Int64, Int64?, Int64?, Int64).self) {
            tenant = TenantState(
                head: head, chain: Array(buffer: chain), events: events, bytes: bytes, maxEvents: maxEvents, maxBytes: maxBytes,
                appendedSinceTrim: appended)
        }
        return tenant
    }

    /// In a snapshot taken once the lock is held (so a revocation committed while this waited
    /// for it counts): which of the pushes' tokens stand, and the bodies stored already per
    /// identity (pushed before, or by another device or node). The standing devices' rows are
    /// share-locked until the commit: a revocation waits for this push instead of committing
    /// between this check and the push's writes. A push whose token was revoked since its node
    /// looked it up is refused, whatever it holds.
    private func checkStanding(
        _ pushes: [AppendQueue.Push], _ decoded: [Result<RelayRange, any Error>], tenant id: Int64, on connection: PostgresConnection
    ) async throws -> (ranges: [Result<RelayRange, any Error>], known: [IdentityKey: [[UInt8]]]) {
        let hashes = Array(Set(pushes.map(\.device.tokenHash))).map { ByteBuffer(bytes: $0) }
        let events = decoded.compactMap { try? $0.get() }.flatMap(\.events)
        let writers = events.map { ByteBuffer(bytes: $0.writer) }
        let counters = events.map { Int64($0.counter) }
        var standing: Set<[UInt8]> = []
        var known: [IdentityKey: [[UInt8]]] = [:]
        for try await (writer, counter, body, tokens) in try await connection.execute(
            PushCheckStatement(tenant: id, tokenHashes: hashes, writers: writers, counters: counters), logger: logger
        ) {
            if let tokens { standing.formUnion(tokens.map { Array(buffer: $0) }) }
            if let writer, let counter, let body {
                known[IdentityKey(writer: Array(buffer: writer), counter: counter), default: []].append(Array(buffer: body))
            }
        }
        let ranges: [Result<RelayRange, any Error>] = zip(pushes, decoded).map { push, range in
            standing.contains(push.device.tokenHash) ? range : .failure(database.revoked(push.device))
        }
        return (ranges, known)
    }

    /// When pushes bring keys: counts the tenant's stored keys (in all and per device) into
    /// `tenant`, and returns which of `pushed` (digests) it stores already.
    private func readKeys(
        _ pushed: Set<[UInt8]>, into tenant: inout TenantState, tenant id: Int64, on connection: PostgresConnection
    ) async throws -> Set<[UInt8]> {
        guard !pushed.isEmpty else { return [] }
        for try await (device, count) in try await connection.query(
            "SELECT device, count(*) FROM wrapped_keys WHERE tenant_id = \(id) GROUP BY device", logger: logger
        ).decode((String?, Int64).self) {
            tenant.keys += count
            if let device { tenant.keysByDevice[device] = count }
        }
        var stored: Set<[UInt8]> = []
        let digests = pushed.map { ByteBuffer(bytes: $0) }
        for try await digest in try await connection.query(
            "SELECT digest FROM wrapped_keys WHERE tenant_id = \(id) AND digest = ANY(\(digests)::bytea[])", logger: logger
        ).decode(ByteBuffer.self) { stored.insert(Array(buffer: digest)) }
        return stored
    }

    /// Stores the accepted keys in one statement (not one round trip per key under the
    /// tenant's lock); returns the digests this commit stored (another node may have first).
    private func storeKeys(_ writes: Writes, tenant id: Int64, on connection: PostgresConnection) async throws -> Set<[UInt8]> {
        guard !writes.keyDigests.isEmpty else { return [] }
        var stored: Set<[UInt8]> = []
        let rows = try await connection.query(
            """
            INSERT INTO wrapped_keys (tenant_id, digest, body, key_id, device)
            SELECT \(id), * FROM unnest(\(writes.keyDigests)::bytea[], \(writes.keyBodies)::bytea[], \(writes.keyIDs)::bytea[], \(writes.keyDevices)::text[])
            ON CONFLICT DO NOTHING RETURNING digest
            """, logger: logger)
        for try await digest in rows.decode(ByteBuffer.self) { stored.insert(Array(buffer: digest)) }
        return stored
    }

    /// The events, the tenant's head and counts, the devices' and the other nodes' wake-up in
    /// one round trip (``PushWriteStatement``).
    private func write(_ writes: Writes, tenant: TenantState, id: Int64, trimDue: Bool, notify: Bool, on connection: PostgresConnection) async throws {
        let appendedSinceTrim = tenant.appendedSinceTrim + Int64(writes.positions.count)
        let changed = !writes.positions.isEmpty || writes.addedBytes > 0 || trimDue
        let (devices, pushedCounts) = (Array(writes.pushedByDevice.keys), Array(writes.pushedByDevice.values))
        for try await _ in try await connection.execute(
            PushWriteStatement(
                tenant: id, positions: writes.positions, writers: writes.writers, counters: writes.counters, policies: writes.policies,
                sizes: writes.sizes, bodies: writes.bodies, chains: writes.chains, keys: writes.keys, hlcs: writes.hlcs,
                devices: writes.devices, head: tenant.head, chain: ByteBuffer(bytes: tenant.chain),
                addedEvents: Int64(writes.positions.count), addedBytes: writes.addedBytes,
                appendedSinceTrim: trimDue ? 0 : appendedSinceTrim, vouchWriters: writes.vouchWriters, vouchCounters: writes.vouchCounters,
                vouchBodies: writes.vouchBodies, vouchDevices: writes.vouchDevices, changed: changed, pushers: devices,
                pushedCounts: pushedCounts, channel: HubDatabase.channel, payload: String(id), notify: notify),
            logger: logger) {}
    }

    /// Refuses a push that would take the device or the tenant over a quota: keys (at most
    /// `HubDatabase.maxKeysPerDevice` per device and `HubDatabase.maxKeys` per tenant), events, bytes.
    private static func checkQuotas(
        _ tenant: TenantState, device: String, storedByDevice: Int64, newKeys: Int, events appended: Int64, bytes addedBytes: Int64
    ) throws {
        if newKeys > 0, storedByDevice + Int64(newKeys) > HubDatabase.maxKeysPerDevice {
            throw HubRefusal.quotaExceeded(
                "device \(device) stored \(storedByDevice) wrapped keys and this push brings \(newKeys) more: "
                    + "a device stores at most \(HubDatabase.maxKeysPerDevice) (the operator frees them with `chronicle hub keys drop`)", quota: "device_keys")
        }
        if newKeys > 0, tenant.keys + Int64(newKeys) > HubDatabase.maxKeys {
            throw HubRefusal.quotaExceeded(
                "the tenant holds \(tenant.keys) wrapped keys and this push brings \(newKeys) more: at most \(HubDatabase.maxKeys) are kept "
                    + "(the operator frees them with `chronicle hub keys drop`)", quota: "tenant_keys")
        }
        if let maxEvents = tenant.maxEvents, tenant.events + appended > maxEvents {
            throw HubRefusal.quotaExceeded(
                "the tenant's quota of \(maxEvents) events is reached (\(tenant.events) stored, \(appended) more pushed): ask the operator", quota: "events")
        }
        if let maxBytes = tenant.maxBytes, tenant.bytes + addedBytes > maxBytes {
            throw HubRefusal.quotaExceeded(
                "the tenant's quota of \(maxBytes) bytes is reached (\(tenant.bytes) stored, \(addedBytes) more pushed): ask the operator", quota: "bytes")
        }
    }

    /// One push's receipt, its items added to `writes` and the tenant's state (and `known`,
    /// `storedDigests`) advanced; or a refusal (over a quota), decided before anything of the
    /// push is added, so a refused push leaves no trace for the next.
    private static func decide(
        _ range: RelayRange, keys pushedKeys: [(digest: [UInt8], key: RelayRange.Key)], device: String, storedDigests: inout Set<[UInt8]>,
        tenant: inout TenantState, known: inout [IdentityKey: [[UInt8]]], writes: inout Writes
    ) throws -> RangeReceipt {
        var receipt = RangeReceipt()
        receipt.received = range.events.count
        // The same identity with the same bytes is stored once; with other bytes it is kept too
        // (a relay verifies nothing: members quarantine the one that fails).
        var fresh: [RelayRange.Event] = []
        var added: [IdentityKey: [[UInt8]]] = [:]
        var addedBytes: Int64 = 0
        for event in range.events {
            let identity = IdentityKey(writer: event.writer, counter: Int64(event.counter))
            guard known[identity]?.contains(event.bytes) != true, added[identity]?.contains(event.bytes) != true else {
                receipt.duplicates += 1
                if known[identity]?.contains(event.bytes) == true {
                    writes.vouchWriters.append(ByteBuffer(bytes: event.writer))
                    writes.vouchCounters.append(Int64(event.counter))
                    writes.vouchBodies.append(ByteBuffer(bytes: event.bytes))
                    writes.vouchDevices.append(device)
                }
                continue
            }
            added[identity, default: []].append(event.bytes)
            fresh.append(event)
            addedBytes += Int64(event.bytes.count)
        }
        // Keys the tenant has not stored (nor an earlier push of this commit): they count against
        // the byte quota, at most `HubDatabase.maxKeysPerDevice` per device and `HubDatabase.maxKeys` per tenant.
        var digests: [[UInt8]: RelayRange.Key] = [:]
        for (digest, key) in pushedKeys where !storedDigests.contains(digest) { digests[digest] = key }
        let storedByDevice = tenant.keysByDevice[device] ?? 0
        addedBytes += digests.values.reduce(0) { $0 + Int64($1.bytes.count) }
        try checkQuotas(tenant, device: device, storedByDevice: storedByDevice, newKeys: digests.count, events: Int64(fresh.count), bytes: addedBytes)
        let appended = Int64(fresh.count)

        // Accepted: positions and chain hashes, in range order.
        for event in fresh {
            tenant.head += 1
            tenant.chain = RelayRange.chainHash(previous: tenant.chain, position: UInt64(tenant.head), item: event.bytes)
            writes.positions.append(tenant.head)
            writes.writers.append(ByteBuffer(bytes: event.writer))
            writes.counters.append(Int64(event.counter))
            writes.policies.append(event.policy.map(Int16.init) ?? -1)
            writes.sizes.append(Int32(clamping: event.payloadSize))
            writes.bodies.append(ByteBuffer(bytes: event.bytes))
            writes.chains.append(ByteBuffer(bytes: tenant.chain))
            writes.keys.append(ByteBuffer(bytes: event.key ?? []))  // empty: a newer format (NULL)
            // Past Int64 (a clock a carrier set beyond year 10,000,000): the greatest, for ordering.
            writes.hlcs.append(Int64(clamping: event.hlc ?? 0))
            writes.devices.append(device)
        }
        for (identity, bodies) in added { known[identity, default: []] += bodies }
        for (digest, key) in digests.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
            writes.keyDigests.append(ByteBuffer(bytes: digest))
            writes.keyBodies.append(ByteBuffer(bytes: key.bytes))
            writes.keyIDs.append(ByteBuffer(bytes: key.id))
            writes.keyDevices.append(device)
            storedDigests.insert(digest)
        }
        tenant.keys += Int64(digests.count)
        tenant.keysByDevice[device] = storedByDevice + Int64(digests.count)
        tenant.events += appended
        tenant.bytes += addedBytes
        writes.addedBytes += addedBytes
        writes.pushedByDevice[device, default: 0] += appended
        receipt.applied = Int(appended)
        return receipt
    }
}
