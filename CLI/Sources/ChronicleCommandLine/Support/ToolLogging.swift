public import ArgumentParser
import Foundation
import Logging

/// `--log-level` and `--log-format` of the commands that keep running (`serve`, `hub serve`).
public struct LogOptions: ParsableArguments {
    public init() {}

    @Option(help: ArgumentHelp("trace, debug, info, notice, warning, error or critical (or CHRONICLE_LOG_LEVEL).", valueName: "LEVEL"))
    var logLevel: String?
    @Option(help: ArgumentHelp("text, or json: one JSON object per line (or CHRONICLE_LOG_FORMAT).", valueName: "FORMAT"))
    var logFormat: String?

    public func validate() throws {
        if let logLevel, Logger.Level(rawValue: logLevel) == nil {
            throw ValidationError("--log-level is trace, debug, info, notice, warning, error or critical")
        }
        if let logFormat, !["text", "json"].contains(logFormat) { throw ValidationError("--log-format is text or json") }
    }
}

/// A command that keeps running and logs as it serves.
public protocol LoggingCommand {
    var log: LogOptions { get }
    /// Settings under the command line's and the environment's (a configuration file's).
    var logDefaults: (level: String?, format: String?) { get }
}

extension LoggingCommand {
    /// No settings under the command line's.
    public var logDefaults: (level: String?, format: String?) { (nil, nil) }
}

/// How the tool logs: to standard error, as text or one JSON object per line. A command that
/// finishes logs errors only (it prints what it has to say itself); a server logs from `info`
/// on, which includes one access line per request. Options win over the environment, which wins
/// over a configuration file.
enum ToolLogging {
    static func bootstrap(for command: any ParsableCommand) {
        let environment = ProcessInfo.processInfo.environment
        let serving = command as? any LoggingCommand
        let options = serving?.log
        let defaults = serving?.logDefaults
        // A variable set to nothing is not set.
        func variable(_ name: String) -> String? { environment[name].flatMap { $0.isEmpty ? nil : $0 } }
        let level = (options?.logLevel ?? variable("CHRONICLE_LOG_LEVEL") ?? defaults?.level).flatMap(Logger.Level.init(rawValue:))
            ?? (options == nil ? .error : .info)
        let json = (options?.logFormat ?? variable("CHRONICLE_LOG_FORMAT") ?? defaults?.format) == "json"
        LoggingSystem.bootstrap { label in
            var handler: any LogHandler = json ? JSONLogHandler(label: label) : StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
    }
}

/// One JSON object per line on standard error: `time`, `level`, `label`, `message`, `source` and
/// the metadata's keys (the record's over the logger's).
struct JSONLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var object: [String: Any] = [:]
        for (key, value) in metadata.merging(event.metadata ?? [:], uniquingKeysWith: { $1 }) { object[key] = Self.plain(value) }
        object["time"] = Date().formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
        object["level"] = event.level.rawValue
        object["label"] = label
        object["message"] = event.message.description
        object["source"] = event.source
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else { return }
        FileHandle.standardError.write(data + Data("\n".utf8))
    }

    static func plain(_ value: Logger.Metadata.Value) -> Any {
        switch value {
        case let .string(text): text
        case let .stringConvertible(convertible): convertible.description
        case let .array(values): values.map(plain)
        case let .dictionary(values): values.mapValues(plain)
        }
    }
}
