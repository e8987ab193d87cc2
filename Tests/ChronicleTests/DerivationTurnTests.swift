@testable import Chronicle
@testable import ChronicleLog
import ChronicleFormat
import ChronicleSodium
import ChronicleTesting
import Foundation
import Synchronization
import Testing

/// Who waits for a key derivation of received records (Argon2id, up to a core and 1 GiB for
/// seconds): only an import that needs one, and behind one run of each other source at most.
struct DerivationTurnTests {
    /// A gate the code under test stops at: `entered` is signalled when a turn of `source`
    /// starts, which then waits until the test opens it.
    final class Gate: Sendable {
        let source: @Sendable (String) -> Bool
        let entered = DispatchSemaphore(value: 0)
        let opened = DispatchSemaphore(value: 0)
        init(holding source: @escaping @Sendable (String) -> Bool) { self.source = source }

        func install(on turns: DerivationTurns) {
            turns.gate.withLock {
                $0 = { [self] running in
                    guard source(running) else { return }
                    entered.signal()
                    opened.wait()
                }
            }
        }

        func open() { opened.signal() }
    }

    /// Runs `body` on a thread of its own; `done` is signalled when it returns.
    func onThread(_ body: @escaping @Sendable () -> Void) -> DispatchSemaphore {
        let done = DispatchSemaphore(value: 0)
        Thread {
            body()
            done.signal()
        }.start()
        return done
    }

    /// Three carriers queue 40 derivations each behind a turn held at a gate; a newcomer's one
    /// runs after one turn of each carrier, whatever they queued (with one queue for everyone,
    /// it ran after all 120).
    @Test func aSourcesQueueDelaysAnotherSourceByOneTurnEach() throws {
        let turns = DerivationTurns()
        let gate = Gate { $0 == "held" }
        gate.install(on: turns)
        let queued = DispatchSemaphore(value: 0)
        turns.queued.withLock { $0 = { _ in queued.signal() } }
        var finished: [DispatchSemaphore] = [onThread { _ = try? turns.run(source: "held") {} }]
        gate.entered.wait()
        let carriers = ["carrier 1", "carrier 2", "carrier 3"]
        for carrier in carriers {
            for _ in 0..<40 {
                finished.append(onThread { _ = try? turns.run(source: carrier) {} })
                queued.wait()  // in line before the next one starts
            }
        }
        finished.append(onThread { _ = try? turns.run(source: "newcomer") {} })
        queued.wait()
        #expect(turns.waitingCount == 121)
        gate.open()
        for done in finished { done.wait() }
        let served = turns.servedSources
        let position = try #require(served.firstIndex(of: "newcomer"))
        #expect(position <= 1 + carriers.count, "the newcomer's derivation ran after \(position) others: \(served.prefix(8))")
        #expect(served.count == 122)
    }

    /// A carrier's derivation is held at a gate (an Argon2id run that takes long) while key
    /// records earlier imports left waiting sit in the quarantine. An import whose records need
    /// no derivation (an honest member's events, whose key this member holds, and a range with no
    /// key record at all) applies at once: it derives nothing and waits for nothing. Before, every
    /// import kept a derivation for the records left waiting, and waited its turn behind the gate.
    @Test func anImportThatNeedsNoDerivationDoesNotWaitForOneHeldAtAGate() async throws {
        try await HostilePeerTests().withGroup { victim, honest, _ in
            let keyring = try victim.crypto.get()
            let model = try #require(try EventRange(decoding: Array(try victim.exportRange(after: 0))).events.first { $0.authenticator != nil })
            @Sendable func junk(_ count: Int) -> Data {
                let records = (0..<count).map { _ in CarrierCostBoundsTests().junkKeyRecord() }
                let events = records.map { record in
                    var event = model
                    event.origin = ReplicaID.random()
                    event.authenticator?.keyID = record.id
                    return event
                }
                return Data(EventRange(source: ReplicaID.random(), epoch: .random(), after: 0, upTo: 0, head: 0, keys: records, events: events, opaque: []).encoded())
            }
            // This member holds the honest member's key (derived once, at its first write's import).
            try honest.set("first", for: .groupToken)
            _ = try victim.importRange(try honest.exportRange(after: 0), from: "honest")
            _ = try victim.importRange(junk(16), from: "a carrier")
            victim.waitForKeyRecordRetries()
            #expect(try victim.quarantinedItems().contains { $0.reason == .derivationBudget }, "no record waits")
            let gate = Gate { $0 == "another carrier" }
            gate.install(on: keyring.received.turns)
            let oneMore = junk(1)
            let carrier = onThread { _ = try? victim.importRange(oneMore, from: "another carrier") }
            gate.entered.wait()
            // The honest member's next write, authenticated with a key this member holds.
            try honest.set("while a derivation is held", for: .groupTheme)
            let honestRange = try honest.exportRange(after: 0)
            let applied = onThread { _ = try? victim.importRange(honestRange, from: "honest") }
            var stripped = try EventRange(decoding: Array(honestRange))
            stripped.keys = []
            let bareRange = Data(stripped.encoded())
            let bare = onThread { _ = try? victim.importRange(bareRange, from: "honest, no key records") }
            // A generous hang guard: it fails only if the imports never return while the gate holds.
            let returned = applied.wait(timeout: hangGuardDeadline) == .success && bare.wait(timeout: hangGuardDeadline) == .success
            #expect(returned, "an import that needs no derivation waited for one held at a gate")
            #expect(victim[.groupTheme] == "while a derivation is held")
            gate.open()
            carrier.wait()
            keyring.received.turns.gate.withLock { $0 = nil }
            victim.waitForKeyRecordRetries()
            #expect(try victim.verify().isSound)
        }
    }
}
