package import ChronicleFormat

extension ViewEntry {
    /// The entry a queued, uncommitted local change will make: unsealed (its payload is the
    /// plaintext), with no place in the log yet.
    package init(pending change: PendingChange) {
        self.init(
            hlc: HLC(rawValue: 0), origin: ReplicaID.none, replica: ReplicaID.none, counter: 0, sequence: 0, op: change.op,
            policy: change.policy, encoding: change.encoding, sealed: false, payload: change.payload)
    }
}
