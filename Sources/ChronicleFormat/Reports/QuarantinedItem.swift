public import Foundation

/// Something a peer sent that this replica set aside instead of applying: an event
/// or a wrapped key that failed authentication or validation.
///
/// Quarantined items are never applied to a view and never relayed; they never
/// block the rest of their batch or a later one. `chronicle quarantine` lists them
/// (a sealed value is never shown) and drops them.
public struct QuarantinedItem: Sendable, Equatable, Identifiable {
    /// Why an item was set aside.
    public enum Reason: UInt8, Sendable, Equatable, CustomStringConvertible {
        /// A group member's store received an event without a valid authenticator under a key its key source opens.
        case unauthenticated = 1
        /// An event whose identity (origin, counter) this replica holds with other content.
        case conflictingIdentity = 2
        /// An event claiming this replica's current writer identity, which it never wrote.
        case claimsOwnIdentity = 3
        /// An event whose counter is beyond any real log (see the format document).
        case absurdCounter = 4
        /// A wrapped data key this replica's key source cannot open.
        case unopenableKey = 5
        /// A wrapped data key whose key-derivation parameters are outside the accepted bounds.
        case keyParametersOutOfBounds = 6
        /// An unsealed event for a domain this store seals (secrets, or every value with `encryptDefaults`).
        case unsealed = 7
        /// A wrapped key past the number of new key derivations one batch may cost: tried again by the next import.
        case derivationBudget = 8
        /// A group member's store received an event authenticated or sealed with a key it does not
        /// hold yet: kept whole, and applied when the key arrives and the event verifies.
        case awaitingKey = 9
        /// An event whose value is larger than this store accepts (``Store/Configuration/maxValueSize``).
        case tooLarge = 10
        /// An event of a newer format past what this store keeps to relay (see docs/TRUST.md).
        case relayLimit = 11

        public var description: String {
            switch self {
            case .unauthenticated: "not authenticated by a member of this sync group"
            case .conflictingIdentity: "another event has the same identity"
            case .claimsOwnIdentity: "claims this replica's own identity"
            case .absurdCounter: "counter beyond any real log"
            case .unopenableKey: "a wrapped key this replica's key source cannot open"
            case .keyParametersOutOfBounds: "key-derivation parameters out of bounds"
            case .unsealed: "unsealed value for a sealed domain"
            case .derivationBudget: "waits for a key derivation (one batch may run only a few)"
            case .awaitingKey: "waits for the key it names"
            case .tooLarge: "a value larger than this store accepts"
            case .relayLimit: "past what this store keeps to relay"
            }
        }
    }

    /// What was set aside.
    public enum Kind: UInt8, Sendable, Equatable {
        /// An event.
        case event = 1
        /// A wrapped data key.
        case wrappedKey = 2
    }

    /// The item's id in this store's quarantine.
    public var id: UInt64
    /// An event or a wrapped key.
    public var kind: Kind
    /// Why it was set aside.
    public var reason: Reason
    /// More about the reason (never a value).
    public var detail: String
    /// The peer, file or endpoint it came from.
    public var source: String
    /// When it arrived.
    public var date: Date
    /// For events: the writer and counter it claims, its key name and whether it is sealed.
    public var origin: ReplicaID?
    /// The counter it claims (events).
    public var counter: UInt64?
    /// The key name (events).
    public var keyName: String?
    /// `true` when the event's payload is sealed (its value is never shown).
    public var isSealed: Bool

    package init(id: UInt64, kind: Kind, reason: Reason, detail: String, source: String, date: Date, origin: ReplicaID?, counter: UInt64?, keyName: String?, isSealed: Bool) {
        self.id = id
        self.kind = kind
        self.reason = reason
        self.detail = detail
        self.source = source
        self.date = date
        self.origin = origin
        self.counter = counter
        self.keyName = keyName
        self.isSealed = isSealed
    }
}

extension QuarantinedItem.Reason {
    /// Whether an item set aside for this reason may still apply (it waits for a key or a
    /// derivation): kept whole, and evicted only after every item that never will.
    package var isWaiting: Bool { self == .awaitingKey || self == .derivationBudget }
}
