extension EventRange {
    /// The key ids its items name: events' seals and authenticators, newer-format items' trailing authenticators.
    package var namedKeyIDs: Set<KeyID> {
        var ids = Set(events.flatMap(\.namedKeyIDs))
        for item in opaque { if let (id, _) = Event.trailingAuthenticator(item.bytes) { ids.insert(id) } }
        return ids
    }
}

extension Event {
    /// The data keys this event names: the one its payload is sealed with and the one that
    /// authenticates it (none, one or two ids).
    package var namedKeyIDs: [KeyID] {
        var ids: [KeyID] = []
        if sealed, let envelope = try? Envelope(decoding: payload) { ids.append(envelope.keyID) }
        if let id = authenticator?.keyID, !ids.contains(id) { ids.append(id) }
        return ids
    }
}
