import Chronicle
import Foundation
import Hummingbird

let rangeMediaType = "application/vnd.chronicle.range"

/// `syncable` (default) or `small:BYTES`.
func parseFilter(_ text: String?) throws -> RangeFilter {
    guard let text, text != "syncable" else { return .syncable }
    if text.hasPrefix("small:"), let limit = Int(text.dropFirst(6)), limit >= 0 { return .automaticSmall(maxPayload: limit) }
    throw HTTPError(.badRequest, message: "filter is syncable or small:BYTES")
}

func filterText(_ filter: RangeFilter) -> String {
    switch filter {
    case .syncable: "syncable"
    case let .automaticSmall(limit): "small:\(limit)"
    }
}

/// ``ReplicaInfo`` on the wire: ids in hex.
struct WireInfo: Codable {
    var replicaID: String
    var epoch: String
    var protocolVersion: UInt8
    var head: UInt64
    var writer: String?

    init(_ info: ReplicaInfo) {
        replicaID = info.replicaID.hex
        epoch = info.epoch.hex
        protocolVersion = info.protocolVersion
        head = info.head
        writer = info.writer?.hex
    }

    func info() throws -> ReplicaInfo {
        guard let id = ReplicaID(hex: replicaID), let epoch = LogEpoch(hex: epoch) else {
            throw ChronicleError.malformedInput("the peer's info is malformed")
        }
        var writerID: ReplicaID?
        if let writer {
            guard let id = ReplicaID(hex: writer) else { throw ChronicleError.malformedInput("the peer's writer id is malformed") }
            writerID = id
        }
        return ReplicaInfo(replicaID: id, epoch: epoch, protocolVersion: protocolVersion, head: head, writer: writerID)
    }
}
