
/// A key's name in the history index (`latest`): `domain ‖ name length ‖ name`.
package enum HistoryKey {
    package static func prefix(domain: Domain, name: String) -> [UInt8] {
        let nameBytes = Array(name.utf8)
        return [domain.rawValue, UInt8(nameBytes.count)] + nameBytes
    }
}
