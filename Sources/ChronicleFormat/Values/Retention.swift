/// How many revisions of a key a store keeps: its history's length, declared with the key
/// beside its sync policy.
///
/// A store drops a key's older revisions by itself once the key has more than its retention
/// keeps (see ``Store/Configuration/retention`` for the default). Whatever the retention, a
/// store never drops what a current value depends on: the key's winning revision (sets and
/// removes alike), its newest revision that may leave the device, and revisions the clock-drift
/// guard holds back. So retention shortens history, never changes a value, here or on a device
/// that syncs later.
///
/// ```swift
/// extension Keys {
///     static let position = Key<Int>("reader.position", default: 0, retention: .latest)   // one revision
///     static let plan     = Key<String>("billing.plan", default: "free", retention: .forever)  // audited
///     static let theme    = Key<Theme>("settings.theme", default: .system)                 // the store's default
/// }
/// ```
public struct Retention: Sendable, Hashable, CustomStringConvertible {
    /// The revisions kept, newest first in the order this store received them; `nil`: all.
    public let keptRevisions: Int?

    private init(keptRevisions: Int?) { self.keptRevisions = keptRevisions }

    /// Every revision, for ever: for keys an app audits. Nothing of the key's history is dropped
    /// unless someone asks (``Store/purgeHistory(of:)`` or `chronicle compact`).
    public static let forever = Retention(keptRevisions: nil)

    /// The current revision only.
    public static let latest = Retention(keptRevisions: 1)

    /// The newest `count` revisions (at least 1; at most 2^32 − 1).
    public static func revisions(_ count: Int) -> Retention {
        Retention(keptRevisions: min(max(count, 1), Int(UInt32.max)))
    }

    /// The default of ``Store/Configuration/retention``: the newest 100 revisions of every key.
    public static let standard = Retention.revisions(100)

    public var description: String {
        switch keptRevisions {
        case nil: "forever"
        case 1: "latest"
        case let count?: "revisions(\(count))"
        }
    }

    /// As stored in the `retention` database (docs/FORMAT.md 5.4): `u32` revisions kept, 0 for all.
    package var rule: UInt32 { keptRevisions.map { UInt32($0) } ?? 0 }

    /// The retention a stored rule says.
    package init(rule: UInt32) { self.init(keptRevisions: rule == 0 ? nil : Int(rule)) }
}
