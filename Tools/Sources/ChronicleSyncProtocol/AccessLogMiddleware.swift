package import Hummingbird
import Foundation
package import Logging

/// One line per request at `info`, after the answer: method, path (never the query's values
/// nor a header, so never a token), status and milliseconds. Both servers use it, outermost.
package struct AccessLogMiddleware<Context: RequestContext>: RouterMiddleware {
    package let logger: Logger

    package init(logger: Logger) {
        var logger = logger
        logger[metadataKey: "log"] = "access"
        self.logger = logger
    }

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let started = ContinuousClock.now
        do {
            let response = try await next(request, context)
            log(request, status: Int(response.status.code), since: started)
            return response
        } catch {
            log(request, status: Int((error as? any HTTPResponseError)?.status.code ?? 500), since: started)
            throw error
        }
    }

    private func log(_ request: Request, status: Int, since started: ContinuousClock.Instant) {
        let elapsed = ContinuousClock.now - started
        let milliseconds = Double(elapsed.components.seconds) * 1_000 + Double(elapsed.components.attoseconds) / 1e15
        logger.info(
            "\(request.method.rawValue) \(request.uri.path) \(status)",
            metadata: [
                "method": .string(request.method.rawValue), "path": .string(request.uri.path), "status": .stringConvertible(status),
                "ms": .string(String(format: "%.1f", milliseconds)),
            ])
    }
}
