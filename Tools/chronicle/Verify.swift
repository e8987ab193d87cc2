import ArgumentParser
import Chronicle

struct Verify: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check that every record decodes, the hash chain holds and the views equal a replay.",
        discussion: "Exits with status 1 and names the first bad sequence when the store is not sound.")

    @OptionGroup var options: StoreOptions

    func run() throws {
        let report = try options.open().verify()
        if report.isSound {
            print(report.description)
        } else {
            if let sequence = report.firstBadSequence { printError("first bad sequence: \(sequence)") }
            printError(report.description)
            throw ExitCode(1)
        }
    }
}

struct Replay: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Rebuild the views from the log.",
        discussion: "Runs in one transaction: on a corrupt record nothing changes and the sequence is named.")

    @OptionGroup var options: StoreOptions

    func run() throws {
        let store = try options.open()
        try store.rebuildViews()
        print("views rebuilt from \(try store.logEntries().count) records")
    }
}
