package import ChronicleFormat
import Foundation
import Dispatch
package import ChronicleLMDB
package import Logging
import ChronicleSodium
package import Synchronization

/// The per-process, per-directory core of a store: one LMDB environment, its
/// databases, and the single serialized writer. Every ``Store`` on the same
/// directory in a process shares one `EventLog` (see ``EventLogRegistry``).
package final class EventLog: Sendable {
    /// The newest store format this build reads: 2 once retention dropped records (gap records).
    package static let formatVersion: UInt32 = 2
    /// The format a new store starts with: readable by builds of format 1 until it holds a gap.
    static let initialFormat: UInt32 = 1

    /// The LMDB environment, its databases and the directory.
    package let storage: LogStorage
    /// Who writes: this replica and this opening.
    package let identity: LogIdentity
    /// This opening's own writes: the committer, the queue of the non-throwing forms, their failures.
    package let local = LocalWrites()
    /// The work that runs beside the log: the periodic flush, the opening's maintenance.
    private let background = LogBackground()
    /// Who listens: this process's observers, and the poller that hears other processes' commits for them.
    package let listeners: LogListeners
    package let readCache = Mutex(ReadCache())
    /// The keys of a keyed hash chain, installed by the keyring that unwraps them.
    package let chainKeys = ChainKeys()
    /// The clock-drift guard (its drift from the configuration of the first store opened on the directory).
    package let driftGuard: DriftGuard
    /// What the configuration of the first store opened on the directory fixed for the log.
    package let settings: LogSettings
    /// Retention's state between transactions: the default, the sweep's schedule, the keys' rules.
    let retention: RetentionBookkeeping

    package var environment: Environment { storage.environment }
    package var dbs: Databases { storage.dbs }
    package var path: String { storage.path }
    /// This replica's id (shared by every process that opens the store): the device's lasting identity.
    package var replica: ReplicaID { identity.replica }
    /// The origin of the events this opening writes (``LogIdentity/writer``).
    package var writer: ReplicaID { identity.writer }
    package var observers: ObserverHub { listeners.observers }
    /// Notices other processes' commits while observers exist.
    package var poller: CommitPoller { listeners.poller }
    /// The largest payload a received event may carry (``LogSettings/maxReceivedPayload``).
    package var maxReceivedPayload: Int { settings.maxReceivedPayload }
    /// Where background work (the drift guard's promotions) reports failures: the first store's logger.
    package var logger: Logger { settings.logger }

    package init(directory: String, configuration: LogOptions) throws {
        // Before the first chain hash, every store's: libsodium asks for it before any use, and it
        // is what picks the BLAKE2b implementation for this CPU (plain stores hashed with the
        // portable one until a key made something else initialize it).
        try Sodium.initialize()
        var options = EnvironmentOptions()
        options.mapSize = configuration.initialMapSize
        settings = LogSettings(maxReceivedPayload: configuration.maxValueSize + Envelope.overhead, logger: configuration.logger)
        let durability = configuration.durability
        switch durability {
        case .durable: break
        case .noMetaSync: options.noMetaSync = true
        case .noSync: options.noSync = true
        }
        let environment = try Environment(path: directory, options: options)
        let observers = ObserverHub()
        listeners = LogListeners(observers: observers, poller: CommitPoller(environment: environment, observers: observers))
        let dbs = try Databases(environment: environment)
        storage = LogStorage(environment: environment, dbs: dbs, path: directory)
        driftGuard = DriftGuard(milliseconds: UnixMilliseconds.of(configuration.maxClockDrift), dbs: dbs)
        if !configuration.salvage {
            try environment.read { txn in try LogMeta.refuseForgottenChainKey(txn, dbs) }  // before anything is written (see below)
        }
        let (replica, defaultRetention) = try environment.write { txn in
            (try LogMeta.prepare(txn, dbs, directory: directory), try LogMeta.defaultRetention(txn, dbs, configured: configuration.retention))
        }
        identity = LogIdentity(replica: replica, writer: ReplicaID.random())
        retention = RetentionBookkeeping(defaultRetention: defaultRetention)

        let committer = GroupCommitter<[PendingChange], [CommittedEvent]>(maxGroup: 1024) { [weak self] groups in
            guard let self else { return groups.map { _ in .failure(ChronicleError.storeUnavailable(reason: "store closed")) } }
            return self.commitGroup(groups)
        }
        local.committer.withLock { $0 = committer }

        if case let .noSync(interval) = durability {
            let task = Task.detached { [weak self] in
                for await _ in Ticks(interval: interval) {
                    guard let environment = self?.environment else { return }
                    _ = try? await BlockingWork.run { try environment.flush() }
                }
            }
            background.flushTask.withLock { $0 = task }
        }
    }

    /// The maintenance an opening does once the store is accepted: rebuilds a history index an
    /// earlier build left, promotes held-back events whose time came, and starts a first pass of
    /// the automatic compaction over every key (garbage of earlier builds or other processes).
    /// The store runs it after its key source checked the head, so an opening that refuses a
    /// damaged store has written nothing; later openings in the process find it done.
    package func startMaintenance() throws {
        let first = background.maintained.withLock { done in
            defer { done = true }
            return !done
        }
        guard first else { return }
        try historyIndex.reindexHistoryIfAnEarlierBuildWrote()
        if try environment.read({ txn in try txn.count(dbs.deferred) }) > 0 { try promoteDue() }
        sweeper.sweepIfDue(noting: [])
    }

    /// Copies the data file of the store in `directory` into the empty directory `target`, as a
    /// consistent snapshot (`mdb_env_copy2`), writing nothing to the store: what a salvage opens
    /// instead of a damaged store. The store must not be open in this process.
    package static func snapshot(directory: String, into target: String) throws {
        let environment = try Environment(path: directory)
        try environment.copy(to: target, compact: false)
    }

    /// Refuses a keyed log whose `meta` lost its chain key (see `LogMeta.refuseForgottenChainKey`):
    /// every opening asks, before it writes anything.
    func refuseForgottenChainKey() throws {
        try environment.read { txn in try LogMeta.refuseForgottenChainKey(txn, dbs) }
    }

    deinit {
        background.flushTask.withLock { $0?.cancel() }  // the poller's and the drift guard's end with them
        try? environment.flush()
        EventLogRegistry.logClosed()  // the registry's weak reference is nil from here on
    }
}

/// Where a log lives: its LMDB environment, the environment's databases, and the directory.
package struct LogStorage: Sendable {
    package let environment: Environment
    package let dbs: Databases
    package let path: String
}

/// Who writes a log: the replica, and this opening of it.
package struct LogIdentity: Sendable {
    /// This replica's id (shared by every process that opens the store): the device's lasting identity.
    package let replica: ReplicaID
    /// The origin of the events this opening writes: drawn at random at every open, so a store
    /// restored from a backup, copied, or rolled back by a power cut never mints an identity
    /// (origin, counter) it minted before, and two processes on one store never share one.
    package let writer: ReplicaID
}

/// Who listens to a log: this process's observers, and the poller that hears other processes'
/// commits for them while any exist.
package struct LogListeners: Sendable {
    package let observers: ObserverHub
    package let poller: CommitPoller
}

/// What the configuration of the first store opened on a directory fixes for its log.
package struct LogSettings: Sendable {
    /// The largest payload a received event may carry: the configuration's `maxValueSize`, and a
    /// seal's overhead. Larger events are quarantined (``QuarantinedItem/Reason/tooLarge``).
    package let maxReceivedPayload: Int
    /// Where background work (the drift guard's promotions) reports failures.
    package let logger: Logger
}

/// The work that runs beside a log: the periodic flush of `.noSync`, and whether the opening's
/// maintenance ran.
final class LogBackground: Sendable {
    let flushTask = Mutex<Task<Void, Never>?>(nil)
    /// Whether the opening's maintenance (``EventLog/startMaintenance()``) ran.
    let maintained = Mutex(false)
}
