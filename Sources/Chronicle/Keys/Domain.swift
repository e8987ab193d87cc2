/// The view a key lives in.
enum Domain: UInt8, Sendable, Hashable, CaseIterable {
    case defaults = 0
    case secrets = 1

    var name: String { self == .defaults ? "defaults" : "secrets" }
}
