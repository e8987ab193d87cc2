import ArgumentParser
import ChronicleHub

extension ChronicleCommand.Hub.Tenant {
    struct Retention: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Set how many revisions of a key a tenant's log keeps.",
            discussion: """
                The hub keeps, of each key, the newest revisions each device pushed and each device's \
                newest by the conflict order, so a tenant's log holds live values and its quota counts \
                them. A device's own pushes never evict another device's events. The hub trims after \
                appends, in short transactions; this command trims the tenant at once.

                Examples:
                  chronicle hub tenant retention family --revisions 20
                  chronicle hub tenant retention audit-org --forever
                """)
        @OptionGroup var database: DatabaseOptions
        @Argument(help: "The tenant's name.") var name: String
        @Option(help: "Revisions of a key kept per device (default 100).") var revisions: Int32?
        @Flag(help: "Keep every revision (the log then grows with every write).") var forever = false

        func validate() throws {
            if forever, revisions != nil { throw ValidationError("give --revisions or --forever, not both") }
            if let revisions, revisions < 1 { throw ValidationError("--revisions is at least 1") }
        }

        func run() async throws {
            let (name, kept): (String, Int32?) = (name, forever ? 0 : revisions)
            try await database.with { try await $0.setRetention(tenant: name, revisions: kept) }
            print("retention set: \(forever ? "every revision" : "\(kept ?? HubDatabase.defaultRetainedRevisions) revisions a key per device")")
        }
    }
}
