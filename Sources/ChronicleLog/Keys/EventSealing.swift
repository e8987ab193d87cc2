package import ChronicleFormat
package import ChronicleSodium

/// The key an event is sealed and authenticated with, as the crypto code hands it to the log.
package struct SealingKey: Sendable {
    package var id: KeyID
    package var key: SecureBytes
    /// A key made for the occasion (no key was active): the log stores this record, makes the
    /// key active and keys the chain with it, in the transaction that appends the event.
    package var created: WrappedKey?

    package init(id: KeyID, key: SecureBytes, created: WrappedKey? = nil) {
        self.id = id
        self.key = key
        self.created = created
    }
}

/// What the log layer asks of the crypto code while it appends an event: which key seals it,
/// then seal its payload, or authenticate it, in place. The log holds the transaction; the
/// crypto code sees key records only, as values (so a new data key and the event that first
/// uses it commit together, and no transaction leaves the log).
package protocol EventSealer: Sendable {
    /// The key new events are sealed and authenticated with. `active` is the active key's id
    /// (`nil`: none yet: make one, returned as `created`); `record` reads a wrapped key in the
    /// appending transaction (for a key not unwrapped yet).
    func sealingKey(active: KeyID?, record: (KeyID) throws -> WrappedKey?) throws -> SealingKey
    /// Seals the event's payload (sets `sealed` and replaces the payload with an envelope).
    func seal(_ event: inout Event, with key: SealingKey) throws
    /// Sets the event's authenticator: a keyed MAC over its canonical encoding.
    func authenticate(_ event: inout Event, with key: SealingKey) throws
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
