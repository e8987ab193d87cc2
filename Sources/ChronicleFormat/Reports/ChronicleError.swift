public import Foundation

/// The one error type of Chronicle: every case says what went wrong and what to do.
///
/// Secret values never appear in an error: cases name keys and sequences, not values.
public enum ChronicleError: Error, Sendable, Equatable, CustomStringConvertible, LocalizedError {
    /// A key name is empty or longer than 255 UTF-8 bytes.
    case invalidKeyName(String, reason: String)
    /// An encoded value is larger than the store's `maxValueSize`.
    case valueTooLarge(key: String, size: Int, limit: Int)
    /// A stored value could not be decoded as the key's type (for example after the type changed).
    case decodingFailed(key: String, reason: String)
    /// A value could not be encoded.
    case encodingFailed(key: String, reason: String)
    /// The log record at `sequence` does not decode or breaks the hash chain.
    case corruptRecord(sequence: UInt64, reason: String)
    /// The view entry of a key does not decode or differs from a replay of the log
    /// (`chronicle replay` or ``Store/rebuildViews()`` rebuilds the views from the log).
    case corruptViewEntry(key: String, reason: String)
    /// An entry of the store's `meta` database (log head, identity, epoch) is malformed.
    case corruptMeta(entry: String, reason: String)
    /// A wrapped data-key record does not decode.
    case corruptKeyRecord(id: String, reason: String)
    /// A sealed record at `sequence` failed authentication: it was altered or moved.
    case tampered(sequence: UInt64?, key: String?)
    /// The passphrase or key file does not unwrap the store's data key.
    case wrongKey
    /// The data key needed to read or write sealed values is not available on this replica.
    case keyUnavailable(reason: String)
    /// The store was written by an incompatible version of Chronicle.
    case incompatibleFormat(found: UInt32, supported: UInt32)
    /// LMDB reported an error.
    case storage(code: Int32, message: String)
    /// A file-system operation failed.
    case io(path: String, reason: String)
    /// The store could not be opened (for example `Store.standard` at a location that is not writable).
    case storeUnavailable(reason: String)
    /// An argument was out of range or inconsistent.
    case invalidArgument(String)
    /// Data received from a peer or read from a file is malformed; nothing was applied.
    case malformedInput(String)
    /// Replication with a peer failed; what was acknowledged before the failure is kept, and the next sync resumes.
    case syncFailed(peer: String, reason: String)
    /// The operation was cancelled (its task was cancelled); nothing of it was applied.
    case cancelled
    /// An error from below Chronicle that fits no other case, with its type and text.
    case unexpected(type: String, description: String)

    public var description: String {
        switch self {
        case let .invalidKeyName(name, reason):
            "invalid key name \"\(name.prefix(64))\": \(reason)"
        case let .valueTooLarge(key, size, limit):
            "value for key \"\(key)\" is \(size) bytes, over the limit of \(limit) bytes (raise Configuration.maxValueSize or store less)"
        case let .decodingFailed(key, reason):
            "the stored value of key \"\(key)\" cannot be decoded as the key's type: \(reason) (did the type change? remove the key or migrate it)"
        case let .encodingFailed(key, reason):
            "the value for key \"\(key)\" cannot be encoded: \(reason)"
        case let .corruptRecord(sequence, reason):
            "the log record at sequence \(sequence) is corrupt: \(reason) (run `chronicle verify`; restore from a replica or backup)"
        case let .corruptViewEntry(key, reason):
            "the view entry of key \"\(key)\" is corrupt: \(reason) (run `chronicle replay` to rebuild the views from the log)"
        case let .corruptMeta(entry, reason):
            "the store's meta entry \"\(entry)\" is corrupt: \(reason) (run `chronicle verify`; restore from a replica or backup)"
        case let .corruptKeyRecord(id, reason):
            "the wrapped data key \(id) is corrupt: \(reason) (import the group's keys from another replica)"
        case let .tampered(sequence, key):
            "a sealed record failed authentication"
                + (sequence.map { " at sequence \($0)" } ?? "")
                + (key.map { " (key \"\($0)\")" } ?? "")
                + ": it was altered or moved; nothing was applied"
        case .wrongKey:
            "the passphrase or key file does not open this store's data key"
        case let .keyUnavailable(reason):
            "the data key for sealed values is not available: \(reason)"
        case let .incompatibleFormat(found, supported):
            "the store has format version \(found); this version of Chronicle reads up to \(supported) (upgrade Chronicle)"
        case let .storage(code, message):
            "storage error \(code): \(message)"
        case let .io(path, reason):
            "\(path): \(reason)"
        case let .storeUnavailable(reason):
            "the store is unavailable: \(reason)"
        case let .invalidArgument(text):
            "invalid argument: \(text)"
        case let .malformedInput(text):
            "malformed input, nothing of it applied: \(text)"
        case let .syncFailed(peer, reason):
            "sync with \(peer) failed: \(reason) (the next sync resumes where this one stopped)"
        case .cancelled:
            "the operation was cancelled; nothing of it was applied"
        case let .unexpected(type, description):
            "unexpected \(type): \(description)"
        }
    }

    public var errorDescription: String? { description }

    /// Whether the error reports damage found in the store's files: a record, a view entry, a
    /// `meta` entry or a key record that was altered, deleted or corrupted, or a sealed record
    /// that failed authentication. A store refuses to open (or to go on) over damage rather than
    /// write over it; `chronicle verify` says where it is, and `chronicle salvage --into DIR` copies
    /// what verifies. Every other case is a failure to do something, not a finding about the files.
    ///
    /// ```swift
    /// do { try Store.bootstrap(appID: "com.example.app") } catch where error.isDamage {
    ///     showStoreDamagedAlert(error)   // not "empty": the store was refused
    /// }
    /// ```
    public var isDamage: Bool {
        switch self {
        case .corruptRecord, .corruptViewEntry, .corruptMeta, .corruptKeyRecord, .tampered: true
        default: false
        }
    }
}

extension ChronicleError {
    /// What went wrong, without a byte of the value: errors and logs may be read by anyone, and
    /// the value may be a secret. `DecodingError`/`EncodingError` descriptions quote values and
    /// dictionary keys, so only their kind and the types involved are kept.
    package static func valueFreeDescription(of error: any Error) -> String {
        switch error {
        case let error as DecodingError:
            switch error {
            case let .typeMismatch(type, _): return "JSON: a value is not of type \(type)"
            case let .valueNotFound(type, _): return "JSON: a value of type \(type) is missing"
            case .keyNotFound: return "JSON: a key the type needs is missing"
            case .dataCorrupted: return "JSON: the stored data is not valid for the type"
            @unknown default: return "JSON: the stored value does not decode"
            }
        case let error as EncodingError:
            switch error {
            case let .invalidValue(value, _): return "a value of type \(type(of: value)) cannot be encoded as JSON"
            @unknown default: return "the value cannot be encoded as JSON"
            }
        case let error as DecodeFailure: return error.description  // written here, never quoting a value
        default: return "\(type(of: error))"
        }
    }
}
