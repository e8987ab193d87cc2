
/// Keys of the `history` index: `domain ‖ name length ‖ name ‖ sequence (u64 BE)`.
package enum HistoryKey {
    package static func prefix(domain: Domain, name: String) -> [UInt8] {
        let nameBytes = Array(name.utf8)
        return [domain.rawValue, UInt8(nameBytes.count)] + nameBytes
    }

    package static func make(domain: Domain, name: String, sequence: UInt64) -> [UInt8] {
        prefix(domain: domain, name: name) + sequence.bigEndianBytes
    }
}
