/// What the HTTP protocol (docs/FORMAT.md, section 8) shares between `chronicle serve`
/// (`ChronicleHTTP`) and the hub (`ChronicleHub`).
@_spi(Wire) public enum WireFormat {
    /// The media type of a range body.
    @_spi(Wire) public static let rangeMediaType = "application/vnd.chronicle.range"
    /// The media type of a request for events by identity (docs/FORMAT.md 7.6).
    @_spi(Wire) public static let eventRequestMediaType = "application/vnd.chronicle.event-request"

    /// `syncable` (the default, also for `nil`) or `small:BYTES`; `nil` for anything else.
    @_spi(Wire) public static func filter(_ text: String?) -> RangeFilter? {
        guard let text, text != "syncable" else { return .syncable }
        if text.hasPrefix("small:"), let limit = Int(text.dropFirst(6)), limit >= 0 { return .automaticSmall(maxPayload: limit) }
        return nil
    }

    /// `max`: the events a pull returns at most, 256 when absent, clamped to 1…4,096; `nil` when
    /// it is not a decimal number.
    @_spi(Wire) public static func maxEvents(_ text: String?) -> Int? {
        guard let text else { return 256 }
        guard !text.isEmpty, text.utf8.count <= 20, text.allSatisfy(\.isASCII), let value = Int(text) else { return nil }
        return min(max(value, 1), 4096)
    }

    /// `after`: a log sequence, an unsigned decimal of ASCII digits only (no sign, no space) that
    /// fits a u64; `nil` otherwise (absent included: it is required).
    @_spi(Wire) public static func sequence(_ text: String?) -> UInt64? {
        guard let text, !text.isEmpty, text.utf8.count <= 20, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
        return UInt64(text)
    }

    @_spi(Wire) public static func text(_ filter: RangeFilter) -> String {
        switch filter {
        case .syncable: "syncable"
        case let .automaticSmall(limit): "small:\(limit)"
        }
    }
}

/// ``ReplicaInfo`` on the wire: ids in hex.
@_spi(Wire) public struct WireInfo: Codable, Sendable {
    @_spi(Wire) public var replicaID: String
    @_spi(Wire) public var epoch: String
    @_spi(Wire) public var protocolVersion: UInt8
    @_spi(Wire) public var head: UInt64
    @_spi(Wire) public var writer: String?
    /// `true`: a relay that keeps a log (positions and chain hashes that never change) though it
    /// names no writer; absent otherwise (FORMAT.md 8).
    @_spi(Wire) public var keepsLog: Bool?
    /// What the relay holds of each log the asking device pushed (a hub's; absent otherwise):
    /// ids in hex, the filter as a range request names it (FORMAT.md 8).
    @_spi(Wire) public var pushMarks: [WirePushMark]?

    @_spi(Wire) public init(_ info: ReplicaInfo) {
        replicaID = info.replicaID.hex
        epoch = info.epoch.hex
        protocolVersion = info.protocolVersion
        head = info.head
        writer = info.writer?.hex
        keepsLog = info.keepsLog ? true : nil
        pushMarks = info.pushMarks?.map {
            WirePushMark(source: $0.source.hex, epoch: $0.epoch.hex, filter: WireFormat.text($0.filter), upTo: $0.upTo, upToChain: $0.chain?.hexString)
        }
    }

    /// A relay's info (the hub's): its id and epoch as 16 bytes each, no writer, and a log whose
    /// chain hashes a pusher may probe to learn whether it lost what was pushed.
    @_spi(Wire) public init(relay id: [UInt8], epoch: [UInt8], head: UInt64, pushMarks: [WirePushMark]? = nil) {
        replicaID = id.hexString
        self.epoch = epoch.hexString
        protocolVersion = EventRange.protocolVersion
        self.head = head
        writer = nil
        keepsLog = true
        self.pushMarks = pushMarks
    }

    /// The most push marks a hub keeps per device and names in an info; a reader reads this many
    /// and ignores the rest.
    @_spi(Wire) public static let maxPushMarks = 32

    @_spi(Wire) public func info() throws(ChronicleError) -> ReplicaInfo {
        guard let id = ReplicaID(hex: replicaID), let epoch = LogEpoch(hex: epoch) else {
            throw .malformedInput("the peer's info is malformed")
        }
        var writerID: ReplicaID?
        if let writer {
            guard let id = ReplicaID(hex: writer) else { throw .malformedInput("the peer's writer id is malformed") }
            writerID = id
        }
        // Marks it cannot read (a filter of a later version, a malformed id) or past the first
        // `maxPushMarks` are left out: a missing mark only makes this device push from 0.
        let marks: [PushMark]? = pushMarks.map { wire in
            wire.prefix(Self.maxPushMarks).compactMap { mark in
                guard let source = ReplicaID(hex: mark.source), let epoch = LogEpoch(hex: mark.epoch), let filter = WireFormat.filter(mark.filter) else {
                    return nil
                }
                let chain = mark.upToChain.flatMap { [UInt8](hexString: $0) }.flatMap { $0.count == LogRecord.hashLength ? $0 : nil }
                return PushMark(source: source, epoch: epoch, filter: filter, upTo: mark.upTo, chain: chain)
            }
        }
        return ReplicaInfo(
            replicaID: id, epoch: epoch, protocolVersion: protocolVersion, head: head, writer: writerID, keepsLog: keepsLog == true, pushMarks: marks)
    }
}

/// A ``PushMark`` on the wire: ids in hex, the filter as text (`syncable`, `small:BYTES`).
@_spi(Wire) public struct WirePushMark: Codable, Sendable, Equatable {
    @_spi(Wire) public var source: String
    @_spi(Wire) public var epoch: String
    @_spi(Wire) public var filter: String
    @_spi(Wire) public var upTo: UInt64
    /// The pushing log's chain hash at `upTo`, in hex (absent when the push did not say).
    @_spi(Wire) public var upToChain: String?

    @_spi(Wire) public init(source: String, epoch: String, filter: String, upTo: UInt64, upToChain: String? = nil) {
        self.source = source
        self.epoch = epoch
        self.filter = filter
        self.upTo = upTo
        self.upToChain = upToChain
    }

    /// A hub's mark: the pushing log's id and epoch as 16 bytes each, its chain hash as 32.
    @_spi(Wire) public init(source: [UInt8], epoch: [UInt8], filter: String, upTo: UInt64, upToChain: [UInt8]?) {
        self.init(source: source.hexString, epoch: epoch.hexString, filter: filter, upTo: upTo, upToChain: upToChain?.hexString)
    }
}
