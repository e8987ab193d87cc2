package import ChronicleSodium

/// One change to one key: the unit of the log and of replication.
///
/// Its identity is the dot `(origin, counter)`, where `origin` is the *writer*: a
/// random id drawn each time a process opens the store, so a store restored from a
/// backup or rolled back by a power cut never mints an identity twice. `replica` is
/// the device's lasting identity (``Store/replicaID``), shown as the change's origin.
/// The conflict rule orders events by `(hlc, origin, counter)`.
///
/// ## Binary encoding, version 2 (docs/FORMAT.md, "Event")
///
/// ```
/// u8      format version (2)
/// [16]    origin: the writer id            ─┐ the identity prefix: the same
/// u64     counter (dense per writer, ≥ 1)  ─┘ in every version, past and future
/// [16]    replica id of the device
/// u64     HLC (ms << 16 | logical)
/// u8      domain (0 defaults, 1 secrets)
/// u8      op (0 set, 1 remove)
/// u8      sync policy (0 never, 1 manual, 2 automaticSmall)
/// u8      value encoding (ValueEncoding)
/// u8      flags (bit 0: payload is a sealed envelope)
/// u8 + n  key name, UTF-8, 1...255 bytes
/// u32 + n payload
/// u8      authenticator kind (0 none, 1 keyed BLAKE2b-256)
/// [16]    key id          (kind 1 only)
/// [32]    tag             (kind 1 only)
/// ```
/// The tag is BLAKE2b-256, keyed with the data key's authentication subkey, of every
/// byte before the tag. Version 1 (read, never written) has no replica and no
/// authenticator. Integers are big-endian. Nothing may follow the last field.
package struct Event: Sendable, Equatable {
    package static let formatVersion: UInt8 = 2
    /// The largest counter accepted from a peer: 2^48 events per writer is far beyond any real
    /// log, and a counter near 2^64 could never be followed by another.
    package static let maxCounter: UInt64 = 1 << 48
    /// The longest key name, in UTF-8 bytes.
    package static let maxKeyNameLength = 255

    package var origin: ReplicaID
    package var counter: UInt64
    package var replica: ReplicaID
    package var hlc: HLC
    package var domain: Domain
    package var op: ChangeOperation
    package var policy: SyncPolicy
    package var encoding: UInt8
    package var sealed: Bool
    package var key: String
    package var payload: [UInt8]
    package var authenticator: Authenticator?

    /// A keyed MAC over an event's canonical encoding, by a member of the sync group.
    package struct Authenticator: Sendable, Equatable {
        package static let tagLength = AuthenticationTag.length
        package var keyID: KeyID
        package var tag: AuthenticationTag

        package init(keyID: KeyID, tag: AuthenticationTag) {
            self.keyID = keyID
            self.tag = tag
        }
    }

    /// Equal field by field, the key name by its UTF-8 bytes as the encoding carries it: `String`'s
    /// `==` is canonical equivalence, and an event re-spelled in transit ("Key" as "\u{212A}ey",
    /// KELVIN SIGN) is another event, never a duplicate of the genuine one. A field added to
    /// `Event` must be compared here (a test counts them).
    package static func == (lhs: Event, rhs: Event) -> Bool {
        lhs.origin == rhs.origin && lhs.counter == rhs.counter && lhs.replica == rhs.replica && lhs.hlc == rhs.hlc
            && lhs.domain == rhs.domain && lhs.op == rhs.op && lhs.policy == rhs.policy && lhs.encoding == rhs.encoding
            && lhs.sealed == rhs.sealed && lhs.key.utf8.elementsEqual(rhs.key.utf8) && lhs.payload == rhs.payload
            && lhs.authenticator == rhs.authenticator
    }

    /// The dot: `origin ‖ counter`, as stored in the `dots` database.
    package var dot: [UInt8] { origin.bytes.appendingBigEndian(counter) }

    /// The event's place in the last-writer-wins order.
    package var order: ConflictOrder { ConflictOrder(hlc: hlc, origin: origin, counter: counter) }

    /// Whether this event wins over an entry with the given order.
    package func wins(over other: ConflictOrder) -> Bool { order > other }

    package init(
        origin: ReplicaID, counter: UInt64, replica: ReplicaID, hlc: HLC, domain: Domain, op: ChangeOperation, policy: SyncPolicy,
        encoding: UInt8, sealed: Bool, key: String, payload: [UInt8], authenticator: Authenticator? = nil
    ) {
        self.origin = origin
        self.counter = counter
        self.replica = replica
        self.hlc = hlc
        self.domain = domain
        self.op = op
        self.policy = policy
        self.encoding = encoding
        self.sealed = sealed
        self.key = key
        self.payload = payload
        self.authenticator = authenticator
    }

    // MARK: - Encoding

    package func encoded() -> [UInt8] {
        var writer = authenticatedPrefix(keyID: authenticator?.keyID)
        authenticator?.tag.write(to: &writer)
        return writer.bytes
    }

    /// The tag an authenticator carries for this event under `key` (the authentication subkey of
    /// data key `keyID`). `encoded`, when given, is this event's encoding as received.
    package func authenticationTag(keyID: KeyID, key: KeyedHash, encoded: [UInt8]?) -> AuthenticationTag {
        if let encoded, encoded.count > Authenticator.tagLength, encoded.first == Self.formatVersion {
            return encoded.withUnsafeBytes { bytes in
                AuthenticationTag(hashing: UnsafeRawBufferPointer(rebasing: bytes[..<(bytes.count - Authenticator.tagLength)]), key: key)
            }
        }
        return authenticatedBytes(keyID: keyID).withUnsafeBytes { AuthenticationTag(hashing: $0, key: key) }
    }

    /// Every byte an authenticator covers: the encoding up to and including the key id
    /// (or the kind byte 0 when `keyID` is `nil`).
    package func authenticatedBytes(keyID: KeyID?) -> [UInt8] { authenticatedPrefix(keyID: keyID).bytes }

    /// This event's log record before its chain hash: the kind byte and the encoding, with room
    /// for the hash (``LogRecord/chain(_:previous:sequence:key:)``), written once.
    package func unchainedRecord() -> [UInt8] {
        var writer = ByteWriter(capacity: 1 + 120 + key.utf8.count + payload.count + LogRecord.hashLength)
        writer.u8(RecordKind.event.rawValue)
        writePrefix(keyID: authenticator?.keyID, into: &writer)
        authenticator?.tag.write(to: &writer)
        return writer.bytes
    }

    private func authenticatedPrefix(keyID: KeyID?) -> ByteWriter {
        var writer = ByteWriter(capacity: 120 + key.utf8.count + payload.count)
        writePrefix(keyID: keyID, into: &writer)
        return writer
    }

    private func writePrefix(keyID: KeyID?, into writer: inout ByteWriter) {
        writer.fixedWidth(54) { fields in
            fields.u8(Self.formatVersion)
            fields.replicaID(origin)
            fields.u64(counter)
            fields.replicaID(replica)
            fields.u64(hlc.rawValue)
            fields.u8(domain.rawValue)
            fields.u8(op.rawValue)
            fields.u8(policy.rawValue)
            fields.u8(encoding)
            fields.u8(sealed ? 1 : 0)
        }
        writer.shortField(utf8: key.utf8)
        writer.longField(payload)
        if let keyID {
            writer.u8(1)
            keyID.write(to: &writer)
        } else {
            writer.u8(0)
        }
    }

    // MARK: - Decoding

    /// Decodes an event this build understands, checking every field and bound.
    package init(decoding bytes: [UInt8]) throws(DecodeFailure) {
        switch try bytes.withUnsafeBytes({ buffer in Event.parse(buffer) }).get() {
        case let .event(event): self = event
        case let .opaque(opaque): throw DecodeFailure(description: "an event this build cannot read (\(opaque.reason))")
        }
    }

    /// What a stored or received event record holds.
    package enum Parsed: Sendable {
        /// An event this build understands.
        case event(Event)
        /// A well-formed identity followed by what this build does not understand
        /// (a newer format version, or an unknown domain, operation, policy or flag):
        /// stored and relayed as opaque bytes, never applied.
        case opaque(OpaqueEvent)
    }

    /// The identity prefix: version, origin, counter.
    package static let identityLength = 1 + 16 + 8

    /// The authenticator every format version keeps at its end (docs/FORMAT.md, 3.4): when the
    /// 49th byte from the end is 1, the last 48 bytes are the key id and the tag, and the tag
    /// covers every byte before it. Returns the key id and where the tag starts.
    package static func trailingAuthenticator(_ bytes: [UInt8]) -> (keyID: KeyID, tagStart: Int)? {
        let length = 1 + KeyID.length + Authenticator.tagLength
        guard bytes.count >= identityLength + length, bytes[bytes.count - length] == 1 else { return nil }
        let id = bytes.withUnsafeBytes { KeyID(loading: $0, at: bytes.count - length + 1) }
        return (id, bytes.count - Authenticator.tagLength)
    }

    /// Parses an event in place; every offset is checked against the buffer's size.
    /// A key name's bytes as a string, or `nil` when they are not UTF-8. An ASCII name (nearly
    /// every name) skips the generic validation, which was a tenth of a replay.
    private static func keyName(_ bytes: UnsafeRawBufferPointer) -> String? {
        if !bytes.contains(where: { $0 >= 0x80 }) { return String(decoding: bytes, as: UTF8.self) }
        return String(validating: bytes, as: UTF8.self)
    }

    package static func parse(_ bytes: UnsafeRawBufferPointer) -> Result<Parsed, DecodeFailure> {
        func failure(_ text: String) -> Result<Parsed, DecodeFailure> { .failure(DecodeFailure(description: text)) }
        func u64(_ offset: Int) -> UInt64 { UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) }
        guard bytes.count >= identityLength else { return failure("truncated: \(bytes.count) bytes is shorter than an event's identity") }
        guard let origin = ReplicaID(bytes: Array(UnsafeRawBufferPointer(rebasing: bytes[1..<17]))) else { return failure("bad origin") }
        let counter = u64(17)
        guard counter > 0 else { return failure("counter 0 is not a valid dot") }
        let version = bytes[0]
        guard version >= 1 else { return failure("event format version 0 does not exist") }
        func opaque(_ reason: String) -> Result<Parsed, DecodeFailure> {
            .success(.opaque(OpaqueEvent(origin: origin, counter: counter, bytes: Array(bytes), reason: reason)))
        }
        guard version <= formatVersion else { return opaque("event format version \(version) is newer than this build's \(formatVersion)") }

        // Version 1 has no replica field; version 2 has one after the counter.
        var offset = identityLength
        var replica = origin
        if version >= 2 {
            guard bytes.count >= offset + 16 else { return failure("truncated replica id") }
            guard let id = ReplicaID(bytes: Array(UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + 16]))) else { return failure("bad replica id") }
            replica = id
            offset += 16
        }
        guard bytes.count >= offset + 8 + 5 + 1 + 4 else { return failure("truncated: \(bytes.count) bytes is shorter than an event") }
        let hlc = HLC(rawValue: u64(offset))
        let fields = offset + 8
        guard let domain = Domain(rawValue: bytes[fields]) else { return opaque("unknown domain \(bytes[fields])") }
        guard let op = ChangeOperation(rawValue: bytes[fields + 1]) else { return opaque("unknown operation \(bytes[fields + 1])") }
        guard let policy = SyncPolicy(rawValue: bytes[fields + 2]) else { return opaque("unknown sync policy \(bytes[fields + 2])") }
        let encoding = bytes[fields + 3]
        let flags = bytes[fields + 4]
        guard flags & ~1 == 0 else { return opaque("unknown flags \(flags)") }
        let keyLength = Int(bytes[fields + 5])
        let keyStart = fields + 6
        guard keyLength > 0, bytes.count >= keyStart + keyLength + 4 else { return failure("truncated or empty key name") }
        guard let key = Self.keyName(UnsafeRawBufferPointer(rebasing: bytes[keyStart..<keyStart + keyLength])) else {
            return failure("key name is not UTF-8")
        }
        let payloadStart = keyStart + keyLength + 4
        let payloadLength = Int(UInt32(bigEndian: bytes.loadUnaligned(fromByteOffset: keyStart + keyLength, as: UInt32.self)))
        guard bytes.count - payloadStart >= payloadLength else {
            return failure("truncated: payload of \(payloadLength) bytes, \(bytes.count - payloadStart) left")
        }
        let payload = Array(UnsafeRawBufferPointer(rebasing: bytes[payloadStart..<payloadStart + payloadLength]))
        var end = payloadStart + payloadLength
        var authenticator: Authenticator?
        if version >= 2 {
            guard bytes.count > end else { return failure("truncated: no authenticator kind") }
            switch bytes[end] {
            case 0:
                end += 1
            case 1:
                guard bytes.count >= end + 1 + KeyID.length + Authenticator.tagLength else { return failure("truncated authenticator") }
                let tagStart = end + 1 + KeyID.length
                authenticator = Authenticator(keyID: KeyID(loading: bytes, at: end + 1), tag: AuthenticationTag(loading: bytes, at: tagStart))
                end = tagStart + Authenticator.tagLength
            default:
                return opaque("unknown authenticator kind \(bytes[end])")
            }
        }
        guard bytes.count == end else { return failure("\(bytes.count - end) unexpected trailing bytes") }
        return .success(
            .event(
                Event(
                    origin: origin, counter: counter, replica: replica, hlc: hlc, domain: domain, op: op, policy: policy,
                    encoding: encoding, sealed: flags & 1 == 1, key: key, payload: payload, authenticator: authenticator)))
    }
}

/// An event this build cannot read: its identity, and its bytes as received.
///
/// It is stored (so its identity is known and never imported twice) and relayed
/// unchanged to peers that may understand it, but never applied to a view.
package struct OpaqueEvent: Sendable, Equatable {
    package var origin: ReplicaID
    package var counter: UInt64
    package var bytes: [UInt8]
    /// Why this build cannot read it.
    package var reason: String

    package init(origin: ReplicaID, counter: UInt64, bytes: [UInt8], reason: String) {
        self.origin = origin
        self.counter = counter
        self.bytes = bytes
        self.reason = reason
    }

    package var dot: [UInt8] { origin.bytes.appendingBigEndian(counter) }
}

extension OpaqueEvent {
    /// The relay-only record body of an opaque log record: an event this build cannot read, or a
    /// readable second version of an identity kept by a store that verifies nothing.
    package init?(relayRecord body: some Collection<UInt8>) {
        let bytes = Array(body)
        switch bytes.withUnsafeBytes({ Event.parse($0) }) {
        case let .success(.opaque(item)): self = item
        case let .success(.event(event)): self.init(origin: event.origin, counter: event.counter, bytes: bytes, reason: "kept to relay")
        case .failure: return nil
        }
    }
}