import ArgumentParser
@_spi(Tools) import Chronicle

extension EverydayCommands {
    struct PurgeHistory: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "purge-history", abstract: "Drop a key's old revisions from this store now.",
            discussion: """
                Drops every revision of the key that its current value does not need, sealed ones included, \
                whatever the key's retention: old tokens, old passwords. Sequences of the records kept do not \
                change, so readers of the log and peers keep their places, and the dropped identities are \
                remembered so that no peer brings them back.

                Only this store forgets: peers and backups keep the revisions they received until their own \
                retention drops them, and a sealed one still opens there with the data key.

                The dropped revisions' bytes stay in the data file's free pages until the file is rewritten: \
                at the next opening of the store by a process that finds no other process using it, or now \
                with --erase (a compacting copy that keeps every sequence; it refuses while another process \
                has the store open, and the next opening does it then).

                Example: chronicle purge-history auth.token --secret --erase --store ./store
                """)

        @OptionGroup var options: StoreOptions
        @Argument(help: "The key name.") var key: String
        @Flag(help: "Purge the secret of this name.") var secret = false
        @Flag(help: "Rewrite the data file now, so the purged bytes are gone from it (no other process may have the store open).")
        var erase = false

        func run() throws {
            let directory = options.directory
            do {
                let store = try options.openExisting()
                let target: AnyKey = secret ? SecretKey<String?>(key) : Key<String?>(key)
                let dropped = try store.purgeHistory(of: target)
                print("dropped \(dropped) revision\(dropped == 1 ? "" : "s") of \(terminalSafe(key))")
            }
            guard erase else { return }
            do {
                let sizes = try Store.reclaimSpace(directory: directory)
                print("rewrote the data file (\(sizes.before) → \(sizes.after) bytes): purged revisions are gone from it")
            } catch {
                throw ChronicleError.invalidArgument(
                    "the revisions are dropped, but their bytes stay in the data file for now: \(error); "
                        + "the next opening of the store that finds no other process using it rewrites the file")
            }
        }
    }
}
