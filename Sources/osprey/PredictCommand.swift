/// `osprey predict`: not wired yet; the owning issue replaces this file.
let predictCommand = Command(name: "predict", summary: "(predict: in progress)", help: "osprey predict: in progress") { _ in
    throw UsageError(description: "'predict' is not available in this build yet")
}
