
/// A key's name in the history index (`latest`): `domain ‖ name length ‖ name`.
package enum HistoryKey {
    /// Built in one buffer: it is made for every event written.
    package static func prefix(domain: Domain, name: String) -> [UInt8] {
        let length = name.utf8.count
        var key = [UInt8]()
        key.reserveCapacity(2 + length)
        key.append(domain.rawValue)
        key.append(UInt8(length))  // key names are 1 to 255 bytes: checked before any event is made or decoded
        key.append(contentsOf: name.utf8)
        return key
    }
}
