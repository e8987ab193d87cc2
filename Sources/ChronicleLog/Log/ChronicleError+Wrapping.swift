package import ChronicleFormat
import ChronicleLMDB
import Foundation

extension ChronicleError {
    /// Maps any error thrown below the public API to a `ChronicleError` of the same kind:
    /// LMDB errors stay storage errors (with their errno name), file-system errors
    /// stay I/O errors, undecodable bytes stay malformed input, cancellation stays cancellation.
    package static func wrap(_ error: any Error) -> ChronicleError {
        switch error {
        case let error as ChronicleError: return error
        case let error as LMDBError: return .storage(code: error.code, message: error.message)
        case let error as DecodeFailure: return .malformedInput(error.description)
        case is CancellationError: return .cancelled
        case let error as CocoaError:
            let path = (error.userInfo[NSFilePathErrorKey] as? String) ?? error.errorUserInfo[NSFilePathErrorKey] as? String ?? "?"
            return .io(path: path, reason: error.localizedDescription)
        case let error as POSIXError:
            return .io(path: "?", reason: "\(error.code): \(error.localizedDescription)")
        case is DecodingError, is EncodingError:
            return .malformedInput(ChronicleError.valueFreeDescription(of: error))  // their own descriptions quote values
        default:
            return .unexpected(type: String(describing: type(of: error)), description: String(describing: error))
        }
    }
}

/// Runs `body`, turning any error into a ``ChronicleError``.
@inline(__always)
package func mappingErrors<R>(_ body: () throws -> R) throws(ChronicleError) -> R {
    do {
        return try body()
    } catch {
        throw ChronicleError.wrap(error)
    }
}
