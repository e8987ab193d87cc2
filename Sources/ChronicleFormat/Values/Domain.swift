/// The view a key lives in: plain values (``Key``) or secrets (``SecretKey``).
public enum Domain: UInt8, Sendable, Hashable, CaseIterable {
    /// Plain values, read and written through ``Key``.
    case defaults = 0
    /// Sealed values, read and written through ``SecretKey``.
    case secrets = 1

    /// `defaults` or `secrets`.
    public var name: String { self == .defaults ? "defaults" : "secrets" }
}
