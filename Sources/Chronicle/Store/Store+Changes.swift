import ChronicleFormat
import ChronicleLog
import Foundation
import Logging
import Synchronization

extension Store {
    /// The log as a stream: every event after sequence `after`, in log order, then every event
    /// committed later, as it commits, whoever wrote it (this store, another `Store` or process,
    /// a replicated import). Lossless and resumable: keep the ``LogEntry/sequence`` of the last
    /// change handled and start from it next time.
    ///
    /// The stream reads the log in pages as it is iterated, so a slow consumer holds no backlog
    /// in memory; it ends when the iterating task is cancelled. Changes made with the
    /// non-throwing forms appear once committed (moments later). Sequences are local: stable
    /// until ``compact(before:dropRelayOnly:progress:)`` renumbers the log; after a compaction, start again from 0
    /// (event identities, ``LogEntry/writer`` and ``LogEntry/counter``, never change).
    ///
    /// ```swift
    /// for await change in store.changes(after: checkpoint) {
    ///     apply(change)
    ///     checkpoint = change.sequence
    /// }
    /// ```
    /// When the store cannot be read, the error is logged and the stream ends.
    public func changes(after sequence: UInt64 = 0) -> Changes {
        Changes(store: self, start: sequence, checkpoint: nil)
    }

    /// The log as a stream, resuming after `checkpoint` (a ``LogEntry/checkpoint`` kept from an
    /// earlier stream): when the log no longer holds that point, because it was compacted,
    /// restored from a backup or rolled back, the stream starts again from the log's beginning
    /// instead of silently skipping the events that reused its sequence numbers. Entries then
    /// carry another ``LogEntry/epoch`` than the checkpoint: a consumer that keeps a projection
    /// rebuilds it.
    ///
    /// ```swift
    /// for await change in store.changes(from: saved) {
    ///     if change.epoch != saved.epoch { projection.removeAll() }   // the log was rewritten
    ///     if change.isCurrent { projection[change.key] = change.valueJSON }
    ///     saved = change.checkpoint
    /// }
    /// ```
    public func changes(from checkpoint: LogCheckpoint) -> Changes {
        Changes(store: self, start: checkpoint.sequence, checkpoint: checkpoint)
    }
}

/// The events of a store's log, in order, as they commit: see ``Store/changes(after:)``.
public struct Changes: AsyncSequence, Sendable {
    /// One event of the log.
    public typealias Element = LogEntry
    /// Errors end the stream (they are logged), so iterating never throws.
    public typealias Failure = Never

    let store: Store
    let start: UInt64
    let checkpoint: LogCheckpoint?

    /// An iterator starting after the sequence given to ``Store/changes(after:)`` (or the
    /// checkpoint given to ``Store/changes(from:)``).
    public func makeAsyncIterator() -> Iterator {
        Iterator(store: store, cursor: start, checkpoint: checkpoint)
    }

    /// Reads the log a page at a time and waits for the next commit when it has caught up.
    public struct Iterator: AsyncIteratorProtocol {
        /// How many events one read of the log takes.
        static let pageSize = 256

        let store: Store
        var cursor: UInt64
        var page: [LogEntry] = []
        var index = 0
        var signal: CommitSignal?
        var ended = false
        /// The log's epoch when the cursor was taken (a compaction changes it).
        var epoch: LogEpoch?
        /// A checkpoint to check before the first read (``Store/changes(from:)``).
        var checkpoint: LogCheckpoint?
        /// Events delivered while the drift guard held them back: delivered again once let in.
        var heldBack: [UInt64] = []
        /// The most held-back events one stream follows (a carrier can date many events ahead).
        static let heldBackLimit = 4_096

        init(store: Store, cursor: UInt64, checkpoint: LogCheckpoint?) {
            self.store = store
            self.cursor = cursor
            self.checkpoint = checkpoint
        }

        /// The next event, waiting for a commit when the log has none yet; `nil` once cancelled.
        public mutating func next() async -> LogEntry? {
            while !ended {
                if index < page.count {
                    index += 1
                    return page[index - 1]
                }
                if Task.isCancelled { break }
                do {
                    let eventLog = try store.eventLog
                    if signal == nil { signal = CommitSignal(eventLog: eventLog) }
                    guard let signal else { break }
                    let generation = signal.generation  // before the read: a commit after it wakes the wait
                    if let checkpoint {
                        self.checkpoint = nil
                        let (matches, logEpoch) = try mappingErrors { try eventLog.inspection.recordMatches(sequence: checkpoint.sequence, hash: checkpoint.chainHash) }
                        epoch = logEpoch
                        if !matches || (checkpoint.sequence > 0 && checkpoint.epoch != logEpoch) {
                            cursor = 0
                        } else {
                            heldBack = Array(checkpoint.heldBack.filter { $0 <= checkpoint.sequence }.prefix(Self.heldBackLimit))
                        }
                    }
                    let (events, through, logEpoch) = try mappingErrors { try eventLog.inspection.events(after: cursor, limit: Self.pageSize) }
                    if let epoch, epoch != logEpoch {
                        // Compacted since the last page: the cursor means nothing in the renumbered
                        // log. Start again from its beginning (events come again, with their
                        // identities; losing the new ones silently would be worse).
                        self.epoch = logEpoch
                        cursor = 0
                        heldBack = []
                        continue
                    }
                    epoch = logEpoch
                    cursor = through
                    page = []
                    for event in events {
                        var entry = LogEntry(event, epoch: logEpoch)
                        if entry.isHeldBack && heldBack.count < Self.heldBackLimit { heldBack.append(entry.sequence) }
                        entry.streamCheckpoint = LogCheckpoint(sequence: entry.sequence, epoch: logEpoch, chainHash: entry.chainHash, heldBack: heldBack)
                        page.append(entry)
                    }
                    index = 0
                    if page.isEmpty, !heldBack.isEmpty {
                        // Caught up: the events the drift guard has let in since come again, each
                        // with the stream's position as its checkpoint (never its own, earlier one).
                        let (released, position, releasedEpoch) = try mappingErrors { try eventLog.inspection.releasedEvents(heldBack, position: cursor) }
                        if releasedEpoch == logEpoch {
                            for event in released {
                                heldBack.removeAll { $0 == event.sequence }
                                var entry = LogEntry(event, epoch: logEpoch)
                                entry.streamCheckpoint = LogCheckpoint(sequence: cursor, epoch: logEpoch, chainHash: position, heldBack: heldBack)
                                page.append(entry)
                            }
                        }
                    }
                    if page.isEmpty { await signal.wait(past: generation) }
                } catch {
                    store.configuration.logger.error(
                        "chronicle: the change stream ended", metadata: ["error": "\(error)", "store": "\(store.directory.path)"])
                    break
                }
            }
            ended = true
            signal = nil
            return nil
        }
    }
}

/// Counts the commits the log's observer hub reports (this process's, and others' through the
/// poller) and wakes a waiting change stream; leaves the hub when the stream goes away.
final class CommitSignal: Sendable {
    private struct State {
        var generation: UInt64 = 0
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state = Mutex(State())
    private let eventLog: EventLog
    private let handler = Mutex<Int?>(nil)

    init(eventLog: EventLog) {
        self.eventLog = eventLog
        let id = eventLog.observers.add { [weak self] change in
            if case .pending = change { return }  // not in the log yet: its commit follows
            self?.advance()
        }
        handler.withLock { $0 = id }
        eventLog.startPollingIfNeeded()
    }

    deinit {
        if let id = handler.withLock({ $0 }) { eventLog.observers.remove(id) }
    }

    var generation: UInt64 { state.withLock { $0.generation } }

    private func advance() {
        let waiter = state.withLock { state in
            state.generation &+= 1
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Returns when a commit was reported after `generation` was read, or the task is cancelled.
    func wait(past generation: UInt64) async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state in
                    if state.generation != generation || Task.isCancelled { return true }
                    state.waiter = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { state in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
        }
    }
}
