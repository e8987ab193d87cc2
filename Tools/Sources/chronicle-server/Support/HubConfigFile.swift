import ArgumentParser
import ChronicleCommandLine
import Foundation

/// The settings of `chronicle hub serve --config FILE`: a JSON object whose keys are the
/// command's long options in snake case (`"max_connections_per_address": 0`). An option given on
/// the command line wins over the environment, which wins over the file, which wins over the
/// default. Relative paths in the file are relative to the file's directory (a link's target's).
/// The file must be a regular file, yours or root's, that nobody else may write.
///
/// ```json
/// {
///   "database_file": "database",
///   "host": "0.0.0.0", "port": 8787,
///   "tls_cert": "cert.pem", "tls_key": "key.pem",
///   "metrics_host": "127.0.0.1", "metrics_port": 9464,
///   "max_connections": 10000, "max_connections_per_address": 64, "max_wait_seconds": 30,
///   "log_level": "info", "log_format": "json"
/// }
/// ```
struct HubConfigFile: Decodable, Equatable {
    var database: String?
    var databaseFile: String?
    var host: String?
    var port: Int?
    var metricsHost: String?
    var metricsPort: Int?
    var metrics: Bool?
    var tlsCert: String?
    var tlsKey: String?
    var insecure: Bool?
    var maxConnections: Int?
    var maxConnectionsPerAddress: Int?
    var maxWaitSeconds: Int?
    var maxBodyBytes: Int?
    var databaseConnections: Int?
    var logLevel: String?
    var logFormat: String?

    enum CodingKeys: String, CodingKey, CaseIterable {
        case database, databaseFile = "database_file", host, port, metricsHost = "metrics_host", metricsPort = "metrics_port"
        case metrics, tlsCert = "tls_cert", tlsKey = "tls_key", insecure, maxConnections = "max_connections"
        case maxConnectionsPerAddress = "max_connections_per_address", maxWaitSeconds = "max_wait_seconds"
        case maxBodyBytes = "max_body_bytes", logLevel = "log_level", logFormat = "log_format"
        case databaseConnections = "database_connections"
    }

    /// Reads and checks `path`: a JSON object of known keys with values of the right type; paths
    /// made absolute against the file's directory. Errors name the file and the key.
    static func load(_ path: String) throws -> HubConfigFile {
        // Relative paths in it are relative to the file itself, not to a link to it.
        let url = URL(fileURLWithPath: path).resolvingSymlinksInPath()
        // Whoever may change this file chooses where the node listens, with what TLS key and
        // against which database: only its owner (the node's user or root) may write it.
        var status = stat()
        guard stat(url.path, &status) == 0 else {
            throw ValidationError("cannot read the configuration file \(path): \(String(cString: strerror(errno)))")
        }
        guard status.st_mode & S_IFMT == S_IFREG else { throw ValidationError("the configuration file \(path) is not a regular file") }
        guard status.st_uid == getuid() || status.st_uid == 0 else {
            throw ValidationError("the configuration file \(path) belongs to another user (uid \(status.st_uid)); it must be yours or root's")
        }
        guard status.st_mode & 0o022 == 0 else {
            throw ValidationError(
                "others may change the configuration file \(path) (mode \(String(status.st_mode & 0o777, radix: 8))): run `chmod go-w \(path)`")
        }
        guard status.st_size <= 1 << 20 else { throw ValidationError("the configuration file \(path) is over 1 MiB") }
        let data: Data
        do { data = try Data(contentsOf: url) } catch {
            throw ValidationError("cannot read the configuration file \(path): \((error as NSError).localizedFailureReason ?? error.localizedDescription)")
        }
        guard let object = try? JSONSerialization.jsonObject(with: data), let keys = (object as? [String: Any])?.keys else {
            throw ValidationError("\(path) is not a JSON object (see `chronicle hub serve --help` for the keys it may hold)")
        }
        let known = Set(CodingKeys.allCases.map(\.rawValue))
        if let unknown = keys.sorted().first(where: { !known.contains($0) }) {
            throw ValidationError(
                "\(path): unknown setting \"\(terminalSafe(unknown))\"; the settings are \(known.sorted().joined(separator: ", "))")
        }
        // A number where a whole one belongs (8787.5, 1e100): named here, where the decoder
        // would only say the data is not valid.
        let whole: Set<CodingKeys> = [.port, .metricsPort, .maxConnections, .maxConnectionsPerAddress, .maxWaitSeconds, .maxBodyBytes, .databaseConnections]
        for key in whole.map(\.rawValue).sorted() {
            guard let number = (object as? [String: Any])?[key] as? NSNumber, !(number is Bool) else { continue }
            let value = number.doubleValue
            guard value.rounded() == value, abs(value) <= 1e15 else { throw ValidationError("\(path): \"\(key)\" must be a whole number") }
        }
        var file: HubConfigFile
        do { file = try JSONDecoder().decode(HubConfigFile.self, from: data) } catch let DecodingError.typeMismatch(type, context) {
            throw ValidationError("\(path): \"\(context.codingPath.map(\.stringValue).joined(separator: "."))\" must be \(describe(type))")
        } catch {
            throw ValidationError("\(path): \(error)")
        }
        if file.database != nil, file.databaseFile != nil {
            throw ValidationError("\(path): give \"database\" or \"database_file\", not both")
        }
        let directory = url.deletingLastPathComponent()
        func absolute(_ path: String?) -> String? {
            guard let path, !path.hasPrefix("/") else { return path }
            return directory.appendingPathComponent(path).path
        }
        file.databaseFile = absolute(file.databaseFile)
        file.tlsCert = absolute(file.tlsCert)
        file.tlsKey = absolute(file.tlsKey)
        return file
    }

    private static func describe(_ type: Any.Type) -> String {
        switch type {
        case is Int.Type: "a whole number"
        case is Bool.Type: "true or false"
        case is String.Type: "a string"
        default: "a \(type)"
        }
    }
}
