/// `osprey inspect`: not wired yet; the owning issue replaces this file.
let inspectCommand = Command(name: "inspect", summary: "(inspect: in progress)", help: "osprey inspect: in progress") { _ in
    throw UsageError(description: "'inspect' is not available in this build yet")
}
