// Package secret reads the shared token a deployment gives its needle processes in a file
// (`--token-file`, or $NEEDLE_TOKEN_FILE): the weights daemons prove it to each other and
// `needle serve` takes it as its bearer token, so one file serves both.
package secret

import (
	"bytes"
	"fmt"
	"os"
)

// EnvFile is the environment variable that names the token file when no flag does.
const EnvFile = "NEEDLE_TOKEN_FILE"

// ReadFile returns the token in path: its bytes without surrounding white space (a trailing
// newline is how editors and `echo` end a file). An empty token is an error: it would protect
// nothing.
func ReadFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, fmt.Errorf("token file %s is empty", path)
	}
	return b, nil
}
