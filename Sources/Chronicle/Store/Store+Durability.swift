import Foundation

extension Store {
    /// Returns once every change made so far in this process is durable: the non-throwing
    /// forms' changes, which are visible at once and committed moments later, included.
    ///
    /// Suspends instead of blocking a thread. In the `.noMetaSync` and `.noSync` durability
    /// modes it also flushes the data file, so it is the way to reach durability there.
    ///
    /// ```swift
    /// store[.theme] = .dark          // returns at once
    /// try await store.flush()        // now it survives a crash of the process or the machine
    /// ```
    public func flush() async throws(ChronicleError) {
        let eventLog = try eventLog
        do {
            try await BlockingWork.run { try eventLog.flush() }
        } catch {
            throw ChronicleError.wrap(error)
        }
    }

    /// Sets `value` for `key` and returns after the commit is durable, suspending (not
    /// blocking a thread) meanwhile: the form for async code.
    public func set<Value>(_ value: Value, for key: Key<Value>) async throws(ChronicleError) {
        try await durably { store throws(ChronicleError) in try store.set(value, for: key) }
    }

    /// Seals and sets `value` for `key`, returning after the commit is durable, suspending
    /// (not blocking a thread) meanwhile.
    public func set<Value>(_ value: Value, for key: SecretKey<Value>) async throws(ChronicleError) {
        try await durably { store throws(ChronicleError) in try store.set(value, for: key) }
    }

    /// Runs a blocking, durable write off the cooperative pool.
    private func durably(_ write: @escaping @Sendable (Store) throws(ChronicleError) -> Void) async throws(ChronicleError) {
        do {
            try await BlockingWork.run { [self] in try write(self) }
        } catch {
            throw ChronicleError.wrap(error)
        }
    }
}
