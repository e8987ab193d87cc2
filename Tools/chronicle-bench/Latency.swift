import Chronicle
import Foundation
import Synchronization

/// Latencies of single calls: what a caller on the main thread feels.
struct Latencies {
    var nanoseconds: [Double]

    func percentile(_ p: Double) -> Double {
        guard !nanoseconds.isEmpty else { return 0 }
        let sorted = nanoseconds.sorted()
        return sorted[min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1)]
    }

    var summary: String { "p50 \(format(percentile(0.5))), p99 \(format(percentile(0.99)))" }
}

func nanoseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1e9 + Double(duration.components.attoseconds) / 1e9
}

/// A steady trickle of writes (one every `interval`), as an app makes them from its main thread:
/// the time each call takes on the calling thread, and for the non-throwing form the time until
/// the change is durable (it reaches `changes(after:)`, which hears only committed events, and
/// a commit in the `.durable` mode is fsynced before it is published).
func writeLatencies(store: Store, defaults: UserDefaults, count: Int, interval: Duration) throws -> (
    nonThrowing: Latencies, durableAfter: Latencies, durable: Latencies, userDefaults: Latencies
) {
    let clock = ContinuousClock()
    let key = Key<Int>("bench.trickle", default: -1)
    let start = try store.logEntries().last?.sequence ?? 0
    let written = Mutex<[Int: ContinuousClock.Instant]>([:])
    let durableAfter = Mutex<[Double]>([])
    let consumer = Task.detached {
        for await change in store.changes(after: start) where change.key == key.name {
            let arrived = clock.now
            guard let value = try? change.value(as: Int.self), let sent = written.withLock({ $0[value] }) else { continue }
            durableAfter.withLock { $0.append(nanoseconds(arrived - sent)) }
        }
    }
    var nonThrowing: [Double] = []
    for i in 0..<count {
        let before = clock.now
        written.withLock { $0[i] = before }
        store[key] = i
        nonThrowing.append(nanoseconds(clock.now - before))
        Thread.sleep(forTimeInterval: Double(nanoseconds(interval)) / 1e9)
    }
    let deadline = clock.now + .seconds(30)
    while durableAfter.withLock({ $0.count }) < count, clock.now < deadline { Thread.sleep(forTimeInterval: 0.001) }
    consumer.cancel()

    var durable: [Double] = []
    for i in 0..<count {
        let before = clock.now
        try store.set(i, for: key)
        durable.append(nanoseconds(clock.now - before))
        Thread.sleep(forTimeInterval: Double(nanoseconds(interval)) / 1e9)
    }
    var userDefaults: [Double] = []
    for i in 0..<count {
        let before = clock.now
        defaults.set(i, forKey: "bench.trickle")
        userDefaults.append(nanoseconds(clock.now - before))
        Thread.sleep(forTimeInterval: Double(nanoseconds(interval)) / 1e9)
    }
    return (Latencies(nanoseconds: nonThrowing), Latencies(nanoseconds: durableAfter.withLock { $0 }),
            Latencies(nanoseconds: durable), Latencies(nanoseconds: userDefaults))
}
