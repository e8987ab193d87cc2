import ChronicleFormat
public import Foundation
import Logging
import Synchronization

extension Store {
    private static let standardState = Mutex<Store?>(nil)

    /// The embedded default store of this executable.
    ///
    /// It lives at `$CHRONICLE_HOME`, else in `chronicle/<executable>` under the platform's
    /// application-support directory (`$XDG_DATA_HOME`, else `~/.local/share`, on Linux;
    /// `Library/Application Support` on Apple platforms), and opens lazily on first
    /// use. It never crashes: if it cannot open, every read gives the key's
    /// default, every throwing call throws the reason, and the error is logged and kept in
    /// ``openingError`` (a store refused for damage is not an empty one: see ``ChronicleError/isDamage``).
    /// Call ``bootstrap(appID:configuration:)`` at launch to choose the app id,
    /// the configuration, and to see the error at once.
    public static var standard: Store {
        standardState.withLock { current in
            if let current { return current }
            let store = openOrUnavailable(directory: defaultDirectory(appID: nil), configuration: .init())
            current = store
            return store
        }
    }

    /// Opens ``standard`` at `…/chronicle/<appID>` with `configuration`.
    ///
    /// Call it once at launch, before the first use of `Store.standard`. The
    /// `chronicle` tool's `--app ID` opens the same location.
    /// - Returns: the opened store (also available as ``standard``).
    /// - Throws: the reason the store cannot be opened.
    @discardableResult
    public static func bootstrap(appID: String, configuration: Configuration = .init()) throws(ChronicleError) -> Store {
        let store = try Store(directory: defaultDirectory(appID: appID), configuration: configuration)
        standardState.withLock { $0 = store }
        return store
    }

    /// The directory of the standard store for `appID` (or this executable when `nil`).
    public static func defaultDirectory(appID: String?) -> URL {
        let environment = ProcessInfo.processInfo.environment
        if let home = environment["CHRONICLE_HOME"], !home.isEmpty {
            return URL(fileURLWithPath: home, isDirectory: true)
        }
        let name = appID ?? ProcessInfo.processInfo.processName
        // The platform's application-support directory: `$XDG_DATA_HOME`, else `~/.local/share`, on
        // Linux (Foundation reads the variable); `Library/Application Support` in an Apple app's container.
        let base = FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask).first
            ?? URL(fileURLWithPath: NSHomeDirectory(), isDirectory: true).appendingPathComponent(".local/share", isDirectory: true)
        return base.appendingPathComponent("chronicle", isDirectory: true).appendingPathComponent(name, isDirectory: true)
    }

    /// The store in `directory`, or one that reports why it could not be opened (``openingError``).
    static func openOrUnavailable(directory: URL, configuration: Configuration) -> Store {
        do {
            return try Store(directory: directory, configuration: configuration)
        } catch {
            configuration.logger.error(
                "chronicle: the standard store cannot be opened; reads give defaults and writes fail",
                metadata: ["store": "\(directory.path)", "error": "\(error)"])
            return Store(unavailable: error, directory: directory, configuration: configuration)
        }
    }
}
