// Package tool is the call pipeline every tool call of the agent passes
// (issue 29): the error shape a model acts on (Error), the policy decision
// (Rule, Guard, Decide), the typed Spec a tool is built from with the
// helpers that tighten its generated JSON schemas (Prop, P, Min, ...), the
// Call a handler serves, and the Registry that builds, validates, lists,
// mounts and unmounts tools. It knows no namespace and no device: the agent
// keeps the catalog and hands the registry what it needs (Options), and
// must not be linked from here (deps_test.go).
package tool

import (
	"encoding/json"

	"github.com/google/jsonschema-go/jsonschema"
)

// Prop tightens one property of a generated schema; Path is "name" or "outer.inner".
type Prop struct {
	Path string
	Mods []func(*jsonschema.Schema)
}

// P tightens the property at path with mods (Min, Max, MaxLen, Enum, Default, ...).
func P(path string, mods ...func(*jsonschema.Schema)) Prop { return Prop{path, mods} }

// Min sets the minimum of a number.
func Min(v float64) func(*jsonschema.Schema) {
	return func(s *jsonschema.Schema) { s.Minimum = &v }
}

// Max sets the maximum of a number.
func Max(v float64) func(*jsonschema.Schema) {
	return func(s *jsonschema.Schema) { s.Maximum = &v }
}

// MaxLen sets the maximum length of a string.
func MaxLen(n int) func(*jsonschema.Schema) { return func(s *jsonschema.Schema) { s.MaxLength = &n } }

// MinLen sets the minimum length of a string.
func MinLen(n int) func(*jsonschema.Schema) { return func(s *jsonschema.Schema) { s.MinLength = &n } }

// MinItems sets the minimum length of an array.
func MinItems(n int) func(*jsonschema.Schema) { return func(s *jsonschema.Schema) { s.MinItems = &n } }

// MaxItems sets the maximum length of an array.
func MaxItems(n int) func(*jsonschema.Schema) { return func(s *jsonschema.Schema) { s.MaxItems = &n } }

// Format sets a string's format (date-time, ...).
func Format(f string) func(*jsonschema.Schema) {
	return func(s *jsonschema.Schema) { s.Format = f }
}

// Enum sets the allowed values.
func Enum(vals ...any) func(*jsonschema.Schema) { return func(s *jsonschema.Schema) { s.Enum = vals } }

// ItemsEnum restricts the elements of an array property, where an enum on the
// array itself would match no value a client can send.
func ItemsEnum(vals ...any) func(*jsonschema.Schema) {
	return func(s *jsonschema.Schema) { s.Items.Enum = vals }
}

// Default sets the default value.
func Default(v any) func(*jsonschema.Schema) {
	return func(s *jsonschema.Schema) { s.Default, _ = json.Marshal(v) }
}

// Renames is a Spelling that accepts older parameter names for the current
// ones. When both are given the old one is left, and refused as unknown.
func Renames(oldToNew map[string]string) func(map[string]any) {
	return func(args map[string]any) {
		for o, n := range oldToNew {
			v, ok := args[o]
			if _, taken := args[n]; ok && !taken {
				args[n] = v
				delete(args, o)
			}
		}
	}
}
