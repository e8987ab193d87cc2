import ChronicleFormat
public import Chronicle
public import Foundation

/// A new, empty directory for one test's store under the system's temporary folder (not created yet).
public func temporaryStoreDirectory() -> URL {
    FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-tests-\(UUID().uuidString)", isDirectory: true)
}

/// Runs `body` with a store in a directory of its own, and deletes the directory afterwards.
///
/// Every test gets its own store, so tests run in parallel and nothing leaks between them:
///
/// ```swift
/// @Test func remembersTheTheme() throws {
///     try withTemporaryStore { store, _ in
///         store[.theme] = .dark
///         #expect(store[.theme] == .dark)
///     }
/// }
/// ```
/// - Parameters:
///   - configuration: The store's configuration (key source, durability, logger).
///   - body: Gets the store and its directory.
/// - Returns: What `body` returns.
/// - Throws: What opening the store or `body` throws.
public func withTemporaryStore<R>(
    configuration: Store.Configuration = .init(), _ body: (Store, URL) throws -> R
) throws -> R {
    let directory = temporaryStoreDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    let store = try Store(directory: directory, configuration: configuration)
    return try body(store, directory)
}

/// The async form of ``withTemporaryStore(configuration:_:)-(_,(Store,URL)->R)``.
public func withTemporaryStore<R>(
    configuration: Store.Configuration = .init(), _ body: (Store, URL) async throws -> R
) async throws -> R {
    let directory = temporaryStoreDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    let store = try Store(directory: directory, configuration: configuration)
    return try await body(store, directory)
}

/// Runs `body` with `count` stores, each in a directory of its own, and deletes the directories
/// afterwards: devices of one sync group in a test.
///
/// ```swift
/// @Test func themeReachesTheOtherDevice() async throws {
///     try await withTemporaryStores(2) { stores in
///         stores[0][.theme] = .dark
///         try await Replicator(store: stores[0], peers: [.store(stores[1])]).sync()
///         #expect(stores[1][.theme] == .dark)
///     }
/// }
/// ```
/// - Parameters:
///   - count: How many stores.
///   - configuration: Every store's configuration.
///   - body: Gets the stores.
/// - Returns: What `body` returns.
/// - Throws: What opening a store or `body` throws.
public func withTemporaryStores<R>(
    _ count: Int, configuration: Store.Configuration = .init(), _ body: ([Store]) async throws -> R
) async throws -> R {
    let directories = (0..<count).map { _ in temporaryStoreDirectory() }
    defer { for directory in directories { try? FileManager.default.removeItem(at: directory) } }
    return try await body(try directories.map { try Store(directory: $0, configuration: configuration) })
}
