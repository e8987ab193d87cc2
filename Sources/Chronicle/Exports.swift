// Everything an app sees of the formats (ChronicleError, ReplicaID, SyncPolicy, …) comes with
// `import Chronicle`.
@_exported public import ChronicleFormat
