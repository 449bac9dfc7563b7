package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func cmdCall(args []string) error {
	c := newCommand("call", "[--dir DIR] [--json] [--timeout D] TOOL [JSON | KEY=VALUE...]",
		"call one tool; arguments as one JSON object or as key=value pairs typed by the tool's schema")
	var w where
	w.flags(c.fs)
	asJSON := c.fs.Bool("json", false, "print the whole MCP result as JSON: one line when piped, indented on a terminal")
	// A critical call may wait for the owner at the Pi ([guard]
	// approval_timeout, 2 minutes by default): call waits longer than that.
	timeout := c.fs.Duration("timeout", 5*time.Minute, "give up after `D` (a call may wait for the owner's approval)")
	pos, err := c.parse(args)
	if err != nil {
		return err
	}
	if len(pos) < 1 {
		return c.wrongArgs("call needs a TOOL (raspi-mcp tools lists them)")
	}
	if *timeout <= 0 {
		return c.wrongArgs("--timeout must be positive")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	s, err := session(ctx, &w)
	if err != nil {
		return err
	}
	defer s.Close()
	t, err := findTool(ctx, s, pos[0])
	if err != nil {
		return err
	}
	arguments, err := parseArguments(t, pos[1:])
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: t.Name, Arguments: arguments})
	if err != nil {
		return err
	}
	term := isTerminal(os.Stdout)
	switch {
	case *asJSON && term:
		b, _ := json.MarshalIndent(res, "", "  ")
		fmt.Println(string(b))
	case term:
		v := callView{Width: callWidth(os.Stdout), Tool: t.Name, Args: arguments, Prefix: "raspi-mcp call" + w.again()}
		v.render(os.Stdout, res)
	default:
		// Piped (or --json): the whole MCP result as one line of JSON and
		// nothing else, so that jq and scripts read it as it is; the
		// summary is its first text content.
		b, _ := json.Marshal(res)
		fmt.Println(string(b))
	}
	if res.IsError {
		return &exitError{code: 1}
	}
	return nil
}

// callWidth is how wide call's output may be on the terminal f: its width,
// else $COLUMNS, else 80.
func callWidth(f *os.File) int {
	if w, _ := termWidth(f); w > 0 {
		return w
	}
	if w, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && w > 0 {
		return w
	}
	return 80
}

// again is the flags that reach the same agent again, for the command lines
// call prints (try:, next:), so that they can be pasted as they are.
func (w *where) again() string {
	switch {
	case w.socket != "":
		return " --socket " + callShellWord(w.socket)
	case w.dir != "":
		return " --dir " + callShellWord(w.dir)
	}
	return ""
}

// callShellWord is s quoted for a shell only when it needs it.
func callShellWord(s string) string {
	if callSafe.MatchString(s) {
		return s
	}
	return callShellQuote(s)
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// findTool is the tool named name, or an error naming the closest ones.
func findTool(ctx context.Context, s *mcp.ClientSession, name string) (*mcp.Tool, error) {
	list, err := listTools(ctx, s)
	if err != nil {
		return nil, err
	}
	for _, t := range list {
		if t.Name == name || strings.ReplaceAll(t.Name, "_", ".") == name {
			return t, nil
		}
	}
	msg := fmt.Sprintf("no tool %q", name)
	if near := closest(name, list, 3); len(near) > 0 {
		msg += "; did you mean " + strings.Join(near, ", ") + "?"
	}
	return nil, &exitError{code: 2, msg: msg + " (raspi-mcp tools lists them all)"}
}

func listTools(ctx context.Context, s *mcp.ClientSession) ([]*mcp.Tool, error) {
	var list []*mcp.Tool
	for t, err := range s.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		list = append(list, t)
	}
	return list, nil
}

// closest are up to n tool names nearest to name: those containing it
// first, then by edit distance, and none that are far off.
func closest(name string, tools []*mcp.Tool, n int) []string {
	type cand struct {
		name string
		d    int
	}
	var cs []cand
	for _, t := range tools {
		d := editDistance(name, t.Name)
		if strings.Contains(t.Name, name) || strings.Contains(name, t.Name) {
			d = 0
		}
		if d <= max(3, len(t.Name)/3) {
			cs = append(cs, cand{t.Name, d})
		}
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].d < cs[j].d })
	var out []string
	for i := 0; i < len(cs) && i < n; i++ {
		out = append(out, cs[i].name)
	}
	return out
}

// editDistance is the Levenshtein distance of two names.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// parseArguments reads a call's arguments: one JSON object, or key=value
// pairs whose values take the type the tool's schema gives the key (pin=17
// is a number, dry_run=true a boolean, metrics=a,b a list); a value that is
// valid JSON of that type is taken as JSON.
func parseArguments(t *mcp.Tool, args []string) (map[string]any, error) {
	out := map[string]any{}
	if len(args) == 1 && strings.HasPrefix(strings.TrimSpace(args[0]), "{") {
		if err := json.Unmarshal([]byte(args[0]), &out); err != nil {
			return nil, fmt.Errorf("arguments must be a JSON object: %v", err)
		}
		return out, nil
	}
	props := schemaProps(t.InputSchema)
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("argument %q: want KEY=VALUE or one JSON object", a)
		}
		val, err := typed(props[k], v)
		if err != nil {
			return nil, fmt.Errorf("argument %s: %v", k, err)
		}
		out[k] = val
	}
	return out, nil
}

// schemaProps is the properties of an input schema as the client got it.
func schemaProps(schema any) map[string]map[string]any {
	b, _ := json.Marshal(schema)
	var s struct {
		Properties map[string]map[string]any `json:"properties"`
	}
	_ = json.Unmarshal(b, &s)
	return s.Properties
}

func typeOf(p map[string]any) string {
	switch t := p["type"].(type) {
	case string:
		return t
	case []any:
		for _, x := range t {
			if x != "null" {
				return fmt.Sprint(x)
			}
		}
	}
	return ""
}

// typed converts the text v to the JSON type p says.
func typed(p map[string]any, v string) (any, error) {
	switch typeOf(p) {
	case "integer", "number":
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			return f, nil
		}
		if e, _ := p["enum"].([]any); len(e) == 0 {
			return nil, fmt.Errorf("%q is not a number", v)
		}
	case "boolean":
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("%q is not true or false", v)
		}
		return b, nil
	case "array":
		if strings.HasPrefix(v, "[") {
			var a []any
			if err := json.Unmarshal([]byte(v), &a); err != nil {
				return nil, err
			}
			return a, nil
		}
		items, _ := p["items"].(map[string]any)
		var a []any
		for _, part := range strings.Split(v, ",") {
			x, err := typed(items, strings.TrimSpace(part))
			if err != nil {
				return nil, err
			}
			a = append(a, x)
		}
		return a, nil
	case "object":
		var o map[string]any
		if err := json.Unmarshal([]byte(v), &o); err != nil {
			return nil, fmt.Errorf("want a JSON object: %v", err)
		}
		return o, nil
	case "":
		var x any
		if json.Unmarshal([]byte(v), &x) == nil {
			return x, nil
		}
	}
	return v, nil
}

func cmdTools(args []string) error {
	c := newCommand("tools", "[--dir DIR] [--json] [NAME]", "list the tools with their risk and role, or show one tool's parameters")
	var w where
	w.flags(c.fs)
	asJSON := c.fs.Bool("json", false, "print the tool definitions as JSON")
	pos, err := c.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return c.wrongArgs("tools takes at most one NAME")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := session(ctx, &w)
	if err != nil {
		return err
	}
	defer s.Close()
	if len(pos) == 1 {
		t, err := findTool(ctx, s, pos[0])
		if err != nil {
			return err
		}
		if *asJSON {
			b, _ := json.MarshalIndent(t, "", "  ")
			fmt.Println(string(b))
			return nil
		}
		printTool(t)
		return nil
	}
	list, err := listTools(ctx, s)
	if err != nil {
		return err
	}
	if *asJSON {
		b, _ := json.MarshalIndent(list, "", "  ")
		fmt.Println(string(b))
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tRISK\tROLE\tWHAT")
	for _, t := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Name, metaString(t, "risk"), metaString(t, "min_role"), t.Title)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Printf("\n%d tools; raspi-mcp tools NAME shows one tool's parameters\n", len(list))
	return nil
}

func metaString(t *mcp.Tool, k string) string {
	if v, ok := t.Meta[k].(string); ok {
		return v
	}
	return "-"
}

// printTool shows one tool: what it does, its risk and role, and each
// parameter with its type, bounds, default and description.
func printTool(t *mcp.Tool) {
	fmt.Printf("%s: %s\n  risk %s, role %s\n\n%s\n", t.Name, t.Title, metaString(t, "risk"), metaString(t, "min_role"), t.Description)
	b, _ := json.Marshal(t.InputSchema)
	var s struct {
		Properties map[string]map[string]any `json:"properties"`
		Required   []string                  `json:"required"`
	}
	_ = json.Unmarshal(b, &s)
	if len(s.Properties) == 0 {
		fmt.Println("\nno parameters")
		return
	}
	required := map[string]bool{}
	for _, r := range s.Required {
		required[r] = true
	}
	names := make([]string, 0, len(s.Properties))
	for k := range s.Properties {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool { // required first, then by name
		if required[names[i]] != required[names[j]] {
			return required[names[i]]
		}
		return names[i] < names[j]
	})
	fmt.Println("\nparameters:")
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	for _, k := range names {
		p := s.Properties[k]
		kind := typeOf(p)
		if items, ok := p["items"].(map[string]any); ok && kind == "array" {
			kind = "array of " + typeOf(items)
		}
		var notes []string
		if required[k] {
			notes = append(notes, "required")
		}
		if e, ok := p["enum"].([]any); ok {
			vals := make([]string, len(e))
			for i, v := range e {
				vals[i] = fmt.Sprint(v)
			}
			notes = append(notes, "one of "+strings.Join(vals, "|"))
		}
		lo, hasLo := p["minimum"]
		hi, hasHi := p["maximum"]
		switch {
		case hasLo && hasHi:
			notes = append(notes, fmt.Sprintf("%v..%v", lo, hi))
		case hasLo:
			notes = append(notes, fmt.Sprintf(">= %v", lo))
		case hasHi:
			notes = append(notes, fmt.Sprintf("<= %v", hi))
		}
		if d, ok := p["default"]; ok {
			notes = append(notes, fmt.Sprintf("default %v", d))
		}
		desc, _ := p["description"].(string)
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", k, kind, strings.Join(notes, ", "), desc)
	}
	tw.Flush()
	fmt.Printf("\ne.g. raspi-mcp call %s", t.Name)
	for _, k := range names {
		if required[k] {
			fmt.Printf(" %s=...", k)
		}
	}
	fmt.Println()
}
