import ArgumentParser
@_spi(Tools) import Chronicle
import Foundation

/// A progress line on standard error, shown only when it is a terminal.
struct ProgressLine: Sendable {
    let label: String
    let enabled = isatty(2) == 1

    func update(_ done: UInt64, of total: UInt64) {
        guard enabled, total > 0 else { return }
        let width = 30
        let filled = Int(Double(width) * Double(min(done, total)) / Double(total))
        let bar = String(repeating: "█", count: filled) + String(repeating: "·", count: width - filled)
        FileHandle.standardError.write(Data("\r\(label) \(bar) \(done)/\(total)".utf8))
    }

    /// A running count, for work whose total is unknown.
    func count(_ done: Int) {
        guard enabled else { return }
        FileHandle.standardError.write(Data("\r\(label) \(done) events".utf8))
    }

    func finish() {
        guard enabled else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[2K".utf8))
    }
}
