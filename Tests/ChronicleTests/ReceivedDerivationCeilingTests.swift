@_spi(Wire) @testable import Chronicle
@testable import ChronicleLog
import ChronicleSodium
import ChronicleTesting
import Foundation
import Synchronization
import Testing

/// The per-minute ceiling on derivations for received key records
/// (``Store/Configuration/maxReceivedKeyDerivationsPerMinute``).
struct ReceivedDerivationCeilingTests {
    /// A carrier with a member's token (or any feed the member imports all the time, such as a
    /// `chronicle serve` that takes pushes) sends a few fresh junk records each minute, each
    /// named by an event, as soon as the minute's derivations free up. A batch tries its own
    /// records before the waiting ones, and the slot a batch keeps for the oldest waiting
    /// record is subject to the same ceiling, so a genuine new member's key waits for as long
    /// as the carrier keeps this up: "waits, never refused" becomes never opened.
    @Test func aWaitingKeyOpensWhateverJunkTakesEachMinutesDerivations() async throws {
        try await HostilePeerTests().withGroup { victim, _, spare in
            let bounds = CarrierCostBoundsTests()
            var configuration = passphraseConfiguration("the group")
            configuration.maxReceivedKeyDerivationsPerMinute = 3
            let member = try Store(directory: victim.directory, configuration: configuration)
            let keyring = try member.crypto.get()
            let model = try #require(try EventRange(decoding: Array(try victim.exportRange(after: 0))).events.first { $0.authenticator != nil })
            func carrierPushes() throws {
                let keys = (0..<3).map { _ in bounds.junkKeyRecord() }
                let events = keys.map { key in
                    var event = model
                    event.origin = ReplicaID.random()
                    event.authenticator?.keyID = key.id
                    return event
                }
                _ = try member.importRange(
                    Data(EventRange(source: ReplicaID.random(), epoch: .random(), after: 0, upTo: 0, head: 0, keys: keys, events: events, opaque: []).encoded()),
                    from: "HTTP push")
            }
            try carrierPushes()
            let (range, _) = try bounds.newcomersRange(spare)
            _ = try member.importRange(Data(range.encoded()), from: "HTTP push")
            #expect(try member.quarantinedItems().contains { $0.reason == .derivationBudget })
            for _ in 0..<5 where member[.groupTheme] != "from the newcomer" {
                keyring.received.forgetTheMinute()  // a minute passes
                try carrierPushes()  // the carrier pushes all the time: it is first when derivations free up
                _ = try member.importRange(Data(range.encoded()), from: "HTTP push")  // the newcomer pushes again
            }
            #expect(member[.groupTheme] == "from the newcomer", "five minutes of three junk records a minute kept the newcomer's key waiting")
        }
    }
}
