// Replaced by the module's real tests; keeps the test target buildable meanwhile.
