@testable import ChronicleHub
import Testing

/// A tenant's turns on one node, without a database: who leads, who waits, and what the node
/// holds while a turn commits.
@Suite struct AppendQueueTests {
    static func push(_ tenant: Int64, _ name: String) -> AppendQueue.Push {
        AppendQueue.Push(body: [1, 2, 3], device: HubDevice(tenant: tenant, name: name, tokenHash: []))
    }

    /// A push that arrives before the turn takes its batch is carried by that turn: the node
    /// holds both, though none waits.
    @Test func aPushTakenIntoTheTurnIsStillHeld() async {
        let queue = AppendQueue()
        guard case .lead = await queue.enqueue(Self.push(7, "one")) else { Issue.record("the first push does not lead"); return }
        let second = Task { await queue.enqueue(Self.push(7, "two")) }
        while queue.held(7) < 2 { await Task.yield() }
        let taken = queue.take(7, budget: 1 << 20, count: 63)
        #expect(taken.map(\.push.device.name) == ["two"])
        #expect(queue.held(7) == 2, "the turn carries the second push")
        #expect(queue.held(8) == 0, "another tenant's turns are its own")
        taken[0].continuation.resume(returning: .done(.failure(CancellationError())))
        queue.finish(7)
        #expect(queue.held(7) == 0)
        guard case .done = await second.value else { Issue.record("the carried push was not answered"); return }
    }

    /// A push that arrives after the turn took its batch waits, and leads the next turn.
    @Test func aPushAfterTheBatchLeadsTheNextTurn() async {
        let queue = AppendQueue()
        guard case .lead = await queue.enqueue(Self.push(7, "one")) else { Issue.record("the first push does not lead"); return }
        #expect(queue.take(7, budget: 1 << 20, count: 63).isEmpty)
        let second = Task { await queue.enqueue(Self.push(7, "two")) }
        while queue.held(7) < 2 { await Task.yield() }
        queue.finish(7)
        guard case .lead = await second.value else { Issue.record("the waiting push does not lead"); return }
        #expect(queue.held(7) == 1)
        queue.finish(7)
        #expect(queue.held(7) == 0)
    }
}
