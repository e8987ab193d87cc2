import ArgumentParser
@_spi(Tools) import Chronicle
import Foundation

extension EverydayCommands {
    struct Salvage: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Copy what verifies of a store refused for damage into a new store.",
            discussion: """
                A store whose files were damaged or edited without its key is refused by every \
                opening, and nothing is written to it. This command is the explicit repair: it takes a \
                snapshot of the store's data file (the store itself is not written), reads it with \
                whatever keys its key source still opens, and writes the log up to the record before \
                the first one that does not verify (all of it when only its meta is damaged) into a \
                new directory, as a new store with its own identity and chain. What a cut took away is \
                not in the copy: another member or a backup still holds it.

                Example: chronicle salvage --store ./store --into ./store-salvaged --passphrase-file pw
                """)

        @OptionGroup var options: StoreOptions
        @Option(help: ArgumentHelp("The new directory for the copy.", valueName: "DIR")) var into: String

        func run() throws {
            guard FileManager.default.fileExists(atPath: options.directory.appendingPathComponent("data.mdb").path) else {
                throw ChronicleError.invalidArgument("there is no store at \(options.directory.path)")
            }
            let report = try StoreSalvage.copyWhatVerifies(
                of: options.directory, into: URL(fileURLWithPath: into, isDirectory: true), configuration: try options.configuration())
            if report.finding.isSound {
                print("the store verifies: nothing to salvage beyond a copy")
            } else {
                printError("found: \(report.finding.firstProblem.map { "\($0)" } ?? "")")
            }
            let stats = try report.copy.statistics()
            print("wrote \(into): the log through sequence \(report.copiedThrough), \(stats.records) records, "
                + "\(stats.defaultsKeys + stats.secretKeys) keys, replica \(stats.replicaID.short)")
        }
    }
}
