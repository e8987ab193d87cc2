
/// Keys of the `history` index: `domain ‖ name length ‖ name ‖ sequence (u64 BE)`.
package enum HistoryKey {
    package static func prefix(domain: Domain, name: String) -> [UInt8] {
        let nameBytes = Array(name.utf8)
        return [domain.rawValue, UInt8(nameBytes.count)] + nameBytes
    }

    /// One key, built in one buffer (once per event written).
    package static func make(domain: Domain, name: String, sequence: UInt64) -> [UInt8] {
        let length = name.utf8.count
        var key = [UInt8]()
        key.reserveCapacity(2 + length + 8)
        key.append(domain.rawValue)
        key.append(UInt8(length))
        key.append(contentsOf: name.utf8)
        withUnsafeBytes(of: sequence.bigEndian) { key.append(contentsOf: $0) }
        return key
    }
}
