import ChronicleFormat
import ChronicleLog
import Foundation
import Logging
#if ServiceLifecycle
public import ServiceLifecycle
#endif

/// Replicates a store's log with peers: manual ``sync()`` and automatic-small mode.
///
/// ```swift
/// let replicator = Replicator(store: store, peers: [.store(other), .directory(shared)])
/// let report = try await replicator.sync()   // push and pull every eligible event, both ways
/// await replicator.start()                   // push small changes as they commit, pull periodically
/// ```
///
/// Ranges move in bounded batches; each is applied in one durable transaction
/// together with its checkpoint, so an interrupted sync resumes where it
/// stopped, and a re-sent batch changes nothing.
public actor Replicator {
    /// Tuning for a replicator.
    public struct Configuration: Sendable {
        /// The largest payload pushed automatically (larger `.automaticSmall` values wait for `sync()`). Default 100 KiB.
        public var automaticPayloadLimit: Int = 100 * 1024
        /// How often automatic mode pulls. Default 5 s.
        public var pullInterval: Duration = .seconds(5)
        /// How long automatic mode gathers commits before pushing. Default 20 ms.
        public var pushDelay: Duration = .milliseconds(20)
        /// The longest wait between retries after failures. Default 60 s.
        public var maxBackoff: Duration = .seconds(60)
        /// Events per batch, both ways (peers cap pulls at 4,096). Default 1,024.
        public var batchEvents: Int = 1024
        /// Payload bytes per batch (a larger single event travels alone). Default 1 MiB.
        public var batchBytes: Int = 1 << 20
        /// The most batches one `sync()` pulls from one peer (a peer that never reaches its head
        /// cannot keep a sync running); the next sync resumes where it stopped. Default 65,536.
        public var maxPullBatches: Int = 65_536
        /// Called after every batch of a `sync()` with the peer's name and the events moved so far.
        public var progress: (@Sendable (_ peer: String, _ events: Int) -> Void)?

        /// Creates the default configuration.
        public init() {}
    }

    /// The store being replicated.
    public let store: Store
    /// What the replicator reaches of the store (never its log directly).
    let replicaLog: ReplicaLog
    /// The peers.
    public let peers: [Peer]
    /// The configuration.
    public let configuration: Configuration
    /// The report of the last completed `sync()`, including peers that failed.
    public private(set) var lastReport = SyncReport()
    /// The last error of automatic mode, if its last round failed.
    public private(set) var lastAutomaticError: ChronicleError?

    private var worker: Task<Void, Never>?
    private var ticker: Task<Void, Never>?
    private var observerID: Int?
    private var watchers: [Task<Void, Never>] = []
    private var failures: [Int: (count: Int, retryAt: ContinuousClock.Instant)] = [:]
    /// The active peers (stores, hubs) by the replica id they reported: two peers of one id share
    /// checkpoints, which is right for two nodes of one hub and wrong for a mailbox that claims
    /// the id of a store or a hub. Such a mailbox is refused while it claims it, whichever peer
    /// comes first (anyone who can write the folder can set its id).
    private var activePeers: [ReplicaID: String] = [:]

    /// Creates a replicator; nothing moves until ``sync()`` or ``start()``.
    public init(store: Store, peers: [Peer], configuration: Configuration = .init()) {
        self.store = store
        replicaLog = ReplicaLog(store: store)
        self.peers = peers
        self.configuration = configuration
    }

    // MARK: - Manual sync

    /// Pushes and pulls every eligible event (`.manual` and `.automaticSmall`) with every peer.
    ///
    /// - Returns: what moved, per peer.
    /// - Throws: ``ChronicleError/syncFailed(peer:reason:)`` for the first peer
    ///   that failed, after trying them all; what was acknowledged stays.
    @discardableResult
    public func sync() async throws(ChronicleError) -> SyncReport {
        var report = SyncReport()
        var firstError: ChronicleError?
        for peer in peers {
            do {
                report.peers.append(try await exchange(with: peer, filter: .syncable))
            } catch {
                store.configuration.logger.warning("chronicle: sync failed", metadata: ["peer": "\(peer.name)", "error": "\(error)"])
                if firstError == nil { firstError = Self.failure(error, peer: peer) }
            }
        }
        lastReport = report
        if let firstError { throw firstError }
        return report
    }

    /// `error` as a failed sync with `peer`, said once (a transport may have said it already).
    static func failure(_ error: any Error, peer: Peer) -> ChronicleError {
        if let error = error as? ChronicleError, case .syncFailed = error { return error }
        return .syncFailed(peer: peer.name, reason: ChronicleError.wrap(error).description)
    }

    /// Pulls then pushes one peer's ranges for `filter`, batch by batch.
    private func exchange(with peer: Peer, filter: RangeFilter) async throws -> SyncReport.PeerReport {
        var report = SyncReport.PeerReport(peer: peer.name)
        let remote = try await peer.transport.info()
        guard remote.protocolVersion == EventRange.protocolVersion else {
            throw ChronicleError.malformedInput("the peer speaks range protocol \(remote.protocolVersion); this build speaks \(EventRange.protocolVersion)")
        }
        let log = replicaLog
        let local = try await BlockingWork.run { try log.info() }
        if remote.replicaID == local.replicaID, let writer = remote.writer {
            // The same opening is this store itself: nothing to do. Another store claiming this
            // replica's id (a copy of this store) must not silently move nothing. A passive peer
            // (a mailbox, whose id anyone who can write the folder can set) is synced as usual.
            guard writer == local.writer else {
                throw ChronicleError.malformedInput("the peer claims this replica's own id \(local.replicaID.short): a copy of this store?")
            }
            return report
        }
        let passive = remote.writer == nil && !remote.keepsLog
        if !passive {
            activePeers[remote.replicaID] = peer.name
        } else if let other = activePeers[remote.replicaID], other != peer.name {
            throw ChronicleError.malformedInput(
                "the mailbox \(peer.name) claims the replica id \(remote.replicaID.short) of the peer \(other): their checkpoints would mix "
                    + "(a folder copied from another peer?): remove the folder's mailbox.id to give it an id of its own")
        }
        let exchange = Exchange(peer: peer, remote: remote, local: local, filter: filter, source: "peer \(peer.name)")
        var state = try await pull(exchange, into: &report)
        await askForLostEvents(from: peer, source: exchange.source, into: &report)
        try await push(exchange, after: &state, into: &report)
        return report
    }

    /// One exchange with one peer: who is on each side, and what moves.
    private struct Exchange: Sendable {
        let peer: Peer
        let remote: ReplicaInfo
        let local: ReplicaInfo
        let filter: RangeFilter
        /// How items set aside from this peer are labelled in the quarantine.
        let source: String
    }

    /// Pull: the remote's log after our checkpoint for (remote, its epoch, pull, filter).
    /// Bounded, whatever the peer answers: a pull ends at the head the peer named before it
    /// began (later changes wait for the next sync), starts over at most a few times, and runs
    /// at most `maxPullBatches` batches. Returns the state the push goes on from.
    private func pull(_ exchange: Exchange, into report: inout SyncReport.PeerReport) async throws -> ExchangeState {
        let (log, peer, remote, filter) = (replicaLog, exchange.peer, exchange.remote, exchange.filter)
        let pullKey = CheckpointKey(peer: remote.replicaID, epoch: remote.epoch, direction: .pull, filter: filter)
        let checkpoint = try await BlockingWork.run { try log.pullCheckpoint(pullKey) }
        var state = ExchangeState(
            checkpoint: checkpoint, remoteHead: remote.head, passive: remote.writer == nil && !remote.keepsLog,
            maxPullBatches: configuration.maxPullBatches)
        // Only this opening's own events are left out: a replica rolled back to an older copy
        // of its files draws a new writer, so it gets back everything it had sent before.
        while true {
            try Task.checkCancellation()
            try state.beginPullBatch()
            let range = try EventRange(
                decoding: Array(
                    try await peer.transport.pull(
                        after: state.after, filter: filter, excludingOrigin: exchange.local.writer, maxEvents: configuration.batchEvents)))
            let verdict = try state.judge(
                source: range.source, epoch: range.epoch, expectedSource: remote.replicaID, expectedEpoch: remote.epoch,
                rangeAfter: range.after, afterChain: range.afterChain, upTo: range.upTo)
            if verdict == .startOver { continue }
            let (receipt, received) = try await BlockingWork.run {
                try log.importPulled(range, checkpoint: (pullKey, range.upTo, range.upToChain), source: exchange.source)
            }
            report.pulled.add(receipt)
            // What this peer just sent is never pushed back to it: it holds all of it.
            state.received(received)
            report.batches += 1
            configuration.progress?(peer.name, report.pulled.received + report.sent)
            if !state.advance(upTo: range.upTo, upToChain: range.upToChain, reachesHead: range.reachesHead) { break }
        }
        return state
    }

    /// Push: our log after our checkpoint for (remote, our epoch, push, filter), from where the
    /// checks of `state` say (the remote or a mailbox that went back gets everything again).
    private func push(_ exchange: Exchange, after state: inout ExchangeState, into report: inout SyncReport.PeerReport) async throws {
        let (log, peer, filter) = (replicaLog, exchange.peer, exchange.filter)
        let pushKey = CheckpointKey(peer: exchange.remote.replicaID, epoch: exchange.local.epoch, direction: .push, filter: filter)
        let pushCheckpoint = try await BlockingWork.run { try log.pushCheckpoint(pushKey) }
        // After our last push the remote's log reached a head with a chain hash there. If it has
        // gone back since (a relay restored from a backup), what we pushed may be lost: push again.
        // A peer that keeps push marks (the hub) says how far it holds what this log pushed with
        // this filter: behind the checkpoint, it lost the rest (restored), and only that goes again.
        let pushMark = exchange.remote.pushMarkWithChain(of: exchange.local.replicaID, epoch: exchange.local.epoch, filter: filter)
        state.pushMarkRead(pushMark?.upTo)
        state.pushCheckpointRead(pushCheckpoint)
        if let position = state.probePosition(for: pushCheckpoint) {
            let probe = try EventRange(decoding: Array(try await peer.transport.pull(after: position, filter: filter, excludingOrigin: nil, maxEvents: 1)))
            state.probed(rangeAfter: probe.after, afterChain: probe.afterChain, checkpoint: pushCheckpoint)
        }
        // A mailbox restored from an older backup lost what we pushed after that backup: the
        // newest file we pushed there is gone. (Pruning keeps recent files, so it rarely looks alike;
        // when it does, pushing everything again costs a large file, never an event.)
        let mailbox = peer.transport as? any FileMarkingTransport
        if let mark = state.mailboxMarkToCheck(pushCheckpoint), let mailbox {
            if try await !BlockingWork.run({ mailbox.holdsFile(digest: mark) }) { state.mailboxLostMark() }
        }
        let decided = state
        var sent = try await BlockingWork.run { () throws -> UInt64 in
            // Our own log under the checkpoint changed (compacted, restored): push from the start.
            let chain = pushCheckpoint.sequence > 0 ? pushCheckpoint.chain : nil
            let matches = try chain.map { try log.chainMatches(at: pushCheckpoint.sequence, $0) } ?? true
            // Our log under the peer's push mark is not the one pushed there (this store was
            // restored from its own backup and wrote again): push from the start.
            // Where the mark would set the start (below the checkpoint), a mark inside a gap of ours
            // cannot be compared, so it does not count as ours.
            var matchesMark = true
            if let pushMark, pushMark.upTo > 0, let markChain = pushMark.chain {
                matchesMark = try log.chainMatches(at: pushMark.upTo, markChain, insideGapMatches: pushMark.upTo >= pushCheckpoint.sequence)
            }
            return decided.pushStart(checkpoint: pushCheckpoint, localChainMatches: matches, localChainMatchesMark: matchesMark)
        }
        var pushedAny = false
        // Where the peer's push mark stands: a range past it that carries nothing (all of it
        // pulled from this peer, or left out) is pushed anyway, so the mark covers it and the
        // next exchange does not push back what this one pulled.
        var markedThrough = decided.pushMark
        let (batchEvents, batchBytes, excluded) = (configuration.batchEvents, configuration.batchBytes, exchange.remote.writer)
        while true {
            try Task.checkCancellation()
            let after = sent
            let range = try await BlockingWork.run {
                try log.export(after: after, filter: filter, excluding: excluded, maxEvents: batchEvents, maxBytes: batchBytes, skipping: decided.skipping)
            }
            let carries = !range.events.isEmpty || !range.opaque.isEmpty
            if carries || markedThrough.map({ range.upTo > $0 }) == true {
                let receipt = try await peer.transport.push(Data(range.encoded()), filter: filter)
                if markedThrough != nil { markedThrough = range.upTo }
                if carries {
                    pushedAny = true
                    report.pushed.add(receipt)
                    report.sent += range.events.count + range.opaque.count
                    report.batches += 1
                    configuration.progress?(peer.name, report.pulled.received + report.sent)
                }
            }
            if range.upTo > sent {
                // The remote's mark (its head, or a mailbox's file) stays: a restore between two
                // batches is still noticed by it.
                try await BlockingWork.run {
                    try log.updateCheckpoint(pushKey) { value in
                        value.sequence = range.upTo
                        value.chain = range.upToChain
                    }
                }
            }
            if range.reachesHead || range.upTo <= sent { break }
            sent = range.upTo
        }
        // The mark of what this device relies on the mailbox holding. If the mailbox loses it
        // (restored from an older backup), the next sync pushes everything.
        let (setMark, own) = state.mailboxMark(pushedAny: pushedAny)
        if setMark, let mailbox {
            let replicaID = exchange.local.replicaID
            if let digest = try await BlockingWork.run({ mailbox.newestFileDigest(from: own ? replicaID : nil) }) {
                try await BlockingWork.run {
                    try log.updateCheckpoint(pushKey) { mark in
                        mark.remoteHead = 0
                        mark.remoteChain = digest
                    }
                }
            }
        }
        if state.marksRemoteAfterPush(pushedAny: pushedAny, filter: filter) { try await markRemote(exchange, pushKey: pushKey) }
    }

    /// Remembers where the remote's log stood after our push, to notice if it ever goes back.
    private func markRemote(_ exchange: Exchange, pushKey: CheckpointKey) async throws {
        let (log, transport) = (replicaLog, exchange.peer.transport)
        let after = try await transport.info()
        let probe = try EventRange(decoding: Array(try await transport.pull(after: after.head, filter: exchange.filter, excludingOrigin: nil, maxEvents: 1)))
        guard probe.after == after.head, after.epoch == exchange.remote.epoch else { return }
        try await BlockingWork.run {
            try log.updateCheckpoint(pushKey) { value in
                value.remoteHead = after.head
                value.remoteChain = probe.afterChain
            }
        }
    }

    // MARK: - Automatic mode

    /// `true` while automatic mode runs.
    public var isRunning: Bool { worker != nil }

    /// Starts automatic mode: `.automaticSmall` events up to the payload limit
    /// are pushed moments after they commit, and peers are pulled every
    /// `pullInterval`. Failures back off and retry. Larger and `.manual`
    /// events wait for ``sync()``, whose checkpoints automatic mode never moves.
    public func start() {
        guard worker == nil else { return }
        let (triggers, trigger) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let limit = configuration.automaticPayloadLimit
        let observerID = replicaLog.observeCommits { change in
            switch change {
            case let .events(events):
                if events.contains(where: { $0.event.policy == .automaticSmall && $0.event.payload.count <= limit }) { trigger.yield() }
            case .reset:
                trigger.yield()
            case .pending:
                break  // their commit follows as events
            }
        }
        guard let observerID else { return }  // a closed store
        self.observerID = observerID
        let interval = configuration.pullInterval
        ticker = Task {
            trigger.yield()
            for await _ in Ticks(interval: interval) { trigger.yield() }
        }
        // Peers that can hold a request until their log changes (the hub) wake a round at once.
        watchers = peers.compactMap { peer in
            guard let waiting = peer.transport as? any ChangeWaitingTransport else { return nil }
            return Task { await Self.watch(waiting, trigger: trigger, interval: interval) }
        }
        let delay = configuration.pushDelay
        worker = Task { [weak self] in
            for await _ in triggers {
                // Gather the commits of a burst into one push. Not swift-async-algorithms' `debounce`:
                // a steady trickle of commits would never go quiet, and nothing would ever be pushed.
                try? await Task.sleep(for: delay)
                guard let self, !Task.isCancelled else { return }
                await self.automaticRound()
            }
        }
    }

    /// Waits on `transport` for changes of its log and triggers a round for each; against a peer
    /// that answers at once (it cannot hold requests), or after an error, it waits `interval`
    /// between attempts, so it never spins.
    private static func watch(_ transport: any ChangeWaitingTransport, trigger: AsyncStream<Void>.Continuation, interval: Duration) async {
        let clock = ContinuousClock()
        while !Task.isCancelled {
            let started = clock.now
            do {
                let head = try await transport.info().head
                if try await transport.waitForChanges(after: head, timeout: .seconds(25)) {
                    trigger.yield()
                    continue
                }
            } catch {
                if Task.isCancelled { return }
            }
            if clock.now - started < .seconds(1) { try? await Task.sleep(for: interval) }
        }
    }

    /// Stops automatic mode. Nothing acknowledged is lost; the next start resumes.
    public func stop() {
        for watcher in watchers { watcher.cancel() }
        watchers = []
        worker?.cancel()
        ticker?.cancel()
        worker = nil
        ticker = nil
        if let observerID { replicaLog.stopObserving(observerID) }
        observerID = nil
    }

    private func automaticRound() async {
        let filter = RangeFilter.automaticSmall(maxPayload: configuration.automaticPayloadLimit)
        let now = ContinuousClock.now
        for (index, peer) in peers.enumerated() {
            if let failure = failures[index], failure.retryAt > now { continue }
            do {
                _ = try await exchange(with: peer, filter: filter)
                failures[index] = nil
                lastAutomaticError = nil
            } catch {
                if Task.isCancelled { return }
                let count = (failures[index]?.count ?? 0) + 1
                let backoff = min(configuration.maxBackoff, .milliseconds(250) * (1 << min(count, 16)))
                failures[index] = (count, now + backoff)
                lastAutomaticError = Self.failure(error, peer: peer)
                store.configuration.logger.warning(
                    "chronicle: automatic sync failed; retrying later",
                    metadata: ["peer": "\(peer.name)", "error": "\(error)", "attempt": "\(count)"])
            }
        }
    }
}

#if ServiceLifecycle
/// With the package's `ServiceLifecycle` trait, a replicator is a swift-service-lifecycle `Service`.
extension Replicator: Service {
    /// Runs automatic mode as a swift-service-lifecycle `Service`: starts it, and stops it when
    /// the service group shuts down gracefully or the task is cancelled.
    ///
    /// ```swift
    /// let group = ServiceGroup(services: [replicator], gracefulShutdownSignals: [.sigterm], logger: logger)
    /// try await group.run()
    /// ```
    public func run() async throws {
        start()
        // Suspends until graceful shutdown or cancellation, then stops (the error of either is not a failure).
        try? await gracefulShutdown()
        stop()
    }
}
#endif
