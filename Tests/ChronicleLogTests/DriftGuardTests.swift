@testable import ChronicleFormat
@testable import ChronicleLog
import Testing

/// The drift guard's rule without a store: which events wait, and when they may join the views.
@Suite struct DriftGuardTests {
    let rule = DriftGuard.Rule(milliseconds: 60_000)
    let now: UInt64 = 1_800_000_000_000

    func stamped(_ milliseconds: UInt64) -> HLC { HLC(rawValue: milliseconds << 16) }

    @Test func anEventWithinTheDriftJoinsTheViews() {
        #expect(!rule.isAhead(stamped(now), now: now))
        #expect(!rule.isAhead(stamped(now + 60_000), now: now), "exactly the drift ahead still joins")
        #expect(!rule.isAhead(stamped(0), now: now), "an event from the past never waits")
    }

    @Test func anEventFurtherAheadWaitsUntilItsTimeLessTheDrift() {
        let event = stamped(now + 60_001)
        #expect(rule.isAhead(event, now: now))
        let due = rule.dueTime(of: event.milliseconds)
        #expect(due == now + 1)
        #expect(!rule.isAhead(event, now: due), "at its due time it joins")
        #expect(rule.isAhead(event, now: due - 1))
    }

    @Test func theRuleSaturatesAtTheEndsOfTime() {
        #expect(rule.dueTime(of: 5) == 0, "an early stamp is due at once, never before 0")
        #expect(!rule.isAhead(HLC(rawValue: .max), now: .max), "no overflow at the far end")
    }
}
