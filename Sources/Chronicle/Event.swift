/// What an event does to its key.
public enum Operation: UInt8, Sendable, Hashable, CustomStringConvertible {
    /// Sets a value.
    case set = 0
    /// Removes the value (a tombstone: it wins over older sets).
    case remove = 1

    public var description: String { self == .set ? "set" : "remove" }
}

/// One change to one key: the unit of the log and of replication.
///
/// Its identity is the dot `(origin, counter)`; the conflict rule orders
/// events by `(hlc, origin, counter)`.
///
/// ## Binary encoding, version 1
///
/// ```
/// u8      format version (1)
/// [16]    origin replica id
/// u64     counter (dense per origin)
/// u64     HLC (ms << 16 | logical)
/// u8      domain (0 defaults, 1 secrets)
/// u8      op (0 set, 1 remove)
/// u8      sync policy (0 never, 1 manual, 2 automaticSmall)
/// u8      value encoding (ValueEncoding)
/// u8      flags (bit 0: payload is a sealed envelope)
/// u8 + n  key name, UTF-8, 1...255 bytes
/// u32 + n payload
/// ```
/// Integers are big-endian. Nothing may follow the payload.
struct Event: Sendable, Equatable {
    static let formatVersion: UInt8 = 1

    var origin: ReplicaID
    var counter: UInt64
    var hlc: HLC
    var domain: Domain
    var op: Operation
    var policy: SyncPolicy
    var encoding: UInt8
    var sealed: Bool
    var key: String
    var payload: [UInt8]

    /// The dot: `origin ‖ counter`, as stored in the `dots` database.
    var dot: [UInt8] { origin.bytes + counter.bigEndianBytes }

    /// Whether this event wins over an entry with the given order fields.
    func wins(over other: (hlc: HLC, origin: ReplicaID, counter: UInt64)) -> Bool {
        if hlc != other.hlc { return hlc > other.hlc }
        if origin != other.origin { return origin > other.origin }
        return counter > other.counter
    }

    func encoded() -> [UInt8] {
        var writer = ByteWriter(capacity: 48 + key.utf8.count + payload.count)
        writer.u8(Self.formatVersion)
        writer.raw(origin.bytes)
        writer.u64(counter)
        writer.u64(hlc.rawValue)
        writer.u8(domain.rawValue)
        writer.u8(op.rawValue)
        writer.u8(policy.rawValue)
        writer.u8(encoding)
        writer.u8(sealed ? 1 : 0)
        writer.shortField(Array(key.utf8))
        writer.longField(payload)
        return writer.bytes
    }

    init(
        origin: ReplicaID, counter: UInt64, hlc: HLC, domain: Domain, op: Operation, policy: SyncPolicy,
        encoding: UInt8, sealed: Bool, key: String, payload: [UInt8]
    ) {
        self.origin = origin
        self.counter = counter
        self.hlc = hlc
        self.domain = domain
        self.op = op
        self.policy = policy
        self.encoding = encoding
        self.sealed = sealed
        self.key = key
        self.payload = payload
    }

    /// Decodes an event, checking every field and bound.
    init(decoding bytes: [UInt8]) throws(DecodeFailure) {
        var reader = ByteReader(bytes)
        let version = try reader.u8()
        guard version == Self.formatVersion else {
            throw DecodeFailure(description: "event format version \(version) is not supported (this build reads \(Self.formatVersion))")
        }
        guard let origin = ReplicaID(bytes: try reader.raw(16)) else { throw DecodeFailure(description: "bad origin") }
        self.origin = origin
        counter = try reader.u64()
        hlc = HLC(rawValue: try reader.u64())
        let domainByte = try reader.u8()
        guard let domain = Domain(rawValue: domainByte) else { throw DecodeFailure(description: "unknown domain \(domainByte)") }
        self.domain = domain
        let opByte = try reader.u8()
        guard let op = Operation(rawValue: opByte) else { throw DecodeFailure(description: "unknown operation \(opByte)") }
        self.op = op
        let policyByte = try reader.u8()
        guard let policy = SyncPolicy(rawValue: policyByte) else { throw DecodeFailure(description: "unknown sync policy \(policyByte)") }
        self.policy = policy
        encoding = try reader.u8()
        let flags = try reader.u8()
        guard flags & ~1 == 0 else { throw DecodeFailure(description: "unknown flags \(flags)") }
        sealed = flags & 1 == 1
        let keyBytes = try reader.shortField()
        guard !keyBytes.isEmpty, let key = String(validating: keyBytes, as: UTF8.self) else {
            throw DecodeFailure(description: "key name is empty or not UTF-8")
        }
        self.key = key
        payload = try reader.longField()
        try reader.expectEnd()
        guard counter > 0 else { throw DecodeFailure(description: "counter 0 is not a valid dot") }
    }
}
