import API

// Wired up once the HTTP and serving layers land.
print("osprey: not yet wired")
