// Package fallback is the MCP server raspi-mcp answers with when it cannot
// serve: the Pi's `raspi-mcp stdio` when the agent is down, and the laptop's
// raspi-mcp-laptop when the Pi cannot be reached at all. It builds on every
// platform the laptop side does (no unix-only imports), which the bridge
// package, with its descriptor handover, does not.
package fallback

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/raspi-mcp/raspi-mcp/internal/rpcid"
)

// Down says why the agent cannot be reached and what the person should do.
type Down struct {
	Reason  string // "the agent is not running (/run/raspi-mcp/mcp.sock: no such file or directory)"
	FixHint string // "sudo systemctl start raspi-mcp"
	Version string // raspi-mcp's version, for serverInfo
	// Where says where raspi-mcp cannot serve, for the sentences around
	// Reason: "on this device" (the Pi's own stdio) when empty, "from this
	// laptop" when the laptop side could not reach the Pi.
	Where string
}

// UnavailableTool is the one tool the fallback lists. A server with no tools
// reads as "connected" in Claude Code, Gemini CLI and OpenCode, and Codex
// leaves it out of the model's prompt altogether, so instructions alone may
// never reach the model; a tool whose name and description say what is wrong
// does, and calling it answers the same `unavailable` error as any other.
const UnavailableTool = "raspi_mcp_unavailable"

// Clients of both protocol eras: 2026-07-28 probes with server/discover,
// older ones initialize. The newest first, as the go-sdk lists them.
var fallbackVersions = []string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// Serve speaks just enough MCP on stdin/stdout to tell the person why
// raspi-mcp cannot serve: MCP clients (Claude Code, Codex, Gemini CLI) show
// only "connection closed" when a stdio server exits, and none shows its
// stderr. It completes the handshake of either era with the reason and the
// fix as the server's instructions, lists one read-only tool
// (UnavailableTool) whose description says them again, and answers every
// other request with them: a call of any tool as an `unavailable` tool error
// in the agent's shape, anything else as a JSON-RPC error. It returns when
// stdin ends.
//
// It is a few dozen lines of encoding/json rather than a go-sdk server: the
// Pi's bridge process runs once per SSH session and stays small, and there
// is no tool, schema or session state here for an SDK to manage.
func Serve(stdin io.Reader, stdout io.Writer, d Down) error {
	where := d.Where
	if where == "" {
		where = "on this device"
	}
	instructions := fmt.Sprintf("raspi-mcp is unavailable %s: %s. Fix: %s", where, d.Reason, d.FixHint)
	server := map[string]any{"name": "raspi-mcp", "title": "Raspberry Pi (unavailable)", "version": d.Version}
	toolErr := map[string]any{"code": "unavailable", "message": d.Reason, "fix_hint": d.FixHint,
		"retryable": true, "details": map[string]any{}, "suggested_next_tool_calls": []any{}}
	errText, _ := json.Marshal(map[string]any{"error": toolErr})
	caps := map[string]any{"tools": map[string]any{}}
	tool := map[string]any{
		"name":  UnavailableTool,
		"title": "raspi-mcp is unavailable",
		"description": fmt.Sprintf("raspi-mcp cannot serve %s: %s. Fix: %s. Until then no other raspi-mcp tool exists; "+
			"tell the user this. Calling this tool returns the same as an error.", where, d.Reason, d.FixHint),
		"inputSchema": map[string]any{"type": "object", "properties": map[string]any{}, "additionalProperties": false},
		"annotations": map[string]any{"title": "raspi-mcp is unavailable", "readOnlyHint": true, "destructiveHint": false,
			"idempotentHint": true, "openWorldHint": false},
	}

	w := bufio.NewWriter(stdout)
	send := func(msg map[string]any) error {
		msg["jsonrpc"] = "2.0"
		b, err := json.Marshal(msg)
		if err != nil {
			return fmt.Errorf("fallback: answer: %w", err)
		}
		_, err = w.Write(append(b, '\n'))
		return err // written out before the next read waits
	}
	return eachLine(stdin, func(line []byte) error {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string         `json:"protocolVersion"`
				Meta            map[string]any `json:"_meta"`
			} `json:"params"`
		}
		if err := json.Unmarshal(bytes.TrimSpace(line), &req); err != nil {
			return send(map[string]any{"id": nil, "error": map[string]any{"code": -32700, "message": "parse error: " + err.Error()}})
		}
		if len(req.ID) == 0 || string(req.ID) == "null" || req.Method == "" {
			return nil // a notification or a response: nothing to answer
		}
		// A 2026-07-28 request carries its version in _meta; its results
		// say they are complete and who answered.
		modern := req.Method == "server/discover" || req.Params.Meta["io.modelcontextprotocol/protocolVersion"] != nil
		result := func(r map[string]any) error {
			if modern {
				r["resultType"] = "complete"
				meta, _ := r["_meta"].(map[string]any)
				if meta == nil {
					meta = map[string]any{}
				}
				meta["io.modelcontextprotocol/serverInfo"] = server
				r["_meta"] = meta
			}
			return send(map[string]any{"id": req.ID, "result": r})
		}
		switch req.Method {
		case "initialize":
			v := req.Params.ProtocolVersion
			if !slices.Contains(fallbackVersions[1:], v) {
				v = fallbackVersions[1]
			}
			return result(map[string]any{"protocolVersion": v, "capabilities": caps, "serverInfo": server, "instructions": instructions})
		case "server/discover":
			return result(map[string]any{"supportedVersions": fallbackVersions, "capabilities": caps, "instructions": instructions, "ttlMs": 0, "cacheScope": "private"})
		case "ping":
			return result(map[string]any{})
		case "tools/list":
			// ttlMs 0: a client must not cache this list past the outage.
			return result(map[string]any{"tools": []any{tool}, "ttlMs": 0, "cacheScope": "private"})
		case "tools/call":
			return result(map[string]any{"isError": true,
				"content": []any{map[string]any{"type": "text", "text": "error unavailable: " + d.Reason + "\n" + string(errText)}},
				"_meta":   map[string]any{"error": toolErr}})
		}
		return send(map[string]any{"id": req.ID, "error": map[string]any{"code": -32001, "message": "unavailable: " + d.Reason + ". Fix: " + d.FixHint,
			"data": map[string]any{"error_code": "unavailable", "fix_hint": d.FixHint}}})
	}, w.Flush)
}

// eachLine calls fn with every non-blank line of r, the last one even
// without its newline, and idle (the writer's flush) whenever no more input
// is buffered, so an answer leaves before the next read waits. A line longer
// than rpcid.MaxLine ends the session with an error.
func eachLine(r io.Reader, fn func([]byte) error, idle func() error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if err == bufio.ErrBufferFull {
			if len(line) >= rpcid.MaxLine {
				_ = idle()
				return fmt.Errorf("fallback: message longer than %d bytes", rpcid.MaxLine)
			}
			continue
		}
		if len(bytes.TrimSpace(line)) > 0 && (err == nil || err == io.EOF) {
			if ferr := fn(line); ferr != nil {
				return ferr
			}
		}
		line = line[:0]
		if err != nil {
			if ierr := idle(); ierr != nil {
				return ierr
			}
			if err == io.EOF {
				return nil
			}
			return err
		}
		if br.Buffered() == 0 {
			if ierr := idle(); ierr != nil {
				return ierr
			}
		}
	}
}
