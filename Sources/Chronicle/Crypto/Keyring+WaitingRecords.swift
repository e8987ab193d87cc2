import ChronicleFormat
import ChronicleLog
import ChronicleSodium
import Foundation
import Synchronization

/// One retry of waiting key records at a time per keyring, on a thread of its own: an import
/// that finds records waiting starts it and goes on, so no push waits for a derivation it does
/// not need, and a retry asked for while one runs runs again after it.
final class WaitingRecordRetry: Sendable {
    private struct State {
        var running = false
        var again = false
        /// The source whose waiting record the last derivation of a pass was for.
        var lastSource: String?
    }

    private let state = Mutex(State())
    private let passes = DispatchGroup()

    /// The source after the one served last, in `sources`' order (the first when none was, or
    /// when it has nothing waiting now): the rotation of waiting records by source.
    func nextSource(among sources: [String]) -> String? {
        guard !sources.isEmpty else { return nil }
        return state.withLock { state in
            state.lastSource.flatMap { sources.firstIndex(of: $0) }.map { sources[($0 + 1) % sources.count] } ?? sources[0]
        }
    }

    /// Records that `source` was served (only once its derivation took place: a source whose
    /// turn found the minute's ceiling spent keeps its place).
    func served(_ source: String) {
        state.withLock { $0.lastSource = source }
    }

    /// Runs `pass` on a thread of its own, unless a pass runs: then that one runs once more.
    func start(_ pass: @escaping @Sendable () -> Void) {
        let starts = state.withLock { state -> Bool in
            guard !state.running else {
                state.again = true
                return false
            }
            state.running = true
            passes.enter()  // under the lock: a wait that sees `running` sees the pass
            return true
        }
        guard starts else { return }
        let thread = Thread { [self] in
            while true {
                pass()
                let more = state.withLock { state -> Bool in
                    if state.again {
                        state.again = false
                        return true
                    }
                    state.running = false
                    return false
                }
                if !more { break }
            }
            passes.leave()
        }
        thread.name = "chronicle.waiting-key-records"
        thread.start()
    }

    /// Waits until no pass runs (tests, and a closing store).
    func waitUntilIdle() { passes.wait() }
}

extension Keyring {
    /// Tries again the key records earlier imports left waiting (for the batch's or the minute's
    /// derivation budget), apart from any import: each pass (one after each import that finds the
    /// quarantine holding anything) runs at most ``waitingDerivationsPerPass`` derivations, each
    /// for the oldest waiting record of the next source in a rotation, so what one source queued
    /// delays another source's record by one derivation per other waiting source. That derivation takes its source's turn
    /// (``DerivationTurns``) within the minute's ceiling, whose last derivation is kept for these.
    /// Records that need no derivation (a key this store holds now, a cost out of bounds, a record
    /// that did not open before) are settled in the same pass. `release` applies the outcome of
    /// each record (an import of no items with that screening): the record stored and the events
    /// waiting for it released, or the record set aside for good.
    func retryWaitingRecords(release: @escaping @Sendable (KeyScreening) -> Void) {
        guard isMember else { return }
        waitingRetry.start { [weak self] in self?.retryWaitingPass(release: release) }
    }

    private func retryWaitingPass(release: @Sendable (KeyScreening) -> Void) {
        guard let deferred = try? keyRecords.deferredKeyRecordsWithSources(), !deferred.isEmpty,
            let known = try? Set(keyRecords.wrappedKeyIDs())
        else { return }
        let tagKey = try? unopenedTagKey(needed: deferred.contains { $0.record.kind == .passphrase })
        var needing: [(quarantineID: UInt64, record: WrappedKey, source: String)] = []
        for item in deferred {
            let (record, retired) = (item.record, [item.quarantineID])
            if known.contains(record.id) {
                release(KeyScreening(retired: retired))  // this store holds that key now: another record under its id is junk to it
            } else if let problem = Self.boundsProblem(record, minimum: travelLimits) {
                release(KeyScreening(rejected: [(record, .keyParametersOutOfBounds, problem)], retired: retired))
            } else if let tagKey, (try? keyRecords.unopened([Self.unopenedTag(record, key: tagKey)]))?.isEmpty == false {
                release(KeyScreening(rejected: [(record, .unopenableKey, "this store's key source did not open key \(record.id) when it was tried before")], retired: retired))
            } else if !needsDerivation(record) {
                settle(item, tagKey: tagKey, release: release)
            } else {
                needing.append(item)
            }
        }
        for _ in 0..<Self.waitingDerivationsPerPass {
            var sources: [String] = []
            for item in needing where !sources.contains(item.source) { sources.append(item.source) }
            // Past the minute's ceiling the records wait for the pass a later import starts.
            guard let source = waitingRetry.nextSource(among: sources), let index = needing.firstIndex(where: { $0.source == source }),
                received.take(waited: true)
            else { return }
            waitingRetry.served(source)
            let item = needing.remove(at: index)
            settle(item, tagKey: tagKey, release: release)
            // A record that opened makes the others under its id junk to this store: they go now.
            if (try? keyRecords.wrappedKeyIDs().contains(item.record.id)) == true {
                let others = needing.filter { $0.record.id == item.record.id }
                needing.removeAll { $0.record.id == item.record.id }
                if !others.isEmpty { release(KeyScreening(retired: others.map(\.quarantineID))) }
            }
        }
    }

    /// The most derivations one retry pass runs: a batch's budget less the one an import's own
    /// records may still need in the same minute.
    static let waitingDerivationsPerPass = derivationsPerBatch - 1

    /// Unwraps a waiting record (deriving in its source's turn when it must) and releases the outcome.
    private func settle(_ item: (quarantineID: UInt64, record: WrappedKey, source: String), tagKey: SecureBytes?, release: @Sendable (KeyScreening) -> Void) {
        let (record, retired) = (item.record, [item.quarantineID])
        do {
            let key = try unwrapReceived(record, source: item.source)
            state.withLock { $0.dataKeys[record.id] = key }
            release(KeyScreening(accepted: [record], retired: retired))
        } catch ChronicleError.wrongKey {
            if let tagKey { try? keyRecords.rememberUnopened([Self.unopenedTag(record, key: tagKey)]) }
            release(KeyScreening(rejected: [(record, .unopenableKey, "this store's key source does not open key \(record.id)")], retired: retired))
        } catch {
            // The derivation failed (Argon2id could not get its memory): the record waits.
        }
    }
}
