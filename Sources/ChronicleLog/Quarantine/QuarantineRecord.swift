package import ChronicleFormat
/// A quarantined item as stored in the `quarantine` database (docs/FORMAT.md, "Quarantine"):
///
/// ```
/// key:   u64 id (big-endian, increasing)
/// value: u8 version (1) ‖ u8 kind (1 event, 2 wrapped key) ‖ u8 reason ‖ u64 arrival (Unix ms)
///        ‖ u16 + n source (UTF-8) ‖ u16 + n detail (UTF-8) ‖ u32 + n the item's bytes as received
/// ```
package struct QuarantineRecord: Sendable, Equatable {
    package var kind: QuarantinedItem.Kind
    package var reason: QuarantinedItem.Reason
    package var arrival: UInt64
    package var source: String
    package var detail: String
    package var bytes: [UInt8]

    package func encoded() -> [UInt8] {
        var writer = ByteWriter(capacity: 64 + bytes.count)
        writer.u8(1)
        writer.u8(kind.rawValue)
        writer.u8(reason.rawValue)
        writer.u64(arrival)
        writer.mediumField(Array(source.utf8.prefix(1024)))
        writer.mediumField(Array(detail.utf8.prefix(4096)))
        writer.longField(bytes)
        return writer.bytes
    }

    package init(kind: QuarantinedItem.Kind, reason: QuarantinedItem.Reason, arrival: UInt64, source: String, detail: String, bytes: [UInt8]) {
        self.kind = kind
        self.reason = reason
        self.arrival = arrival
        self.source = source
        self.detail = detail
        self.bytes = bytes
    }

    package init(decoding bytes: [UInt8]) throws(DecodeFailure) {
        var reader = ByteReader(bytes)
        guard try reader.u8() == 1 else { throw DecodeFailure(description: "unknown quarantine record version") }
        guard let kind = QuarantinedItem.Kind(rawValue: try reader.u8()) else { throw DecodeFailure(description: "unknown quarantine kind") }
        guard let reason = QuarantinedItem.Reason(rawValue: try reader.u8()) else { throw DecodeFailure(description: "unknown quarantine reason") }
        self.kind = kind
        self.reason = reason
        arrival = try reader.u64()
        source = String(decoding: try reader.mediumField(), as: UTF8.self)
        detail = String(decoding: try reader.mediumField(), as: UTF8.self)
        self.bytes = try reader.longField()
        try reader.expectEnd()
    }

    /// The kind, reason and arrival of a stored record, read from its first bytes without copying
    /// the item (a quarantine of 10,000 items is scanned by every import that looks for waiting ones).
    package static func peek(_ value: UnsafeRawBufferPointer) -> (kind: QuarantinedItem.Kind, reason: QuarantinedItem.Reason, arrival: UInt64)? {
        guard value.count >= 11, value[0] == 1, let kind = QuarantinedItem.Kind(rawValue: value[1]),
            let reason = QuarantinedItem.Reason(rawValue: value[2])
        else { return nil }
        return (kind, reason, UInt64(bigEndian: value.loadUnaligned(fromByteOffset: 3, as: UInt64.self)))
    }

    /// The public description: identity and key name of an event, never its value.
    package func item(id: UInt64) -> QuarantinedItem {
        var item = QuarantinedItem(
            id: id, kind: kind, reason: reason, detail: detail, source: source, date: UnixMilliseconds.date(arrival),
            origin: nil, counter: nil, keyName: nil, isSealed: false)
        if kind == .event, case let .success(parsed) = bytes.withUnsafeBytes({ Event.parse($0) }) {
            switch parsed {
            case let .event(event):
                item.origin = event.origin
                item.counter = event.counter
                item.keyName = event.key
                item.isSealed = event.sealed
            case let .opaque(opaque):
                item.origin = opaque.origin
                item.counter = opaque.counter
            }
        }
        return item
    }
}
