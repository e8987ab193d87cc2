import ChronicleSodium

/// Which events a range carries.
public enum RangeFilter: Sendable, Hashable {
    /// Every event that may leave its replica (`.manual` and `.automaticSmall`): what `sync()` moves.
    case syncable
    /// `.automaticSmall` events whose payload is at most `maxPayload` bytes: what automatic mode moves.
    case automaticSmall(maxPayload: Int)

    package func admits(_ event: Event) -> Bool {
        switch self {
        case .syncable: event.policy != .never
        case let .automaticSmall(limit): event.policy == .automaticSmall && event.payload.count <= limit
        }
    }

    /// One byte for checkpoint keys and the wire.
    package var code: UInt8 {
        switch self {
        case .syncable: 1
        case .automaticSmall: 2
        }
    }
}
