/// An event's identity: the writer that made it and that writer's counter.
///
/// A member asks a peer for events by identity when it lost one it had received (its
/// quarantine evicted it while it waited for its key): see `SyncTransport.pullEvents(_:)` and
/// docs/FORMAT.md, section 7.6.
public struct EventIdentity: Sendable, Hashable, CustomStringConvertible {
    /// The writer id (the event's origin).
    public var writer: ReplicaID
    /// The writer's counter.
    public var counter: UInt64

    /// The identity of `counter` of `writer`.
    public init(writer: ReplicaID, counter: UInt64) {
        self.writer = writer
        self.counter = counter
    }

    /// `writer ‖ counter`, as the `dots` database stores it.
    package var dot: [UInt8] { writer.bytes.appendingBigEndian(counter) }

    /// The identity stored as `writer ‖ counter` (24 bytes), or `nil`.
    package init?(dot: [UInt8]) {
        guard dot.count == 24, let writer = ReplicaID(bytes: Array(dot[0..<16])), let counter = UInt64(bigEndianBytes: Array(dot[16...])) else {
            return nil
        }
        self.init(writer: writer, counter: counter)
    }

    public var description: String { "\(writer.short):\(counter)" }

    /// The most identities one request names.
    public static let maxPerRequest = 1_024

    /// The first ``maxPerRequest`` distinct identities of `identities`, in their order: what an
    /// answer to a request by identity looks up. A repeated identity counts once, so repeating
    /// one costs the answerer nothing more (docs/FORMAT.md 7.6).
    @_spi(Wire) public static func distinct(_ identities: [EventIdentity]) -> [EventIdentity] {
        var seen = Set<EventIdentity>()
        var result: [EventIdentity] = []
        for identity in identities where result.count < maxPerRequest && seen.insert(identity).inserted { result.append(identity) }
        return result
    }

    /// A request for events by identity: `u8 version (1) ‖ u16 count ‖ count × (16 writer ‖ u64
    /// counter)`, every integer big-endian, at most ``maxPerRequest`` identities.
    @_spi(Wire) public static func encodeRequest(_ identities: [EventIdentity]) -> [UInt8] {
        var writer = ByteWriter(capacity: 3 + 24 * identities.count)
        writer.u8(1)
        writer.u16(UInt16(clamping: identities.count))
        for identity in identities.prefix(Int(UInt16.max)) {
            writer.replicaID(identity.writer)
            writer.u64(identity.counter)
        }
        return writer.bytes
    }

    /// Decodes a request; throws ``ChronicleError/malformedInput(_:)`` for any other version, a
    /// count over ``maxPerRequest``, or a body that is not exactly as long as its count says.
    @_spi(Wire) public static func decodeRequest(_ bytes: [UInt8]) throws(ChronicleError) -> [EventIdentity] {
        var reader = ByteReader(bytes)
        do {
            guard try reader.u8() == 1 else { throw ChronicleError.malformedInput("an event request of an unknown version") }
            let count = Int(try reader.u16())
            guard count <= maxPerRequest else {
                throw ChronicleError.malformedInput("an event request names \(count) identities; at most \(maxPerRequest)")
            }
            guard bytes.count == 3 + 24 * count else {
                throw ChronicleError.malformedInput("an event request of \(bytes.count) bytes names \(count) identities")
            }
            var identities: [EventIdentity] = []
            identities.reserveCapacity(count)
            for _ in 0..<count {
                guard let writer = ReplicaID(bytes: try reader.raw(16)) else { throw ChronicleError.malformedInput("an event request's writer id") }
                identities.append(EventIdentity(writer: writer, counter: try reader.u64()))
            }
            return identities
        } catch let error as ChronicleError {
            throw error
        } catch {
            throw ChronicleError.malformedInput("an event request: \(error)")
        }
    }
}
