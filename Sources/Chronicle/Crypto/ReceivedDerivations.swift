import ChronicleFormat
import ChronicleSodium
import Synchronization

/// What deriving key-encryption keys for records peers sent may cost a store, and what it
/// derived: a ceiling of Argon2id runs a minute, turns by source, and the KEKs of the last
/// ``kekCapacity`` (salt, cost) pairs, kept whether or not they opened anything (a carrier's junk
/// salt is not derived twice). The keyring asks it; it owns its state.
final class ReceivedDerivations: Sendable {
    /// How many KEKs of received records are kept (a group has a salt or two per device).
    static let kekCapacity = 256

    /// The most derivations per minute (``Store/Configuration/maxReceivedKeyDerivationsPerMinute``).
    let perMinute: Int
    /// Derivations take turns, by source: pushes to one store that bring junk records cost it one
    /// core at a time, and memory for one Argon2id run (up to 1 GiB), and one source's queue never
    /// stands before another source's next record.
    let turns = DerivationTurns()

    private struct State: ~Copyable {
        /// KEKs by `salt ‖ limits`, the newest last in `order`.
        var keks: [[UInt8]: SecureBytes] = [:]
        var order: [[UInt8]] = []
        /// When derivations ran in the last minute (Unix ms).
        var times: [UInt64] = []
    }

    private let state = Mutex(State())

    init(perMinute: Int) {
        self.perMinute = perMinute
    }

    /// Whether another derivation fits this minute's ceiling; counts it when it does. The minute's
    /// last derivation is kept for a record that waited (deferred by an earlier import): whatever
    /// fresh records a carrier keeps sending, a waiting genuine key gets one derivation a minute.
    func take(waited: Bool, now: UInt64 = UnixMilliseconds.now()) -> Bool {
        state.withLock { state in
            state.times.removeAll { $0 + 60_000 <= now }
            let ceiling = waited || perMinute < 2 ? perMinute : perMinute - 1
            guard state.times.count < ceiling else { return false }
            state.times.append(now)
            return true
        }
    }

    /// The KEK derived for `cacheKey` (``Keyring/kekCacheKey(salt:limits:)``), if still kept.
    func kek(_ cacheKey: [UInt8]) -> SecureBytes? {
        state.withLock { $0.keks[cacheKey] }
    }

    /// Keeps `kek` for `cacheKey`, forgetting the oldest past ``kekCapacity``.
    func remember(_ kek: SecureBytes, for cacheKey: [UInt8]) {
        state.withLock { state in
            if state.keks.updateValue(kek, forKey: cacheKey) == nil { state.order.append(cacheKey) }
            if state.order.count > Self.kekCapacity { state.keks[state.order.removeFirst()] = nil }
        }
    }

    /// Forgets this minute's derivations, as if it had passed (for tests).
    func forgetTheMinute() {
        state.withLock { $0.times.removeAll() }
    }
}
