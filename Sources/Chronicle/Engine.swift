import Foundation
import LMDB
import Logging
import Sodium
import Synchronization

/// A change a caller wants to commit, before it has a sequence, counter or HLC.
struct PendingChange: Sendable {
    var domain: Domain
    var key: String
    var policy: SyncPolicy
    var op: Operation
    var encoding: UInt8
    /// The plaintext payload (sealed inside the transaction when `sealer` is set).
    var payload: [UInt8]
    /// Seals the payload inside the write transaction (secrets, and plain values of encrypted stores).
    var sealer: Keyring? = nil
}

/// An event as committed to the local log.
struct CommittedEvent: Sendable {
    var sequence: UInt64
    var event: Event
}

/// The per-process, per-directory core of a store: one LMDB environment, its
/// databases, and the single serialized writer. Every ``Store`` on the same
/// directory in a process shares one `Engine` (see ``EngineRegistry``).
final class Engine: Sendable {
    static let formatVersion: UInt32 = 1

    let environment: Environment
    let dbs: Databases
    let path: String
    /// This replica's id (shared by every process that opens the store).
    let replica: ReplicaID
    private let committer: Mutex<GroupCommitter<[PendingChange], [CommittedEvent]>?> = Mutex(nil)
    private let flushTask = Mutex<Task<Void, Never>?>(nil)
    let observers = ObserverHub()
    let readCache = Mutex(ReadCache())
    private let chainKeys = Mutex<[KeyID: SecureBytes]>([:])
    let poller = Mutex<Task<Void, Never>?>(nil)

    /// The clock-drift guard in milliseconds (from the configuration of the first store opened on the directory).
    let driftMilliseconds: UInt64

    init(directory: String, configuration: Store.Configuration) throws {
        var options = EnvironmentOptions()
        options.mapSize = configuration.initialMapSize
        driftMilliseconds = UInt64(max(0, configuration.maxClockDrift.components.seconds)) * 1000
        let durability = configuration.durability
        switch durability {
        case .durable: options.syncMode = .durable
        case .noMetaSync: options.syncMode = .noMetaSync
        case .noSync: options.syncMode = .noSync
        }
        let environment = try Environment(path: directory, options: options)
        self.environment = environment
        self.path = directory
        let dbs = try Databases(environment: environment)
        self.dbs = dbs
        replica = try environment.write { txn in try Engine.prepareMeta(txn, dbs, directory: directory) }
        if try environment.read({ txn in try txn.count(dbs.deferred) }) > 0 {
            let drift = driftMilliseconds
            try environment.write { txn in try Engine.promoteDeferred(txn, dbs, now: Engine.nowMilliseconds(), driftMilliseconds: drift) }
        }

        let committer = GroupCommitter<[PendingChange], [CommittedEvent]>(maxGroup: 1024) { [weak self] groups in
            guard let self else { return groups.map { _ in .failure(ChronicleError.storeUnavailable(reason: "store closed")) } }
            return self.commitGroup(groups)
        }
        self.committer.withLock { $0 = committer }

        if case let .noSync(interval) = durability {
            let task = Task.detached { [weak self] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: interval)
                    guard let self else { return }
                    try? self.environment.flush()
                }
            }
            flushTask.withLock { $0 = task }
        }
    }

    deinit {
        flushTask.withLock { $0?.cancel() }
        poller.withLock { $0?.cancel() }
        try? environment.flush()
    }

    /// Creates or checks the `meta` entries; returns the replica id.
    ///
    /// A store whose data file is not the one it was created in (a copied
    /// directory or a restored backup) gets a new replica id and log epoch
    /// before its first write, so two copies never mint the same dots.
    private static func prepareMeta(_ txn: borrowing Transaction, _ dbs: Databases, directory: String) throws -> ReplicaID {
        if let format = try txn.get(dbs.meta, key: MetaKey.format) {
            let found = UInt32(bigEndianBytes: format) ?? UInt32.max
            guard found <= formatVersion else { throw ChronicleError.incompatibleFormat(found: found, supported: formatVersion) }
        } else {
            try txn.put(dbs.meta, key: MetaKey.format, value: formatVersion.bigEndianBytes)
        }
        let home = Self.fileIdentity(directory: directory)
        var replica = try txn.get(dbs.meta, key: MetaKey.replica).flatMap(ReplicaID.init(bytes:))
        if let storedHome = try txn.get(dbs.meta, key: MetaKey.home), storedHome != home {
            replica = nil  // a copy: renew identity and epoch
        }
        guard let replica else {
            let fresh = ReplicaID.random()
            try txn.put(dbs.meta, key: MetaKey.replica, value: fresh.bytes)
            try txn.put(dbs.meta, key: MetaKey.epoch, value: Sodium.randomBytes(16))
            try txn.put(dbs.meta, key: MetaKey.home, value: home)
            // A new replica starts its own counters; the log's sequence and chain carry on.
            try txn.put(dbs.meta, key: MetaKey.counter, value: UInt64(0).bigEndianBytes)
            return fresh
        }
        return replica
    }

    /// The inode of the data file, which changes when the store is copied or restored.
    static func fileIdentity(directory: String) -> [UInt8] {
        let attributes = try? FileManager.default.attributesOfItem(atPath: directory + "/data.mdb")
        let inode = (attributes?[.systemFileNumber] as? NSNumber)?.uint64Value ?? 0
        return inode.bigEndianBytes
    }

    // MARK: - Writing

    /// Commits the changes as one transaction (grouped with concurrent callers).
    /// Returns after the commit is durable (per the store's durability mode).
    func commit(_ changes: [PendingChange]) throws -> [CommittedEvent] {
        guard let committer = committer.withLock({ $0 }) else { throw ChronicleError.storeUnavailable(reason: "store closed") }
        return try committer.submit(changes)
    }

    private func commitGroup(_ groups: [[PendingChange]]) -> [Result<[CommittedEvent], any Error>] {
        let results: [Result<[CommittedEvent], any Error>]
        do {
            let committed = try environment.write { txn in
                var head = try LogHead.read(txn, dbs)
                try Engine.promoteDeferred(txn, dbs, now: Engine.nowMilliseconds(), driftMilliseconds: driftMilliseconds)
                var out: [[CommittedEvent]] = []
                for changes in groups { out.append(try applyLocal(changes, txn, &head)) }
                try head.write(txn, dbs)
                return out
            }
            results = committed.map { .success($0) }
        } catch where groups.count > 1 {
            // One request failed: commit the others on their own, so no caller pays for another's error.
            results = groups.map { changes in
                Result {
                    try environment.write { txn in
                        var head = try LogHead.read(txn, dbs)
                        let out = try applyLocal(changes, txn, &head)
                        try head.write(txn, dbs)
                        return out
                    }
                }
            }
        } catch {
            results = [.failure(error)]
        }
        let events = results.flatMap { (try? $0.get()) ?? [] }
        if !events.isEmpty { observers.publish(events) }
        return results
    }

    private func applyLocal(_ changes: [PendingChange], _ txn: borrowing Transaction, _ head: inout LogHead) throws -> [CommittedEvent] {
        var committed: [CommittedEvent] = []
        committed.reserveCapacity(changes.count)
        let now = Engine.nowMilliseconds()
        for change in changes {
            head.counter += 1
            head.hlc = HLC.next(after: head.hlc, nowMilliseconds: now)
            var event = Event(
                origin: replica, counter: head.counter, hlc: head.hlc, domain: change.domain, op: change.op,
                policy: change.policy, encoding: change.encoding, sealed: false, key: change.key, payload: change.payload)
            if let sealer = change.sealer { try sealer.seal(&event, txn, &head) }
            let sequence = try append(event, txn, &head)
            committed.append(CommittedEvent(sequence: sequence, event: event))
        }
        return committed
    }

    /// Appends an event to the log, records its dot and history, and (unless told not to) applies it to its view.
    func append(_ event: Event, _ txn: borrowing Transaction, _ head: inout LogHead, indexView: Bool = true) throws -> UInt64 {
        head.sequence += 1
        let sequence = head.sequence
        let body = event.encoded()
        let hash = LogRecord.chainHash(previous: head.chain, sequence: sequence, kind: .event, body: body, key: try chainKey(head.chainKeyID))
        try txn.put(dbs.events, key: sequence.bigEndianBytes, value: LogRecord(kind: .event, body: body, hash: hash).encoded(), flags: .append)
        head.chain = hash
        guard try txn.insert(dbs.dots, key: event.dot, value: sequence.bigEndianBytes) else {
            throw ChronicleError.corruptRecord(sequence: sequence, reason: "dot \(event.origin.short):\(event.counter) is already in the log")
        }
        try txn.put(dbs.history, key: HistoryKey.make(domain: event.domain, name: event.key, sequence: sequence), value: [])
        if indexView { try Engine.indexView(event, sequence: sequence, txn, dbs) }
        return sequence
    }

    /// Applies the event to its view when it wins over the current entry (last writer wins).
    static func indexView(_ event: Event, sequence: UInt64, _ txn: borrowing Transaction, _ dbs: Databases) throws {
        let view = dbs.view(event.domain)
        let key = Array(event.key.utf8)
        var current: (hlc: HLC, origin: ReplicaID, counter: UInt64)?
        var malformed = false
        try txn.withValue(view, key: key) { bytes in
            current = ViewEntry.order(of: bytes)
            malformed = current == nil
        }
        if malformed {
            throw ChronicleError.corruptRecord(sequence: sequence, reason: "the view entry of \"\(event.key)\" does not decode (rebuild the views)")
        }
        if let current, !event.wins(over: current) { return }
        try txn.put(view, key: key, value: ViewEntry(event: event, sequence: sequence).encoded())
    }

    /// Wall-clock time in Unix milliseconds.
    static func nowMilliseconds() -> UInt64 {
        UInt64(max(0, Date().timeIntervalSince1970 * 1000))
    }

    // MARK: - Chain key

    /// Installs the chain key derived from data key `id` (by a keyring that holds it).
    func installChainKey(id: KeyID, from dataKey: SecureBytes) {
        guard let subkey = try? KeyDerivation.derive(length: 32, id: 2, context: "chr.chan", from: dataKey) else { return }
        chainKeys.withLock { $0[id] = subkey }
    }

    /// The key of a keyed chain, or `nil` for an unkeyed one.
    func chainKey(_ id: KeyID?) throws -> SecureBytes? {
        guard let id else { return nil }
        guard let key = chainKeys.withLock({ $0[id] }) else {
            throw ChronicleError.keyUnavailable(reason: "this store's log is keyed; open it with its key source to write or verify it")
        }
        return key
    }

    // MARK: - Reading

    /// The view entry of a key, or `nil` when the key was never written.
    func entry(_ domain: Domain, _ name: String) throws -> ViewEntry? {
        try environment.read { txn in
            guard let bytes = try txn.get(dbs.view(domain), key: Array(name.utf8)) else { return nil }
            return try ViewEntry.decoding(bytes, key: name)
        }
    }

    /// Every event of a key, oldest first in the conflict order, with its local sequence.
    func history(_ domain: Domain, _ name: String) throws -> [CommittedEvent] {
        try environment.read { txn in
            let prefix = HistoryKey.prefix(domain: domain, name: name)
            var sequences: [UInt64] = []
            try txn.scan(dbs.history, from: prefix) { key, _ in
                guard key.count == prefix.count + 8, key.starts(with: prefix) else { return false }
                if let sequence = UInt64(bigEndianBytes: Array(key.suffix(8))) { sequences.append(sequence) }
                return true
            }
            let events = try sequences.map { sequence in
                guard let bytes = try txn.get(dbs.events, key: sequence.bigEndianBytes) else {
                    throw ChronicleError.corruptRecord(sequence: sequence, reason: "indexed in history but missing from the log")
                }
                return CommittedEvent(sequence: sequence, event: try LogRecord(decoding: bytes, sequence: sequence).event(sequence: sequence))
            }
            // Oldest first in the conflict order (HLC, origin, counter): the same on every replica,
            // whatever order the events arrived in.
            return events.sorted { $1.event.wins(over: ($0.event.hlc, $0.event.origin, $0.event.counter)) }
        }
    }

    /// The log head as last committed.
    func head() throws -> LogHead {
        try environment.read { txn in try LogHead.read(txn, dbs) }
    }
}
