import ChronicleFormat
import Foundation
import ChronicleSodium

/// The Argon2id cost of deriving a key from a passphrase. Stored with the salt,
/// so a store opens with the cost it was created with.
public struct KeyDerivationCost: Sendable, Hashable {
    /// Number of passes.
    public var passes: UInt64
    /// Memory in bytes.
    public var memoryBytes: UInt64

    /// Creates a cost from explicit values: from libsodium's minimum (1 pass, 8 KiB) up to
    /// ``sensitive``; a store opened with a cost outside that range throws
    /// ``ChronicleError/invalidArgument(_:)``.
    public init(passes: UInt64, memoryBytes: UInt64) {
        self.passes = passes
        self.memoryBytes = memoryBytes
    }

    /// 2 passes over 64 MiB: about 0.1 s on a current core. The default.
    public static let interactive = KeyDerivationCost(limits: .interactive)
    /// 3 passes over 256 MiB: about 0.5–1 s. Used for keys that travel between devices.
    public static let moderate = KeyDerivationCost(limits: .moderate)
    /// 4 passes over 1 GiB: several seconds; for vaults opened rarely.
    public static let sensitive = KeyDerivationCost(limits: .sensitive)
    /// The smallest cost libsodium accepts. Only for tests: it protects nothing.
    public static let minimumForTesting = KeyDerivationCost(limits: .minimum)

    init(limits: PasswordHash.Limits) {
        passes = limits.opsLimit
        memoryBytes = limits.memLimit
    }

    var limits: PasswordHash.Limits { PasswordHash.Limits(opsLimit: passes, memLimit: memoryBytes) }

    /// Why this cost cannot be used, or `nil`: between libsodium's minimum and
    /// ``sensitive`` (a store refuses to unwrap a key outside those bounds, so a key wrapped
    /// at such a cost could never be opened again).
    var problem: String? {
        let minimum = PasswordHash.Limits.minimum
        let maximum = PasswordHash.Limits.sensitive
        guard passes >= minimum.opsLimit, memoryBytes >= minimum.memLimit else {
            return "the key derivation cost (\(passes) passes, \(memoryBytes) bytes) is below libsodium's minimum (\(minimum.opsLimit) passes, \(minimum.memLimit) bytes)"
        }
        guard passes <= maximum.opsLimit, memoryBytes <= maximum.memLimit else {
            return "the key derivation cost (\(passes) passes, \(memoryBytes) bytes) is above .sensitive (\(maximum.opsLimit) passes, \(maximum.memLimit) bytes), which no store unwraps"
        }
        return nil
    }
}
