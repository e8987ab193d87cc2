import ChronicleFormat
/// Ticks every `interval` on the continuous clock until the task is cancelled: the job of
/// swift-async-algorithms' `AsyncTimerSequence`, without a dependency for every app.
///
/// The first tick comes one interval after iteration starts; a tick that is late (the consumer was
/// busy) is not made up for, so a slow consumer never sees a burst of ticks.
package struct Ticks: AsyncSequence {
    package typealias Element = Void
    package let interval: Duration

    package func makeAsyncIterator() -> Iterator { Iterator(interval: interval, deadline: .now + interval) }

    package struct Iterator: AsyncIteratorProtocol {
        package let interval: Duration
        package var deadline: ContinuousClock.Instant

        package mutating func next() async -> Void? {
            do {
                try await Task.sleep(until: deadline, clock: .continuous)
            } catch {
                return nil  // cancelled: the sequence ends
            }
            deadline += interval
            let now = ContinuousClock.now
            if deadline < now { deadline = now + interval }
            return ()
        }
    }

    package init(interval: Duration) {
        self.interval = interval
    }
}
