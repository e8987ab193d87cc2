import ChronicleFormat
import ChronicleLog
extension Store {
    /// What peers sent that this replica set aside instead of applying, oldest first: events
    /// and wrapped keys that failed authentication or validation, each with its reason and source.
    ///
    /// Nothing here is applied to a view or relayed. A sealed value is never exposed: an item
    /// shows its identity, key name and reason only.
    public func quarantinedItems() throws(ChronicleError) -> [QuarantinedItem] {
        let eventLog = try eventLog
        return try mappingErrors { try eventLog.quarantine.quarantinedItems() }
    }

    /// Drops quarantined items (once inspected, they are of no further use).
    /// - Parameter ids: The items to drop; `nil` drops every item.
    /// - Returns: How many were dropped.
    @discardableResult
    public func dropQuarantined(_ ids: [UInt64]? = nil) throws(ChronicleError) -> Int {
        let eventLog = try eventLog
        return try mappingErrors { try eventLog.quarantine.dropQuarantined(ids) }
    }
}
