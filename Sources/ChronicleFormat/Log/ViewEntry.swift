/// The current state of one key in a view (`defaults` or `secrets`): the
/// winning event's order fields and its payload (still sealed in `secrets`).
///
/// ## Binary encoding, version 2
///
/// ```
/// u8      entry version (2; version 1 has no replica and is read too)
/// u64     HLC
/// [16]    origin (the writer)
/// u64     counter
/// u64     local sequence of the event
/// u8      op, u8 policy, u8 encoding, u8 flags (as in the event)
/// u32 + n payload
/// [16]    replica id of the device that wrote it        (version 2)
/// ```
package struct ViewEntry: Sendable, Equatable {
    package static let version: UInt8 = 2

    package var hlc: HLC
    package var origin: ReplicaID
    package var replica: ReplicaID
    package var counter: UInt64
    package var sequence: UInt64
    package var op: ChangeOperation
    package var policy: SyncPolicy
    package var encoding: UInt8
    package var sealed: Bool
    package var payload: [UInt8]

    package init(
        hlc: HLC, origin: ReplicaID, replica: ReplicaID, counter: UInt64, sequence: UInt64, op: ChangeOperation,
        policy: SyncPolicy, encoding: UInt8, sealed: Bool, payload: [UInt8]
    ) {
        self.hlc = hlc
        self.origin = origin
        self.replica = replica
        self.counter = counter
        self.sequence = sequence
        self.op = op
        self.policy = policy
        self.encoding = encoding
        self.sealed = sealed
        self.payload = payload
    }

    package init(event: Event, sequence: UInt64) {
        hlc = event.hlc
        origin = event.origin
        replica = event.replica
        counter = event.counter
        self.sequence = sequence
        op = event.op
        policy = event.policy
        encoding = event.encoding
        sealed = event.sealed
        payload = event.payload
    }

    /// Decodes a stored view entry, naming the key in the error.
    package static func decoding(_ bytes: [UInt8], key name: String) throws(ChronicleError) -> ViewEntry {
        do { return try ViewEntry(decoding: bytes) } catch {
            throw .corruptViewEntry(key: name, reason: error.description)
        }
    }

    package var order: ConflictOrder { ConflictOrder(hlc: hlc, origin: origin, counter: counter) }

    /// Reads only the order fields of a stored entry, in place (the write path
    /// compares against the current winner without decoding its payload).
    package static func order(of bytes: UnsafeRawBufferPointer) -> ConflictOrder? {
        guard bytes.count >= 33, bytes[0] == 1 || bytes[0] == version else { return nil }
        func u64(_ offset: Int) -> UInt64 { (0..<8).reduce(0) { $0 << 8 | UInt64(bytes[offset + $1]) } }
        guard let origin = ReplicaID(UnsafeRawBufferPointer(rebasing: bytes[9..<25])) else { return nil }
        return ConflictOrder(hlc: HLC(rawValue: u64(1)), origin: origin, counter: u64(25))
    }

    package func encoded() -> [UInt8] {
        var writer = ByteWriter(capacity: 65 + payload.count)
        writer.fixedWidth(45) { fields in
            fields.u8(Self.version)
            fields.u64(hlc.rawValue)
            fields.replicaID(origin)
            fields.u64(counter)
            fields.u64(sequence)
            fields.u8(op.rawValue)
            fields.u8(policy.rawValue)
            fields.u8(encoding)
            fields.u8(sealed ? 1 : 0)
        }
        writer.longField(payload)
        writer.replicaID(replica)
        return writer.bytes
    }

    package init(decoding bytes: [UInt8]) throws(DecodeFailure) {
        var reader = ByteReader(bytes)
        let version = try reader.u8()
        guard version == 1 || version == Self.version else { throw DecodeFailure(description: "view entry version \(version) is not supported") }
        hlc = HLC(rawValue: try reader.u64())
        guard let origin = ReplicaID(bytes: try reader.raw(16)) else { throw DecodeFailure(description: "bad origin") }
        self.origin = origin
        counter = try reader.u64()
        sequence = try reader.u64()
        let opByte = try reader.u8()
        guard let op = ChangeOperation(rawValue: opByte) else { throw DecodeFailure(description: "unknown operation \(opByte)") }
        self.op = op
        let policyByte = try reader.u8()
        guard let policy = SyncPolicy(rawValue: policyByte) else { throw DecodeFailure(description: "unknown policy \(policyByte)") }
        self.policy = policy
        encoding = try reader.u8()
        sealed = try reader.u8() & 1 == 1
        payload = try reader.longField()
        if version >= 2 {
            guard let replica = ReplicaID(bytes: try reader.raw(16)) else { throw DecodeFailure(description: "bad replica") }
            self.replica = replica
        } else {
            replica = origin
        }
        try reader.expectEnd()
    }
}
