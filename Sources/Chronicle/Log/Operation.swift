/// What an event does to its key.
public enum Operation: UInt8, Sendable, Hashable, CustomStringConvertible {
    /// Sets a value.
    case set = 0
    /// Removes the value (a tombstone: it wins over older sets).
    case remove = 1

    public var description: String { self == .set ? "set" : "remove" }
}
