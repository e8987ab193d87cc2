import ChronicleFormat
/// The version of the Chronicle library (and of the `chronicle` tool built with it).
public let chronicleVersion = "0.4.0"
