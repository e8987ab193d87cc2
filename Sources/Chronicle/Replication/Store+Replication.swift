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
            Data(try eventLog.exportRange(after: after, filter: filter, excluding: origin, maxEvents: max(1, maxEvents), maxBytes: maxBytes).encoded())
        }
    }

    /// The largest range file (or pushed range) there is: 256 MiB.
    @_spi(Tools) public static let maxRangeFileSize = EventRange.maxEncodedSize

    /// Applies a range received from a peer or read from a file, in one durable transaction.
    ///
    /// Re-sent events are skipped. What fails validation or authentication (see the trust
    /// model in the README) is set aside in the quarantine with its reason and `source`, and
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
        let eventLog = try eventLog
        let keyring = try? crypto.get()
        let screening = try mappingErrors { try keyring?.prepareImport(range) }
            ?? Keyring.screenWithoutKeyring(range, minimum: configuration.travelKeyCost.limits)
        let verifier: (any EventVerifier)? = verify && configuration.keySource != nil ? keyring : nil
        return try mappingErrors {
            try eventLog.importRangeReportingReceived(
                range, keys: screening, verifier: verifier, requireSealedDefaults: configuration.encryptDefaults, checkpoint: checkpoint,
                source: source)
        }
    }

    /// Gives this store's passphrase-wrapped keys their travel wraps before anything leaves it.
    func prepareTravelKeys() throws(ChronicleError) {
        guard let keyring = try? crypto.get() else { return }
        try mappingErrors { try keyring.prepareTravelKeys() }
    }

    /// Writes ``exportFile(sequences:)`` to `url` as a private file (mode 0600, replacing any
    /// file there atomically): an export holds wrapped keys and every syncable value.
    /// - Returns: the number of bytes written.
    @discardableResult
    public func exportFile(sequences range: ClosedRange<UInt64>, to url: URL) throws(ChronicleError) -> Int {
        let data = try exportFile(sequences: range)
        try PrivateFiles.replace(Array(data), at: url)
        return data.count
    }

    /// Every syncable event with sequence in `range`, as one range file (for `chronicle export`).
    /// - Throws: ``ChronicleError/invalidArgument(_:)`` when the events do not fit one file (256 MiB); export smaller ranges.
    public func exportFile(sequences range: ClosedRange<UInt64>) throws(ChronicleError) -> Data {
        let eventLog = try settledEventLog
        try prepareTravelKeys()
        let cut = try mappingErrors {
            try eventLog.exportRange(
                after: range.lowerBound > 0 ? range.lowerBound - 1 : 0, filter: .syncable, excluding: nil,
                maxEvents: EventRange.maxItems / 2, maxBytes: EventRange.maxEncodedSize / 2, through: range.upperBound)
        }
        guard cut.upTo >= min(range.upperBound, cut.head) else {
            throw .invalidArgument("sequences \(range.lowerBound)...\(range.upperBound) do not fit one file; export up to \(cut.upTo) first")
        }
        return Data(cut.encoded())
    }
}
