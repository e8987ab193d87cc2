import Foundation

/// One key in the audit catalog (`chronicle keys`).
public struct KeyInfo: Sendable, Equatable {
    /// The key name.
    public var name: String
    /// `"defaults"` or `"secrets"`.
    public var domain: String
    /// The sync policy of the winning event.
    public var policy: SyncPolicy
    /// The size in bytes of the current payload (sealed size for sealed values).
    public var size: Int
    /// The number of revisions in the log.
    public var revisions: Int
    /// The replica that wrote the current value.
    public var lastWriter: ReplicaID
    /// When the current value was written (logical clock).
    public var lastChanged: HLC
    /// `true` when the current value is sealed.
    public var isSealed: Bool
    /// `true` when the key's current state is a remove.
    public var isRemoved: Bool

    package init(name: String, domain: String, policy: SyncPolicy, size: Int, revisions: Int, lastWriter: ReplicaID, lastChanged: HLC, isSealed: Bool, isRemoved: Bool) {
        self.name = name
        self.domain = domain
        self.policy = policy
        self.size = size
        self.revisions = revisions
        self.lastWriter = lastWriter
        self.lastChanged = lastChanged
        self.isSealed = isSealed
        self.isRemoved = isRemoved
    }
}
