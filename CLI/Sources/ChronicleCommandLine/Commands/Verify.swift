import ArgumentParser
@_spi(Tools) import Chronicle

extension EverydayCommands {
    struct Verify: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check that every record decodes, the hash chain holds and the views equal a replay.",
            discussion: """
                Exits with status 1 and names the first bad sequence when the store is not sound, and \
                with status 2 when it cannot check: a keyed store (created with a key source) needs its \
                key (--passphrase-file, --key-file or CHRONICLE_PASSPHRASE) to check the chain.

                Example: chronicle verify --store ./store
                """)

        @OptionGroup var options: StoreOptions
        @Flag(help: "One JSON object: sound, records, keys and, when not sound, firstBadSequence and problem.") var json = false

        func run() throws {
            let progress = ProgressLine(label: "verify")
            let report: VerificationReport
            do {
                report = try options.openExisting().verify { done, total in progress.update(done, of: total) }
            } catch let error as ChronicleError where error.isDamage {
                // The opening itself refused the store for damage (a keyed log whose meta forgot its
                // chain key, a head MAC that does not verify): that is a finding, not a failure to check.
                report = Store.verificationReport(refusedOpening: error)
            }
            progress.finish()
            if json {
                printJSONLine([
                    "sound": report.isSound, "records": report.records, "keys": report.keys,
                    "firstBadSequence": report.firstBadSequence, "problem": report.firstProblem.map { "\($0)" },
                ])
                if !report.isSound { throw ExitCode(1) }
                return
            }
            if report.isSound {
                print(report.description)
            } else {
                if let sequence = report.firstBadSequence { printError("first bad sequence: \(sequence)") }
                printError(report.description)
                throw ExitCode(1)
            }
        }
    }
}
