/// What an event does to its key: set a value, or remove it.
///
/// (Not `Operation`: that name is Foundation's, and every file importing both would need to qualify it.)
public enum ChangeOperation: UInt8, Sendable, Hashable, CustomStringConvertible {
    /// Sets a value.
    case set = 0
    /// Removes the value (a tombstone: it wins over older sets).
    case remove = 1

    public var description: String { self == .set ? "set" : "remove" }
}
