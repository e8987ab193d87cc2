/// Where a key's changes may travel.
public enum SyncPolicy: UInt8, Sendable, Hashable, CaseIterable, Comparable, CustomStringConvertible {
    /// Never leaves this replica, not even through a relay (device-specific state, biometric locks).
    case never = 0
    /// Shipped only by an explicit `Replicator.sync()`.
    case manual = 1
    /// Pushed moments after the commit when small (100 KiB by default); larger
    /// values wait for the next `sync()`.
    case automaticSmall = 2

    /// Narrower first: `.never` < `.manual` < `.automaticSmall`.
    public static func < (lhs: SyncPolicy, rhs: SyncPolicy) -> Bool { lhs.rawValue < rhs.rawValue }

    public var description: String {
        switch self {
        case .never: "never"
        case .manual: "manual"
        case .automaticSmall: "automaticSmall"
        }
    }
}
