import ChronicleFormat
import ChronicleLog

/// What observation reads through, as GRDB's `ValueObservation` reads through a
/// `DatabaseReader`: the log a key's channel hears and reads, the decoding of a view entry for a
/// key, and where a failed read is reported. `Store` is the one reader; the channels never name it.
protocol ObservationReader: AnyObject, Sendable {
    /// The log observed; throws when the store is closed or could not open.
    var observedLog: EventLog { get throws }
    /// The value of `entry` for `key` (former names consulted; the default for no entry or a remove).
    func observedValue<K: ValueKey>(_ entry: ViewEntry?, for key: K) throws -> K.Value
    /// Reports an error met while observing `key` (a channel then keeps its last value).
    func reportObservationError<K: ValueKey>(_ error: any Error, key: K)
}
