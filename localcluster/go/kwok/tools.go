//go:build tools

// Package tools pins the kwok command this wrapper module builds.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
