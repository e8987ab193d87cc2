// BearerToken (the tokens of the HTTP protocol) lives in ChronicleFormat, which a relay uses
// alone; an app that adds ChronicleHTTP finds it here as before.
@_exported public import ChronicleFormat
