#if canImport(Observation)
extension ObservedValue {
    /// Observes a plain key.
    public convenience init(_ key: Key<Value>, store: Store = .standard) {
        self.init(initial: store[key], updates: store.updates(of: key), write: { store[key] = $0 })
    }
}
#endif
