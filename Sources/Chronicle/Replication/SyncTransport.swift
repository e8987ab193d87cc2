import ChronicleFormat
public import Foundation

/// How a ``Replicator`` talks to one peer.
///
/// A transport moves encoded ranges (the versioned binary format of
/// ``Store/exportRange(after:filter:excludingOrigin:maxEvents:maxBytes:)``);
/// it never interprets or alters them. Every transport must pass the
/// conformance suite in `ChronicleTesting`.
public protocol SyncTransport: Sendable {
    /// The remote replica's identity, log epoch, protocol version and head.
    func info() async throws -> ReplicaInfo

    /// A range of the remote's log after `after`, leaving out events made by `origin`:
    /// at most `maxEvents` events (the remote may send fewer, never none while any is left).
    func pull(after: UInt64, filter: RangeFilter, excludingOrigin origin: ReplicaID?, maxEvents: Int) async throws -> Data

    /// Delivers an encoded range; returns only after the remote applied it durably.
    func push(_ range: Data) async throws -> RangeReceipt

    /// ``push(_:)`` of a range exported with `filter`: a peer that keeps push marks (the hub,
    /// ``ReplicaInfo/pushMarks``) records how far it holds what this filter carries. The default
    /// calls ``push(_:)``.
    func push(_ range: Data, filter: RangeFilter) async throws -> RangeReceipt

    /// The remote's events with these identities (at most ``EventIdentity/maxPerRequest``),
    /// encoded as a range that moves no checkpoint, or `nil` when this transport cannot ask
    /// for events by identity. A member asks again for events it lost before it could apply
    /// them (docs/FORMAT.md 7.6). The default answers `nil`.
    func pullEvents(_ identities: [EventIdentity]) async throws -> Data?

    /// ``pullEvents(_:)``, with whether the remote had room to answer each identity whole
    /// (``EventAnswer/answeredWhole``): a member counts an answer against a lost event only when
    /// it did. The default wraps ``pullEvents(_:)`` and says nothing of room, which a member
    /// counts as an older peer's answer (docs/FORMAT.md 7.6).
    func answerEvents(_ identities: [EventIdentity]) async throws -> EventAnswer?
}

extension SyncTransport {
    public func push(_ range: Data, filter: RangeFilter) async throws -> RangeReceipt { try await push(range) }

    public func pullEvents(_ identities: [EventIdentity]) async throws -> Data? { nil }

    public func answerEvents(_ identities: [EventIdentity]) async throws -> EventAnswer? {
        try await pullEvents(identities).map { EventAnswer(range: $0, answeredWhole: nil) }
    }
}

/// A transport whose peer can hold a request until its log changes (the hub's long-poll): in
/// automatic mode, a ``Replicator`` waits on it instead of waiting for its next pull interval,
/// so a change another device pushes arrives within moments.
public protocol ChangeWaitingTransport: SyncTransport {
    /// Returns when the remote's log may hold something after position `after` (`true`), or
    /// when `timeout` passed without a change (`false`). A peer that cannot hold requests
    /// returns at once.
    func waitForChanges(after: UInt64, timeout: Duration) async throws -> Bool
}

/// A passive peer whose items are files (a mailbox folder): a pusher remembers the newest file
/// it relies on being there, and checks later that it still is, to notice a folder restored from
/// an older backup. ``Replicator`` asks a transport for this capability, never for its type.
protocol FileMarkingTransport: SyncTransport {
    /// A digest of the name of the newest file `source` pushed (the newest of anyone's when `nil`).
    func newestFileDigest(from source: ReplicaID?) -> [UInt8]?
    /// Whether the file whose name has `digest` is still there.
    func holdsFile(digest: [UInt8]) -> Bool
}
