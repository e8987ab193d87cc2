import ChronicleSodium

/// A range of a replica's log: its events with local sequence in `(after, upTo]`
/// that pass a filter, plus the wrapped data keys their seals and authenticators need.
///
/// ## Wire and file format, version 2 (docs/FORMAT.md, "Range")
///
/// ```
/// [8]   magic "CHRNRNGE"
/// u8    protocol version (2; version 1 is read too)
/// [16]  source replica id (the log the sequences belong to)
/// [16]  source log epoch
/// u64   after
/// u64   upTo            (the source's sequences this range covers, filtered events included)
/// u64   head            (the source's last sequence when the range was cut)
/// [32]  chain hash of the source's record at after (zeros: none)     (version 2 only)
/// [32]  chain hash of the source's record at upTo (zeros: none)      (version 2 only)
/// u32   item count      (at most 65,536)
/// items: u8 kind (1 wrapped key, 2 event) + u32 length + bytes
/// [32]  BLAKE2b-256 of everything above
/// ```
/// Keys come before the events that use them. An event item whose identity parses
/// but whose format is newer (or has unknown fields) is an opaque event: it is stored
/// and relayed, never applied. A truncated, altered or oversized range, or an item
/// without an identity, fails to decode as a whole; nothing of it is applied.
package struct EventRange: Sendable {
    package static let magic = Array("CHRNRNGE".utf8)
    package static let protocolVersion: UInt8 = 2
    package static let maxItems = 65_536
    /// The largest range accepted from a peer or a file (events may be up to 64 MiB each).
    package static let maxEncodedSize = 256 << 20

    package var source: ReplicaID
    package var epoch: LogEpoch
    package var after: UInt64
    package var upTo: UInt64
    package var head: UInt64
    /// The chain hash of the source's record at `after`: a puller whose checkpoint remembers
    /// another hash there knows the source's log changed under it (a restore, a rollback).
    package var afterChain: [UInt8]
    /// The chain hash of the source's record at `upTo`: what a checkpoint at `upTo` remembers.
    package var upToChain: [UInt8]
    package var keys: [WrappedKey]
    /// Wrapped-key records of a version or key-encryption kind this build does not know (a newer
    /// build's): kept to relay, as received, never opened. Each starts `u8 version ‖ [16] key id`.
    package var opaqueKeys: [[UInt8]] = []
    package var events: [Event] {
        didSet { receivedBytes = [] }  // changed events are no longer what arrived
    }
    /// The bytes each of `events` arrived as, when decoded from a range (so an import neither
    /// re-encodes nor re-hashes what it received, and quarantines the bytes as received); empty
    /// for a range built in memory. A version-1 item is logged as its version-2 encoding.
    package var receivedBytes: [[UInt8]] = []
    package var opaque: [OpaqueEvent]

    /// `true` when the source had nothing after this range when it was cut.
    package var reachesHead: Bool { upTo >= head }

    package func encoded() -> [UInt8] {
        RelayRange.encode(
            source: source.bytes, epoch: epoch.bytes, after: after, upTo: upTo, head: head, afterChain: afterChain,
            upToChain: upToChain, keys: keys.map { $0.encoded() } + opaqueKeys, events: events.map { $0.encoded() } + opaque.map(\.bytes))
    }

    /// Decodes and checks a whole range; throws `malformedInput` naming what is wrong.
    package init(decoding bytes: [UInt8]) throws(ChronicleError) {
        do {
            guard bytes.count <= Self.maxEncodedSize else {
                throw DecodeFailure(description: "range of \(bytes.count) bytes is over the limit of \(Self.maxEncodedSize)")
            }
            guard bytes.count >= Self.magic.count + 1 + 32 + 24 + 4 + 32 else { throw DecodeFailure(description: "truncated range") }
            let body = Array(bytes[..<(bytes.count - 32)])
            guard Sodium.constantTimeEqual(GenericHash.hash(body), Array(bytes[(bytes.count - 32)...])) else {
                throw DecodeFailure(description: "checksum mismatch (truncated or altered in transit)")
            }
            var reader = ByteReader(body)
            guard try reader.raw(Self.magic.count) == Self.magic else { throw DecodeFailure(description: "not a Chronicle range") }
            let version = try reader.u8()
            guard version == 1 || version == Self.protocolVersion else {
                throw DecodeFailure(description: "range protocol version \(version) is not supported (this build speaks 1 and \(Self.protocolVersion))")
            }
            guard let source = ReplicaID(bytes: try reader.raw(16)) else { throw DecodeFailure(description: "bad source id") }
            self.source = source
            guard let epoch = LogEpoch(bytes: try reader.raw(LogEpoch.byteCount)) else { throw DecodeFailure(description: "bad epoch") }
            self.epoch = epoch
            after = try reader.u64()
            upTo = try reader.u64()
            head = try reader.u64()
            guard after <= upTo, upTo <= head else { throw DecodeFailure(description: "range bounds \(after)...\(upTo) of \(head) are inconsistent") }
            afterChain = version >= 2 ? try reader.raw(LogRecord.hashLength) : LogRecord.noChain
            upToChain = version >= 2 ? try reader.raw(LogRecord.hashLength) : LogRecord.noChain
            let count = Int(try reader.u32())
            guard count <= Self.maxItems else { throw DecodeFailure(description: "\(count) items is over the limit of \(Self.maxItems)") }
            keys = []
            events = []
            opaque = []
            for index in 0..<count {
                let kind = try reader.u8()
                let item = try reader.longField(limit: Self.maxEncodedSize)
                switch kind {
                case 1:
                    guard events.isEmpty && opaque.isEmpty else { throw DecodeFailure(description: "item \(index): keys must precede events") }
                    if WrappedKey.isOfNewerKind(item) {
                        opaqueKeys.append(item)  // a newer build's key record: relayed, never opened
                    } else {
                        keys.append(try WrappedKey(decoding: item))
                    }
                case 2:
                    switch item.withUnsafeBytes({ Event.parse($0) }) {
                    case let .success(.event(event)):
                        guard event.key.utf8.count <= Event.maxKeyNameLength else { throw DecodeFailure(description: "item \(index): key name too long") }
                        events.append(event)
                        receivedBytes.append(item)
                    case let .success(.opaque(item)):
                        opaque.append(item)
                    case let .failure(error):
                        throw DecodeFailure(description: "item \(index): \(error.description)")
                    }
                default:
                    throw DecodeFailure(description: "item \(index): unknown kind \(kind)")
                }
            }
            try reader.expectEnd()
        } catch {
            throw .malformedInput("range: \(error)")
        }
    }

    package init(
        source: ReplicaID, epoch: LogEpoch, after: UInt64, upTo: UInt64, head: UInt64,
        afterChain: [UInt8] = LogRecord.noChain, upToChain: [UInt8] = LogRecord.noChain,
        keys: [WrappedKey], events: [Event], opaque: [OpaqueEvent] = []
    ) {
        self.source = source
        self.epoch = epoch
        self.after = after
        self.upTo = upTo
        self.head = head
        self.afterChain = afterChain
        self.upToChain = upToChain
        self.keys = keys
        self.events = events
        self.opaque = opaque
    }
}
