import Chronicle
import ChronicleBenchSupport
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
/// a commit in the `.durable` mode is fsynced before it is published). The calls are timed in a
/// pass of their own, with nothing else running (as `UserDefaults.set` is): the change stream
/// that times durability shares the 2 cores and would stretch the caller's time.
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
    for i in 0..<count {
        written.withLock { $0[i] = clock.now }
        store[key] = i
        Thread.sleep(forTimeInterval: Double(nanoseconds(interval)) / 1e9)
    }
    let deadline = clock.now + .seconds(30)
    while durableAfter.withLock({ $0.count }) < count, clock.now < deadline { Thread.sleep(forTimeInterval: 0.001) }
    consumer.cancel()
    Thread.sleep(forTimeInterval: 0.05)  // the cancelled stream lets go of its thread
    var nonThrowing: [Double] = []
    for i in 0..<count {
        let before = clock.now
        store[key] = count + i
        nonThrowing.append(nanoseconds(clock.now - before))
        Thread.sleep(forTimeInterval: Double(nanoseconds(interval)) / 1e9)
    }

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

/// The same trickle from `threads` plain threads at once (an app's queues): every call's time on
/// its calling thread, for the non-throwing set and for `UserDefaults.set` (each thread with its
/// own `UserDefaults` object of the suite `suite`: the type is not `Sendable`).
func concurrentWriteLatencies(store: Store, suite: String, threads: Int, perThread: Int, interval: Duration) -> (
    nonThrowing: Latencies, userDefaults: Latencies
) {
    func onThreads(_ body: @escaping @Sendable (Int) -> [Double]) -> [Double] {
        let results = Mutex<[Double]>([])
        let finished = DispatchGroup()
        for thread in 0..<threads {
            finished.enter()
            Thread {
                let timed = body(thread)
                results.withLock { $0 += timed }
                finished.leave()
            }.start()
        }
        finished.wait()
        return results.withLock { $0 }
    }
    let pause = Double(nanoseconds(interval)) / 1e9
    let nonThrowing = onThreads { thread in
        let clock = ContinuousClock()
        let key = Key<Int>("bench.threads.\(thread)", default: -1)
        return (0..<perThread).map { i in
            let before = clock.now
            store[key] = i
            let took = nanoseconds(clock.now - before)
            Thread.sleep(forTimeInterval: pause)
            return took
        }
    }
    let userDefaults = onThreads { thread in
        let clock = ContinuousClock()
        let defaults = UserDefaults(suiteName: suite) ?? .standard
        return (0..<perThread).map { i in
            let before = clock.now
            defaults.set(i, forKey: "bench.threads.\(thread)")
            let took = nanoseconds(clock.now - before)
            Thread.sleep(forTimeInterval: pause)
            return took
        }
    }
    return (Latencies(nanoseconds: nonThrowing), Latencies(nanoseconds: userDefaults))
}

/// An atomic increment (`store.update`) against a durable set of the same key, `count` each,
/// alternating in rounds so the disk's drift hits both alike: every call's time.
func updateLatencies(store: Store, count: Int) throws -> (update: Latencies, durableSet: Latencies) {
    let clock = ContinuousClock()
    let key = Key<Int>("bench.update", default: 0)
    var update: [Double] = []
    var set: [Double] = []
    for i in 0..<count {
        var before = clock.now
        try store.update(key) { $0 += 1 }
        update.append(nanoseconds(clock.now - before))
        before = clock.now
        try store.set(i, for: key)
        set.append(nanoseconds(clock.now - before))
    }
    return (Latencies(nanoseconds: update), Latencies(nanoseconds: set))
}
