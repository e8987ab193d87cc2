import ArgumentParser
@_spi(Tools) import Chronicle

extension ChronicleCommand {
    struct PurgeHistory: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "purge-history", abstract: "Drop a key's old revisions from this store now.",
            discussion: """
                Drops every revision of the key that its current value does not need, sealed ones included, \
                whatever the key's retention: old tokens, old passwords. Sequences of the records kept do not \
                change, so readers of the log and peers keep their places, and the dropped identities are \
                remembered so that no peer brings them back.

                Only this store forgets: peers keep the revisions they received until their own retention \
                drops them (to make an old secret unreadable everywhere, rotate the data key with re-sealing). \
                Freed pages may hold old bytes until later writes reuse them; `chronicle compact --reclaim` \
                rewrites the file.

                Example: chronicle purge-history auth.token --secret --store ./store
                """)

        @OptionGroup var options: StoreOptions
        @Argument(help: "The key name.") var key: String
        @Flag(help: "Purge the secret of this name.") var secret = false

        func run() throws {
            let store = try options.openExisting()
            let target: AnyKey = secret ? SecretKey<String?>(key) : Key<String?>(key)
            let dropped = try store.purgeHistory(of: target)
            print("dropped \(dropped) revision\(dropped == 1 ? "" : "s") of \(terminalSafe(key))")
        }
    }
}
