package import ChronicleFormat
package import ChronicleLMDB

/// The transaction the log layer lends to the code above it (sealing and key
/// records) for the length of one operation. Only the log layer reads or
/// writes through it; callers hand it back to the named operations below.
package typealias LogTransaction = Transaction

/// What the log layer asks of the crypto code while it appends an event: seal
/// its payload in place, inside the write transaction (so a new data key and
/// the event that first uses it commit together).
package protocol EventSealer: Sendable {
    /// Seals the event's payload (sets `sealed` and replaces the payload with an envelope).
    func seal(_ event: inout Event, _ txn: borrowing LogTransaction, _ head: inout LogHead) throws
    /// Sets the event's authenticator: a keyed MAC over its canonical encoding.
    func authenticate(_ event: inout Event, _ txn: borrowing LogTransaction, _ head: inout LogHead) throws
}

/// What the log layer asks of the crypto code while it imports a range: whether an event
/// is authenticated by a member of the sync group. Runs inside the write transaction, so it
/// uses only keys unwrapped beforehand (never Argon2id).
package protocol EventVerifier: Sendable {
    /// Whether the store verifies what it imports (a member): only then does its log hold only
    /// authenticated events, and an unauthenticated one after its replica's authenticated ones is damage.
    var isMember: Bool { get }
    /// `nil` when the event is authentic, else why not.
    func verify(_ event: Event) -> String?
    /// Whether this verifier holds the data key `id` (unwrapped).
    func holdsKey(_ id: KeyID) -> Bool
    /// `nil` when an item of a newer format carries, at the end where every format keeps it
    /// (docs/FORMAT.md, 3.4), a valid authenticator under a key this verifier holds; else why not,
    /// and whether it names a key this verifier does not hold (it may verify once that arrives).
    func verifyOpaque(_ bytes: [UInt8]) -> (problem: String, awaitingKey: Bool)?
    /// ``verify(_:encoded:)`` of each event (`encoded` is empty or one per event), all at once:
    /// pure, so it runs before the import transaction takes the write lock, on every core.
    func verifyAll(_ events: [Event], encoded: [[UInt8]?]) -> [String?]
}
