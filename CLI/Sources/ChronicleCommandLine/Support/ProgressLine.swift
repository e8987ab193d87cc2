@_spi(Tools) import Chronicle
import Foundation

/// A progress line on standard error (percent and rate), shown only when it is a terminal: a
/// pipe or a log file never gets one.
public struct ProgressLine: Sendable {
    let label: String
    let enabled = isatty(2) == 1
    let started = ContinuousClock.now

    /// A line that starts with `label`.
    public init(label: String) { self.label = label }

    /// Shows `done` of `total`.
    public func update(_ done: UInt64, of total: UInt64) {
        guard enabled, total > 0 else { return }
        let width = 30
        let fraction = Double(min(done, total)) / Double(total)
        let filled = Int(Double(width) * fraction)
        let bar = String(repeating: "█", count: filled) + String(repeating: "·", count: width - filled)
        let elapsed = ContinuousClock.now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let rate = seconds > 0 ? " \(Int(Double(done) / seconds))/s" : ""
        FileHandle.standardError.write(Data("\r\(label) \(bar) \(Int(fraction * 100))% \(done)/\(total)\(rate)\u{1B}[K".utf8))
    }

    /// A running count, for work whose total is unknown.
    public func count(_ done: Int) {
        guard enabled else { return }
        FileHandle.standardError.write(Data("\r\(label) \(done) events".utf8))
    }

    /// Clears the line.
    public func finish() {
        guard enabled else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[2K".utf8))
    }
}
