/// A change made with a non-throwing form (`store[key] = value`, a `@Default` or `@Secret`
/// setter) that could not be committed.
///
/// The change was visible to this process from the moment it was made; when its commit failed,
/// the keys went back to their stored values (observers hear them again). Each failure is
/// published to ``Store/writeFailures`` and thrown by the next ``Store/flush()``.
///
/// ```swift
/// Task {
///     for await failure in store.writeFailures {
///         showAlert("Settings could not be saved: \(failure.error)")
///     }
/// }
/// ```
public struct WriteFailure: Sendable, Equatable, CustomStringConvertible {
    /// The names of the keys whose changes were dropped.
    public let keys: [String]
    /// Why (a full disk says so, with what to do).
    public let error: ChronicleError

    public var description: String { "changes of \(keys.joined(separator: ", ")) were not saved: \(error)" }

    package init(keys: [String], error: ChronicleError) {
        self.keys = keys
        self.error = error
    }
}
