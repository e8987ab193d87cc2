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

    /// The event's place in the last-writer-wins order.
    var order: ConflictOrder { ConflictOrder(hlc: hlc, origin: origin, counter: counter) }

    /// Whether this event wins over an entry with the given order.
    func wins(over other: ConflictOrder) -> Bool { order > other }

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
        self = try bytes.withUnsafeBytes { buffer in Event.parse(buffer) }.get()
    }

    /// The fixed-size part before the key name: version, origin, counter, HLC, domain, op, policy, encoding, flags.
    private static let headerLength = 1 + 16 + 8 + 8 + 5

    /// Parses the version 1 layout in place; every offset is checked against the buffer's size.
    static func parse(_ bytes: UnsafeRawBufferPointer) -> Result<Event, DecodeFailure> {
        func failure(_ text: String) -> Result<Event, DecodeFailure> { .failure(DecodeFailure(description: text)) }
        func u64(_ offset: Int) -> UInt64 { UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) }
        guard bytes.count >= headerLength + 1 + 4 else { return failure("truncated: \(bytes.count) bytes is shorter than an event") }
        guard bytes[0] == formatVersion else {
            return failure("event format version \(bytes[0]) is not supported (this build reads \(formatVersion))")
        }
        guard let domain = Domain(rawValue: bytes[33]) else { return failure("unknown domain \(bytes[33])") }
        guard let op = Operation(rawValue: bytes[34]) else { return failure("unknown operation \(bytes[34])") }
        guard let policy = SyncPolicy(rawValue: bytes[35]) else { return failure("unknown sync policy \(bytes[35])") }
        let flags = bytes[37]
        guard flags & ~1 == 0 else { return failure("unknown flags \(flags)") }
        let keyLength = Int(bytes[headerLength])
        let keyStart = headerLength + 1
        guard keyLength > 0, bytes.count >= keyStart + keyLength + 4 else { return failure("truncated or empty key name") }
        guard let key = String(validating: bytes[keyStart..<keyStart + keyLength], as: UTF8.self) else {
            return failure("key name is not UTF-8")
        }
        let payloadStart = keyStart + keyLength + 4
        let payloadLength = Int(UInt32(bigEndian: bytes.loadUnaligned(fromByteOffset: keyStart + keyLength, as: UInt32.self)))
        guard bytes.count - payloadStart >= payloadLength else {
            return failure("truncated: payload of \(payloadLength) bytes, \(bytes.count - payloadStart) left")
        }
        guard bytes.count == payloadStart + payloadLength else {
            return failure("\(bytes.count - payloadStart - payloadLength) unexpected trailing bytes")
        }
        let counter = u64(17)
        guard counter > 0 else { return failure("counter 0 is not a valid dot") }
        guard let origin = ReplicaID(bytes: Array(bytes[1..<17])) else { return failure("bad origin") }
        return .success(
            Event(
                origin: origin, counter: counter, hlc: HLC(rawValue: u64(25)), domain: domain, op: op, policy: policy,
                encoding: bytes[36], sealed: flags & 1 == 1, key: key, payload: Array(bytes[payloadStart..<payloadStart + payloadLength])))
    }
}
