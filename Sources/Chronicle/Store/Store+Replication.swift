import ChronicleFormat
import Logging
import ChronicleLog
public import Foundation

extension Store {
    /// This replica's identity, epoch and head, for a peer starting a sync.
    public func replicaInfo() throws(ChronicleError) -> ReplicaInfo {
        let eventLog = try settledEventLog
        return try mappingErrors {
            ReplicaInfo(
                replicaID: eventLog.replica, epoch: try eventLog.epoch(), protocolVersion: EventRange.protocolVersion,
                head: try eventLog.head().sequence, writer: eventLog.writer)
        }
    }

    /// A range of this replica's log after sequence `after`, encoded in the
    /// versioned range format (what a peer pulls, or `chronicle export` writes).
    ///
    /// - Parameters:
    ///   - after: The last sequence the receiver already has from this log.
    ///   - filter: Which events travel. `.never` events never do.
    ///   - origin: Leave out events made by this replica (the receiver's own).
    ///   - maxEvents: At most this many events (at least one when any is left).
    ///   - maxBytes: About this many payload bytes at most (a single larger event still travels alone).
    public func exportRange(
        after: UInt64, filter: RangeFilter = .syncable, excludingOrigin origin: ReplicaID? = nil,
        maxEvents: Int = 256, maxBytes: Int = 1 << 20
    ) throws(ChronicleError) -> Data {
        let eventLog = try settledEventLog
        try prepareTravelKeys()
        return try mappingErrors {
            Data(try eventLog.rangeExport.exportRange(after: after, filter: filter, excluding: origin, maxEvents: max(1, maxEvents), maxBytes: maxBytes).encoded())
        }
    }

    /// The events of this replica's log with these identities, encoded as a range that moves no
    /// checkpoint (what a peer answers a member asking again for events it lost; docs/FORMAT.md 7.6).
    ///
    /// Identities this replica never held, or compacted away, are left out, as are those past
    /// about `maxBytes` of payload (at least one event travels). At most
    /// ``EventIdentity/maxPerRequest`` identities are looked up.
    public func exportEvents(_ identities: [EventIdentity], maxBytes: Int = 1 << 20) throws(ChronicleError) -> Data {
        try answerEvents(identities, maxBytes: maxBytes).range
    }

    /// ``exportEvents(_:maxBytes:)``, with whether each distinct identity asked was answered
    /// whole (every version this replica keeps of it fitted), as a transport answers a member.
    public func answerEvents(_ identities: [EventIdentity], maxBytes: Int = 1 << 20) throws(ChronicleError) -> EventAnswer {
        let eventLog = try settledEventLog
        try prepareTravelKeys()
        return try mappingErrors {
            let (range, whole) = try eventLog.rangeExport.exportEvents(identities, maxBytes: maxBytes)
            return EventAnswer(range: Data(range.encoded()), answeredWhole: whole)
        }
    }

    /// Applies a range received from a peer or read from a file, in one durable transaction.
    ///
    /// Re-sent events are skipped. What fails validation or authentication (see the trust
    /// model in docs/TRUST.md) is set aside in the quarantine with its reason and `source`, and
    /// the rest applies; ``quarantinedItems()`` lists it. Events of newer formats are stored
    /// and relayed, not applied. Bytes that do not decode as a range apply nothing and throw
    /// ``ChronicleError/malformedInput(_:)``.
    /// - Parameters:
    ///   - data: A range, as ``exportRange(after:filter:excludingOrigin:maxEvents:maxBytes:)`` or `chronicle export` writes it.
    ///   - source: Where the range came from, recorded with anything quarantined (a peer, a file).
    public func importRange(_ data: Data, from source: String = "an imported range") throws(ChronicleError) -> RangeReceipt {
        try importRange(EventRange(decoding: Array(data)), checkpoint: nil, source: source)
    }

    /// - Parameter verify: whether a member verifies authenticators (not for a copy of its own log).
    func importRange(
        _ range: EventRange, checkpoint: (key: CheckpointKey, value: UInt64, chain: [UInt8])?, source: String, verify: Bool = true
    ) throws(ChronicleError) -> RangeReceipt {
        try importRangeReportingReceived(range, checkpoint: checkpoint, source: source, verify: verify).receipt
    }

    /// An import, and the sequences the range's own items took here (its sender holds them all).
    func importRangeReportingReceived(
        _ range: EventRange, checkpoint: (key: CheckpointKey, value: UInt64, chain: [UInt8])?, source: String, verify: Bool = true
    ) throws(ChronicleError) -> (receipt: RangeReceipt, received: [ClosedRange<UInt64>]) {
        try importScreened(range, screening: try screenKeys(of: range, source: source), checkpoint: checkpoint, source: source, verify: verify)
    }

    /// Sorts a received range's key records and derives the keys its events need (Argon2id:
    /// up to a second each, in `source`'s turns), before any write lock is taken.
    func screenKeys(of range: EventRange, source: String) throws(ChronicleError) -> KeyScreening {
        let keyring = try? crypto.get()
        return try mappingErrors { try keyring?.prepareImport(range, source: source) }
            ?? Keyring.screenWithoutKeyring(range, minimum: configuration.travelKeyCost.limits)
    }

    /// Starts the retry of key records earlier imports left waiting, on a thread of its own, when
    /// the quarantine holds anything: each record that opens is stored and releases the events
    /// waiting for it, in an import of its own (``Keyring/retryWaitingRecords(release:)``).
    func retryWaitingKeyRecords() {
        guard configuration.keySource != nil, let keyring = try? crypto.get(), let eventLog = try? eventLog,
            (try? eventLog.quarantine.quarantineCount()) ?? 0 > 0
        else { return }
        keyring.retryWaitingRecords { [weak self] screening in
            guard let self else { return }
            do {
                let empty = EventRange(source: try self.replicaID, epoch: .zero, after: 0, upTo: 0, head: 0, keys: [], events: [], opaque: [])
                _ = try self.importScreened(empty, screening: screening, checkpoint: nil, source: Self.waitedRecordSource)
            } catch {
                self.configuration.logger.warning(
                    "chronicle: a key record that waited for its derivation could not be stored; a later import tries again",
                    metadata: ["error": "\(error)"])
            }
        }
    }

    /// The source of the imports that apply a retry's outcome.
    static let waitedRecordSource = "a key record that waited"

    /// Waits until no retry of waiting key records runs (``retryWaitingKeyRecords()``).
    func waitForKeyRecordRetries() {
        (try? crypto.get())?.waitingRetry.waitUntilIdle()
    }

    /// A received range decoded and its keys screened (``prepareImport(_:)``), ready for
    /// ``importPrepared(_:from:)``: a server derives keys on any thread and imports on one.
    @_spi(Tools) public struct PreparedImport: Sendable {
        let range: EventRange
        let screening: KeyScreening
    }

    /// Decodes a received range and screens its key records (any Argon2id runs here), without
    /// taking the store's write lock: what ``importRange(_:from:)`` does before its transaction.
    /// - Parameter source: whose turn its derivations take (``DerivationTurns``): a server passes
    ///   the client's address, so one client's queue never stands before another's record.
    @_spi(Tools) public func prepareImport(_ data: Data, source: String) throws(ChronicleError) -> PreparedImport {
        let range = try EventRange(decoding: Array(data))
        return PreparedImport(range: range, screening: try screenKeys(of: range, source: source))
    }

    /// Imports a prepared range in one durable transaction (no Argon2id runs in it), as
    /// ``importRange(_:from:)`` does.
    @_spi(Tools) public func importPrepared(_ prepared: PreparedImport, from source: String) throws(ChronicleError) -> RangeReceipt {
        try importScreened(prepared.range, screening: prepared.screening, checkpoint: nil, source: source).receipt
    }

    private func importScreened(
        _ range: EventRange, screening: KeyScreening, checkpoint: (key: CheckpointKey, value: UInt64, chain: [UInt8])?, source: String,
        verify: Bool = true
    ) throws(ChronicleError) -> (receipt: RangeReceipt, received: [ClosedRange<UInt64>]) {
        let eventLog = try eventLog
        let keyring = try? crypto.get()
        let verifier: (any EventVerifier)? = verify && configuration.keySource != nil ? keyring : nil
        let result = try mappingErrors {
            try eventLog.rangeImport.importRangeReportingReceived(
                range, keys: screening, verifier: verifier, requireSealedDefaults: configuration.encryptDefaults, checkpoint: checkpoint,
                // A copy of a store's own log (no verification) keeps every relay-only record it held.
                source: source, boundRelayOnly: verify)
        }
        // A release (an import of a retry's outcome) starts no retry of its own: its pass goes on.
        if source != Self.waitedRecordSource { retryWaitingKeyRecords() }
        return result
    }

    /// Gives this store's passphrase-wrapped keys their travel wraps before anything leaves it.
    func prepareTravelKeys() throws(ChronicleError) {
        guard let keyring = try? crypto.get() else { return }
        try mappingErrors { try keyring.prepareTravelKeys() }
    }

    /// Writes every syncable event with sequence in `range` to `url` as a private file (mode
    /// 0600, replacing any file there atomically): an export holds wrapped keys and every
    /// syncable value.
    ///
    /// Any number of events fits: when they do not fit one range (32,768 items or 128 MiB), the
    /// file is a range stream (docs/FORMAT.md, section 7.4) of ranges written one at a time as
    /// they are read, so memory holds one range, whatever the size of the log.
    /// - Parameters:
    ///   - range: the sequences to export (events of other sequences and `.never` events are left out).
    ///   - url: the file to write.
    ///   - progress: called after each range with (the last sequence written, the head).
    /// - Returns: the number of bytes written.
    @discardableResult
    public func exportFile(
        sequences range: ClosedRange<UInt64>, to url: URL, progress: ((UInt64, UInt64) -> Void)? = nil
    ) throws(ChronicleError) -> Int {
        let eventLog = try settledEventLog
        try prepareTravelKeys()
        return try RangeFile.write(to: url, through: range.upperBound, progress: progress) { after throws(ChronicleError) in
            try exportCut(eventLog, after: after ?? (range.lowerBound > 0 ? range.lowerBound - 1 : 0), through: range.upperBound)
        }
    }

    /// Every syncable event with sequence in `range`, as one range (for `chronicle export`).
    /// - Throws: ``ChronicleError/invalidArgument(_:)`` when the events do not fit one range
    ///   (32,768 items or 128 MiB): ``exportFile(sequences:to:progress:)`` writes any number.
    public func exportFile(sequences range: ClosedRange<UInt64>) throws(ChronicleError) -> Data {
        let eventLog = try settledEventLog
        try prepareTravelKeys()
        let cut = try exportCut(eventLog, after: range.lowerBound > 0 ? range.lowerBound - 1 : 0, through: range.upperBound)
        guard cut.upTo >= min(range.upperBound, cut.head) else {
            throw .invalidArgument(
                "the events from sequence \(range.lowerBound) on do not fit one range (they fit up to \(cut.upTo)): write them to a file, which holds any number")
        }
        return Data(cut.encoded())
    }

    private func exportCut(_ eventLog: EventLog, after: UInt64, through last: UInt64) throws(ChronicleError) -> EventRange {
        try mappingErrors {
            try eventLog.rangeExport.exportRange(
                after: after, filter: .syncable, excluding: nil, maxEvents: EventRange.maxItems / 2, maxBytes: EventRange.maxEncodedSize / 2,
                through: last)
        }
    }

    /// Imports a file ``exportFile(sequences:to:progress:)`` or `chronicle export` wrote: one
    /// range, or a range stream read and applied one range at a time (each in its own
    /// transaction, so memory holds one range and an interrupted import keeps what it applied).
    ///
    /// The file is opened without blocking and must be a regular file: a FIFO or a device is
    /// refused at once. Every length in it is checked before anything is read.
    /// - Parameters:
    ///   - url: the file.
    ///   - progress: called after each range with (bytes read, the file's size).
    /// - Returns: the receipts of every range, added up.
    @discardableResult
    public func importFile(at url: URL, progress: ((Int, Int) -> Void)? = nil) throws(ChronicleError) -> RangeReceipt {
        try RangeFile.read(at: url, progress: progress) { bytes throws(ChronicleError) in try importRange(bytes, from: "file \(url.path)") }
    }
}
