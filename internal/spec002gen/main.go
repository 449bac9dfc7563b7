// Command spec002gen extracts the parameter and result schemas and the
// example requests of spec 002 (the tool catalog, a Markdown document kept
// outside this repository) into JSON files the agent's contract test reads:
//
//	go run ./internal/spec002gen -spec ../shared/spec/002_74f823959d5e8abe.txt -out agent/testdata/spec002
//
// It runs only when the spec changes; the test itself reads only the output,
// so the repository is self-contained. Each ```json block of the document is
// classified by the line that introduces it ("Parameters schema", "Result
// schema", "Request", ...) and attributed to the tool named in backticks on
// that line, else in its section's heading, else (for examples) in its own
// "method" or the previous example's.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Tool is everything the spec says about one tool.
type Tool struct {
	ID         string          `json:"id"`
	Sections   []string        `json:"sections"`
	Parameters json.RawMessage `json:"parameters,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	// ResultAdditions are example fragments the addendum adds to the result.
	ResultAdditions []json.RawMessage `json:"result_additions,omitempty"`
	Examples        []Example         `json:"examples,omitempty"`
}

// Example is one example request.
type Example struct {
	Section     string          `json:"section"`
	Label       string          `json:"label"`
	Params      json.RawMessage `json:"params"`
	ExpectError bool            `json:"expect_error,omitempty"`
}

var (
	toolID  = regexp.MustCompile("`([a-z][a-z0-9_]*\\.[a-z_]+)`")
	heading = regexp.MustCompile(`^(#+)\s+(.*)$`)
	defName = regexp.MustCompile(`^[0-9.]+\s+(\w+) Schema`)
)

func main() {
	spec := flag.String("spec", "", "the spec's Markdown file")
	out := flag.String("out", "", "directory for the JSON files")
	flag.Parse()
	if *spec == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "usage: spec002gen -spec FILE -out DIR")
		os.Exit(2)
	}
	if err := run(*spec, *out); err != nil {
		fmt.Fprintln(os.Stderr, "spec002gen:", err)
		os.Exit(1)
	}
}

func run(specPath, outDir string) error {
	src, err := os.ReadFile(specPath)
	if err != nil {
		return err
	}
	tools, defs, err := extract(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	for _, t := range tools {
		if err := write(filepath.Join(outDir, strings.ReplaceAll(t.ID, ".", "_")+".json"), t); err != nil {
			return err
		}
	}
	return write(filepath.Join(outDir, "definitions.json"), defs)
}

func write(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func extract(src []byte) (map[string]*Tool, map[string]json.RawMessage, error) {
	tools := map[string]*Tool{}
	defs := map[string]json.RawMessage{}
	get := func(id, section string) *Tool {
		t := tools[id]
		if t == nil {
			t = &Tool{ID: id}
			tools[id] = t
		}
		if len(t.Sections) == 0 || t.Sections[len(t.Sections)-1] != section {
			t.Sections = append(t.Sections, section)
		}
		return t
	}
	var (
		h3, h4, label, lastMethod string
		inBlock, isJSON           bool
		block                     bytes.Buffer
		lineNo, blockLine         int
	)
	sc := bufio.NewScanner(bytes.NewReader(src))
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		trim := strings.TrimSpace(line)
		if strings.HasPrefix(trim, "```") {
			if !inBlock {
				inBlock, isJSON, blockLine = true, strings.TrimPrefix(trim, "```") == "json", lineNo
				block.Reset()
				continue
			}
			inBlock = false
			if !isJSON {
				continue
			}
			section := h3
			if h4 != "" {
				section = h4
			}
			if err := classify(block.Bytes(), label, h3, section, &lastMethod, get, defs); err != nil {
				return nil, nil, fmt.Errorf("block at line %d (%q): %w", blockLine, label, err)
			}
			continue
		}
		if inBlock {
			block.WriteString(line + "\n")
			continue
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			switch len(m[1]) {
			case 1, 2:
				h3, h4, lastMethod = m[2], "", "" // a new chapter: examples start over
			case 3:
				h3, h4 = m[2], ""
			default:
				h4 = m[2]
			}
			label = ""
			continue
		}
		if trim != "" {
			label = trim
		}
	}
	return tools, defs, sc.Err()
}

func classify(raw []byte, label, h3, section string, lastMethod *string, get func(id, section string) *Tool, defs map[string]json.RawMessage) error {
	id := ""
	if m := toolID.FindStringSubmatch(label); m != nil {
		id = m[1]
	} else if m := toolID.FindStringSubmatch(h3); m != nil {
		id = m[1]
	}
	lower := strings.ToLower(label)
	switch {
	case strings.Contains(lower, "response") && !strings.Contains(lower, "schema"):
		return nil // example answers and errors: the schemas say what they must be
	case strings.Contains(lower, "common status") || strings.Contains(h3, "Common Status"):
		return addDef(defs, "common_status", raw)
	case defName.MatchString(h3) && id == "":
		return addDef(defs, defName.FindStringSubmatch(h3)[1], raw)
	case strings.Contains(lower, "parameters"):
		if id == "" {
			return fmt.Errorf("parameters of no tool")
		}
		t := get(id, section)
		if t.Parameters != nil {
			return fmt.Errorf("%s: parameters twice", id)
		}
		t.Parameters = compact(raw)
	case strings.Contains(lower, "result schema") || strings.Contains(lower, "response schema"):
		if id == "" {
			return fmt.Errorf("result of no tool")
		}
		t := get(id, section)
		if t.Result != nil {
			return fmt.Errorf("%s: result twice", id)
		}
		t.Result = compact(raw)
	case strings.HasPrefix(lower, "added to"):
		get(id, section).ResultAdditions = append(get(id, section).ResultAdditions, compact(raw))
	default:
		// An example request: JSON-RPC with a method, or bare params that
		// continue the section's previous example.
		var req struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal(raw, &req); err != nil {
			return err
		}
		if req.Params == nil {
			return fmt.Errorf("neither schema nor request")
		}
		if req.Method != "" {
			*lastMethod = req.Method
		}
		if *lastMethod == "" {
			return fmt.Errorf("example without a method")
		}
		t := get(*lastMethod, section)
		t.Examples = append(t.Examples, Example{Section: section, Label: strings.Trim(strings.ReplaceAll(label, "**", ""), ": "), Params: compact(req.Params),
			ExpectError: strings.Contains(lower, "invalid")})
	}
	return nil
}

func addDef(defs map[string]json.RawMessage, name string, raw []byte) error {
	if _, dup := defs[name]; dup {
		return fmt.Errorf("definition %s twice", name)
	}
	defs[name] = compact(raw)
	return nil
}

// compact re-indents a block so the files diff well; invalid JSON stays
// invalid and fails the caller's Unmarshal.
func compact(raw []byte) json.RawMessage {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return json.RawMessage(raw)
	}
	b, _ := json.Marshal(sortKeys(v))
	return b
}

func sortKeys(v any) any {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			x[k] = sortKeys(x[k])
		}
		return x
	case []any:
		for i := range x {
			x[i] = sortKeys(x[i])
		}
	}
	return v
}
