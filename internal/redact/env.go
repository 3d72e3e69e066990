package redact

import "os"

// osEnviron is os.Environ, replaceable in tests.
var osEnviron = os.Environ
