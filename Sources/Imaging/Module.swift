// Placeholder so the target builds until the module's first file lands.
