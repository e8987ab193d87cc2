import ChronicleSodium

/// A range as a relay that holds no key sees it (the hub, `ChronicleHub`): each item's bytes as
/// received, with what a relay needs to store, dedupe and filter it. Relays never re-encode an
/// item: members verify the bytes their writers authenticated.
@_spi(Wire) public struct RelayRange: Sendable {
    /// An event item: its identity, what the range filters look at, and its bytes.
    @_spi(Wire) public struct Event: Sendable {
        /// The writer id (the identity's origin), 16 bytes.
        @_spi(Wire) public var writer: [UInt8]
        /// The per-writer counter (with `writer`, the identity).
        @_spi(Wire) public var counter: UInt64
        /// The sync policy code, or `nil` for an event of a newer format (opaque: relayed to
        /// `syncable` pulls only).
        @_spi(Wire) public var policy: UInt8?
        /// The payload size in bytes (0 for an opaque event).
        @_spi(Wire) public var payloadSize: Int
        /// The item as received.
        @_spi(Wire) public var bytes: [UInt8]
        /// The ids (16 bytes each) of the data keys it names: its seal's and its authenticator's
        /// (for an item of a newer format, its trailing authenticator's).
        @_spi(Wire) public var keyIDs: [[UInt8]] = []
        /// Its key as the history index names it (`u8 domain ‖ u8 name length ‖ name`), or `nil`
        /// for an event of a newer format: what a relay's retention counts revisions of.
        @_spi(Wire) public var key: [UInt8]? = nil
        /// Its HLC, or `nil` for an event of a newer format: with the identity, its conflict order.
        @_spi(Wire) public var hlc: UInt64? = nil
    }

    /// A wrapped data key item: its 16-byte key id and its bytes.
    @_spi(Wire) public struct Key: Sendable {
        @_spi(Wire) public var id: [UInt8]
        @_spi(Wire) public var bytes: [UInt8]

        /// The BLAKE2b-256 digest of `bytes`: what a relay dedupes key records by.
        @_spi(Wire) public var digest: [UInt8] { GenericHash.hash(bytes) }
    }

    @_spi(Wire) public var source: [UInt8]
    /// The source log's epoch, 16 bytes.
    @_spi(Wire) public var epoch: [UInt8]
    @_spi(Wire) public var after: UInt64
    @_spi(Wire) public var upTo: UInt64
    /// The source log's chain hash at `upTo` (32 zero bytes from a range of version 1).
    @_spi(Wire) public var upToChain: [UInt8]
    @_spi(Wire) public var keys: [Key] = []
    @_spi(Wire) public var events: [Event] = []

    /// The largest counter a relay stores: as members, it refuses identities past 2^48
    /// (docs/FORMAT.md, section 11, reason 4), so no peer can exhaust a writer's counters.
    @_spi(Wire) public static let maxCounter: UInt64 = 1 << 48

    /// Decodes and checks a whole range as ``EventRange`` does (checksum, bounds, every item),
    /// keeping each item's bytes; throws ``ChronicleError/malformedInput(_:)``.
    @_spi(Wire) public init(decoding bytes: [UInt8]) throws(ChronicleError) {
        let checked = try EventRange(decoding: bytes)
        source = checked.source.bytes
        epoch = checked.epoch.bytes
        after = checked.after
        upTo = checked.upTo
        upToChain = checked.upToChain
        do {
            var reader = ByteReader(Array(bytes[..<(bytes.count - 32)]))
            _ = try reader.raw(EventRange.magic.count)
            let version = try reader.u8()
            _ = try reader.raw(16 + LogEpoch.byteCount + 24 + (version >= 2 ? 2 * LogRecord.hashLength : 0))
            let count = Int(try reader.u32())
            for index in 0..<count {
                let kind = try reader.u8()
                let item = try reader.longField(limit: EventRange.maxEncodedSize)
                if kind == 1 {
                    // A newer build's record keeps its key id where every version does.
                    let id = WrappedKey.isOfNewerKind(item) ? WrappedKey.keyID(ofRecord: item) : try WrappedKey(decoding: item).id
                    guard let id else { throw DecodeFailure(description: "item \(index): a wrapped key without a key id") }
                    keys.append(Key(id: id.bytes, bytes: item))
                    continue
                }
                switch item.withUnsafeBytes({ ChronicleFormat.Event.parse($0) }) {
                case let .success(.event(event)):
                    guard event.counter <= Self.maxCounter else { throw DecodeFailure(description: "item \(index): counter over 2^48") }
                    events.append(
                        Event(
                            writer: event.origin.bytes, counter: event.counter, policy: event.policy.rawValue, payloadSize: event.payload.count,
                            bytes: item, keyIDs: event.namedKeyIDs.map(\.bytes), key: HistoryKey.prefix(domain: event.domain, name: event.key),
                            hlc: event.hlc.rawValue))
                case let .success(.opaque(opaque)):
                    guard opaque.counter <= Self.maxCounter else { throw DecodeFailure(description: "item \(index): counter over 2^48") }
                    events.append(
                        Event(
                            writer: opaque.origin.bytes, counter: opaque.counter, policy: nil, payloadSize: 0, bytes: item,
                            keyIDs: ChronicleFormat.Event.trailingAuthenticator(item).map { [$0.keyID.bytes] } ?? []))
                case let .failure(error):
                    throw DecodeFailure(description: "item \(index): \(error.description)")
                }
            }
        } catch {
            throw .malformedInput("range: \(error)")
        }
    }

    /// The ids of the data keys an event item names (see ``Event/keyIDs``): for an item of a
    /// newer format, the key of the authenticator at its end.
    @_spi(Wire) public static func keyIDs(ofItem item: [UInt8]) -> [[UInt8]] {
        switch item.withUnsafeBytes({ ChronicleFormat.Event.parse($0) }) {
        case let .success(.event(event)): event.namedKeyIDs.map(\.bytes)
        case .success(.opaque): ChronicleFormat.Event.trailingAuthenticator(item).map { [$0.keyID.bytes] } ?? []
        case .failure: []
        }
    }

    /// Whether a pull with `filter` carries an event of this `policy` and payload size.
    @_spi(Wire) public static func admits(_ filter: RangeFilter, policy: UInt8?, payloadSize: Int) -> Bool {
        switch filter {
        case .syncable: policy.map { $0 != SyncPolicy.never.rawValue } ?? true
        case let .automaticSmall(limit): policy == SyncPolicy.automaticSmall.rawValue && payloadSize <= limit
        }
    }

    /// The chain hash a relay keeps at each position: BLAKE2b-256(previous ‖ position (u64 BE) ‖
    /// item bytes), zeros before the first (docs/FORMAT.md, section 13).
    @_spi(Wire) public static func chainHash(previous: [UInt8], position: UInt64, item: [UInt8]) -> [UInt8] {
        GenericHash.hash(previous + position.bigEndianBytes + item)
    }

    /// No chain yet: 32 zero bytes.
    @_spi(Wire) public static let emptyChain = [UInt8](repeating: 0, count: LogRecord.hashLength)

    /// Encodes a range of a relay's positions `(after, upTo]` (section 7): keys first, then the
    /// event items as received.
    @_spi(Wire) public static func encode(
        source: [UInt8], epoch: [UInt8], after: UInt64, upTo: UInt64, head: UInt64, afterChain: [UInt8], upToChain: [UInt8],
        keys: [[UInt8]], events: [[UInt8]]
    ) -> [UInt8] {
        var writer = ByteWriter(capacity: 160 + keys.reduce(0) { $0 + 5 + $1.count } + events.reduce(0) { $0 + 5 + $1.count })
        writer.raw(EventRange.magic)
        writer.u8(EventRange.protocolVersion)
        writer.raw(source)
        writer.raw(epoch)
        writer.u64(after)
        writer.u64(upTo)
        writer.u64(head)
        writer.raw(afterChain)
        writer.raw(upToChain)
        writer.u32(UInt32(keys.count + events.count))
        for key in keys {
            writer.u8(1)
            writer.longField(key)
        }
        for event in events {
            writer.u8(2)
            writer.longField(event)
        }
        writer.raw(GenericHash.hash(writer.bytes))
        return writer.bytes
    }
}
