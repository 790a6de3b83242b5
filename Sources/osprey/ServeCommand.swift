/// `osprey serve`: not wired yet; the owning issue replaces this file.
let serveCommand = Command(name: "serve", summary: "(serve: in progress)", help: "osprey serve: in progress") { _ in
    throw UsageError(description: "'serve' is not available in this build yet")
}
