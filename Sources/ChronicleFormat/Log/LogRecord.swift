package import ChronicleSodium

/// The kinds of record in the `events` database.
package enum RecordKind: UInt8, Sendable {
    /// An ``Event``.
    case event = 1
    /// The first record of a compacted log: what the dropped prefix was (see ``Anchor``).
    case anchor = 3
    /// An event this build cannot read (a newer format, or unknown fields), kept as received:
    /// its identity is known and it relays, but it is never applied (see ``OpaqueEvent``).
    case opaque = 4
    /// From this record on, the chain is keyed with the chain subkey of the data key whose
    /// 16-byte id is the body; the record itself is hashed with that key.
    case chainKey = 5
    /// A run of records that retention dropped, stored under the run's last sequence: the
    /// first sequence, the chain hash before the run and a MAC (see ``Gap``). Its chain-hash
    /// field is the one the run's last record had.
    case gap = 6
}

/// A record of the local log as stored in the `events` database (docs/FORMAT.md, section 4):
///
/// ```
/// u8    record kind (1 event, 3 anchor, 4 opaque, 5 chain key, 6 gap)
/// n     body
/// [32]  chain hash = BLAKE2b-256(key: chain subkey once keyed, previous chain hash ‖ sequence (u64 BE) ‖ kind ‖ body)
/// ```
///
/// The chain hash links every record to all records before it, so an altered,
/// removed or reordered record breaks the chain at its own sequence. The chain is
/// keyed from the first chain-key record on (that record included).
package struct LogRecord: Sendable {
    package static let hashLength = 32
    /// The chain hash before the first record: 32 zero bytes.
    package static let noChain = [UInt8](repeating: 0, count: hashLength)

    package var kind: RecordKind
    package var body: [UInt8]
    package var hash: [UInt8]

    /// The chain hash of a record: BLAKE2b-256 of `previous ‖ u64 sequence ‖ kind ‖ body`, keyed
    /// with the chain key when the chain is keyed (FORMAT.md 4), written into `output`
    /// (``hashLength`` bytes). It runs once per record on every write, import, replay and verify,
    /// so the parts are absorbed in place (no input buffer), and the keyed state starts from a
    /// copy that has the key block already.
    package static func chainHash(
        previous: UnsafeRawBufferPointer, sequence: UInt64, kind: RecordKind, body: UnsafeRawBufferPointer, key: KeyedHash?,
        into output: UnsafeMutableRawBufferPointer
    ) {
        // Trailing closures, not one closure value: a stored closure allocates its context per record.
        if let key {
            key.hash(into: output) { absorbRecord($0, previous: previous, sequence: sequence, kind: kind, body: body) }
        } else {
            KeyedHash.unkeyed(into: output) { absorbRecord($0, previous: previous, sequence: sequence, kind: kind, body: body) }
        }
    }

    private static func absorbRecord(
        _ absorber: borrowing KeyedHash.Absorber, previous: UnsafeRawBufferPointer, sequence: UInt64, kind: RecordKind,
        body: UnsafeRawBufferPointer
    ) {
        absorber.absorb(previous)
        withUnsafeBytes(of: sequence.bigEndian) { absorber.absorb($0) }
        withUnsafeBytes(of: kind.rawValue) { absorber.absorb($0) }
        absorber.absorb(body)
    }

    /// The same bytes as above, the kind byte and the body side by side in one buffer.
    private static func absorbRecord(
        _ absorber: borrowing KeyedHash.Absorber, previous: UnsafeRawBufferPointer, sequence: UInt64, kindAndBody: UnsafeRawBufferPointer
    ) {
        absorber.absorb(previous)
        withUnsafeBytes(of: sequence.bigEndian) { absorber.absorb($0) }
        absorber.absorb(kindAndBody)
    }

    /// ``chainHash(previous:sequence:kind:body:key:into:)`` of arrays, as a new array (for tools
    /// and tests that forge or check a record apart from the write path).
    package static func chainHash(previous: [UInt8], sequence: UInt64, kind: RecordKind, body: [UInt8], key: KeyedHash?) -> [UInt8] {
        withUnsafeTemporaryAllocation(byteCount: hashLength, alignment: 1) { hash in
            previous.withUnsafeBytes { previous in
                body.withUnsafeBytes { body in chainHash(previous: previous, sequence: sequence, kind: kind, body: body, key: key, into: hash) }
            }
            return Array(UnsafeRawBufferPointer(hash))
        }
    }

    /// A record's first bytes, its kind and its body, with room for the chain hash that
    /// ``chain(_:previous:sequence:key:)`` appends.
    package static func unchained(_ kind: RecordKind, body: [UInt8]) -> [UInt8] {
        var bytes = [UInt8]()
        bytes.reserveCapacity(1 + body.count + hashLength)
        bytes.append(kind.rawValue)
        bytes.append(contentsOf: body)
        return bytes
    }

    /// Completes `record` (its kind byte and body, as ``unchained(_:body:)`` or
    /// `Event.unchainedRecord()` writes them) with its chain hash, and returns the hash: the next
    /// head's chain. The kind byte and the body lie side by side in `record`, so they are absorbed
    /// as one part (``chainHash(previous:sequence:kind:body:key:into:)`` absorbs the same bytes).
    /// Hashed into a stack buffer, then appended and copied once.
    package static func chain(_ record: inout [UInt8], previous: [UInt8], sequence: UInt64, key: KeyedHash?) -> [UInt8] {
        precondition(!record.isEmpty, "a record holds at least its kind byte")
        return withUnsafeTemporaryAllocation(byteCount: hashLength, alignment: 1) { hash in
            previous.withUnsafeBytes { previous in
                record.withUnsafeBytes { record in
                    // Trailing closures, as in chainHash: a closure value would allocate its context.
                    if let key {
                        key.hash(into: hash) { absorbRecord($0, previous: previous, sequence: sequence, kindAndBody: record) }
                    } else {
                        KeyedHash.unkeyed(into: hash) { absorbRecord($0, previous: previous, sequence: sequence, kindAndBody: record) }
                    }
                }
            }
            record.append(contentsOf: UnsafeRawBufferPointer(hash))
            return Array(UnsafeRawBufferPointer(hash))
        }
    }

    package func encoded() -> [UInt8] {
        var bytes = [UInt8]()
        bytes.reserveCapacity(1 + body.count + hash.count)
        bytes.append(kind.rawValue)
        bytes.append(contentsOf: body)
        bytes.append(contentsOf: hash)
        return bytes
    }

    /// Splits a stored record; the body is not decoded here.
    package init(decoding bytes: [UInt8], sequence: UInt64) throws(ChronicleError) {
        guard bytes.count > 1 + Self.hashLength else {
            throw .corruptRecord(sequence: sequence, reason: "record of \(bytes.count) bytes is too short")
        }
        guard let kind = RecordKind(rawValue: bytes[0]) else {
            throw .corruptRecord(sequence: sequence, reason: "unknown record kind \(bytes[0])")
        }
        self.kind = kind
        body = Array(bytes[1..<(bytes.count - Self.hashLength)])
        hash = Array(bytes[(bytes.count - Self.hashLength)...])
    }

    package init(kind: RecordKind, body: [UInt8], hash: [UInt8]) {
        self.kind = kind
        self.body = body
        self.hash = hash
    }

    /// The event in this record, or an error naming the sequence.
    package func event(sequence: UInt64) throws(ChronicleError) -> Event {
        guard kind == .event else { throw .corruptRecord(sequence: sequence, reason: "record is not an event") }
        do {
            return try Event(decoding: body)
        } catch {
            throw .corruptRecord(sequence: sequence, reason: error.description)
        }
    }
}
