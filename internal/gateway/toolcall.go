package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/limit"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Confirmer is the confirmation on top of the mirror: it decides whether a
// tools/call whose tier the caller's policy confirms may go on, and runs
// it once a human approved exactly that call. The mirror knows nothing of
// approvals; it hands such a call to the Confirmer and forwards every
// other one itself.
type Confirmer interface {
	// Call confirms the call and runs it with c.Forward once approved,
	// or returns the result that tells why it did not run. An error is
	// the tools/call's own error (invalid params, cancelled).
	Call(ctx context.Context, c *ToolCall) (*mcp.CallToolResult, error)
	// Middleware wraps the handling of every method the client sends,
	// between the mirror's rate limit and its operations: the
	// confirmation answers there a client that could not answer its
	// elicitation.
	Middleware(next mcp.MethodHandler) mcp.MethodHandler
}

// CalledTool is what the confirmation shows and binds of the tool a call
// names.
type CalledTool struct {
	Name        string // exposed: the request's action
	Upstream    string // the upstream's configured name
	Tool        string // the upstream's own name of the tool
	Title       string // as the upstream describes it
	Description string
	Tier        Tier
}

// ToolCall is one tools/call of an exposed tool: who makes it, the tool,
// and what it names of file transfer, found once per call.
type ToolCall struct {
	Request   *mcp.CallToolRequest
	Principal Principal
	Tool      CalledTool

	g     *Gateway
	e     *toolEntry
	files *callFiles // nil until Uploads or Forward looked
}

// callFiles are the uploads a call names, looked up once.
type callFiles struct {
	args map[string]json.RawMessage
	ups  []namedUpload
	err  error
}

// Upload is an upload a call names in a file argument, as the human who
// approves the call sees it.
type Upload struct {
	Arg       string // the argument that names it
	Reference string
	MIME      string
	Size      int64
	SHA256    string
}

// Uploads returns the uploads the call names (file transfer, fileargs.go):
// each the caller's own and of a purpose its argument takes. The error
// says which argument names what, for the model.
func (c *ToolCall) Uploads(ctx context.Context) ([]Upload, error) {
	f := c.uploads(ctx)
	if f.err != nil {
		return nil, f.err
	}
	out := make([]Upload, 0, len(f.ups))
	for _, u := range f.ups {
		out = append(out, Upload{Arg: u.arg, Reference: u.rec.Reference, MIME: u.rec.MIME, Size: u.rec.Size, SHA256: u.rec.SHA256})
	}
	return out, nil
}

// uploads looks the call's uploads up, the first time only.
func (c *ToolCall) uploads(ctx context.Context) *callFiles {
	if c.files == nil {
		args, ups, err := c.g.uploadsOf(ctx, c)
		c.files = &callFiles{args: args, ups: ups, err: err}
	}
	return c.files
}

// Forward calls the upstream's tool and returns its result as the
// gateway's. Only the client's progress token goes upstream (under a token
// of the gateway's), and the upstream's serverInfo does not come back: the
// client talks to countersign. A failed or dead upstream is a tool error,
// and restarts.
func (c *ToolCall) Forward(ctx context.Context) (*mcp.CallToolResult, error) {
	g, e := c.g, c.e
	token, done := g.relay.progress.route(ctx, c.Request, e.up)
	defer done()
	args, removeFiles, ferr := g.substitute(ctx, c)
	if ferr != nil {
		return NotRun("%s did not run: %s.", e.name, Describe(ferr)), nil
	}
	defer removeFiles()
	res, err := e.up.call(ctx, e.tool.Name, args, token)
	if err != nil {
		return upstreamFailed(ctx, e, err)
	}
	if res.NeedsInput() {
		return ToolError("the MCP server %q asked for input, which countersign does not pass on; the call did not complete", e.up.cfg.Name), nil
	}
	if res.Meta != nil {
		out := *res
		out.Meta = maps.Clone(res.Meta)
		delete(out.Meta, mcp.MetaKeyServerInfo)
		res = &out
	}
	return g.keepFiles(ctx, c, res), nil
}

// WithArguments returns the call with other arguments: an approver's
// edit of them, which is then what Forward sends the upstream (and what
// it looks uploads up in). The original call is left as it is.
func (c *ToolCall) WithArguments(args json.RawMessage) *ToolCall {
	req := *c.Request
	params := *req.Params
	params.Arguments = args
	req.Params = &params
	return &ToolCall{Request: &req, Principal: c.Principal, Tool: c.Tool, g: c.g, e: c.e}
}

// upstreamFailed is the answer to a call the upstream failed.
func upstreamFailed(ctx context.Context, e *toolEntry, err error) (*mcp.CallToolResult, error) {
	if ctx.Err() != nil {
		return nil, ctx.Err() // cancelled by the client: nobody reads an answer
	}
	var unavailable errUnavailable
	if errors.As(err, &unavailable) {
		return ToolError("%v. It is being restarted; try the call again in a few seconds.", err), nil
	}
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) {
		return ToolError("the MCP server %q answered with an error: %s", e.up.cfg.Name, rpcErr.Message), nil
	}
	return ToolError("the call to the MCP server %q failed (%v); the server is being restarted, so the call may not have run. Try again in a few seconds.",
		e.up.cfg.Name, err), nil
}

// newProtocolVersion is the first protocol version without server-to-client
// requests: input_required results replace them.
const newProtocolVersion = "2026-07-28"

// NewProtocol reports whether a call comes in a protocol version without
// server-to-client requests (2026-07-28 on).
func NewProtocol(req *mcp.CallToolRequest) bool { return req.ProtocolVersion() >= newProtocolVersion }

// handler is the tool handler of one exposed tool.
func (g *Gateway) handler(e *toolEntry) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		p, err := g.principal(req)
		if err != nil {
			return nil, err
		}
		if err := checkDepth(req.Params.Arguments); err != nil {
			return nil, err
		}
		pol := g.policy(p)
		if !pol.Sees(e.tier) {
			// The same answer as for a tool that does not exist: a key
			// limited to lower tiers learns nothing of the others.
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", e.name)}
		}
		c := &ToolCall{Request: req, Principal: p, Tool: e.called(), g: g, e: e}
		if !pol.Confirms(e.tier) {
			return c.Forward(ctx)
		}
		if g.confirm == nil {
			// Fail closed: nobody could approve the call.
			return NotRun("%s did not run: nobody can approve it here.", e.name), nil
		}
		return g.confirm.Call(ctx, c)
	}
}

// argumentsDepth is how deep a call's arguments sit in its JSON-RPC
// message: {"params":{"arguments":…}}.
const argumentsDepth = 2

// checkDepth refuses arguments that make the call's message nest deeper
// than limit.MaxJSONDepth, before anything decodes, renders or forwards
// them: invalid params, which the client shows as the call's error.
func checkDepth(args json.RawMessage) error {
	if limit.CheckJSONDepthAt(args, argumentsDepth) != nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(
			"the arguments nest objects and arrays deeper than %d levels: a call may nest at most %d, its message's params and arguments counted",
			limit.MaxJSONDepth-argumentsDepth, limit.MaxJSONDepth)}
	}
	return nil
}

// NotRun is an error result of a call that did not run, with an empty
// _meta for the confirmation's status.
func NotRun(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Meta: mcp.Meta{},
		Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

// ToolError is an error result of a call that failed on the upstream side.
func ToolError(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

// Describe is an error as the model should read it: a refusal's message,
// never an internal error's text.
func Describe(err error) string {
	var e *countersign.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return fmt.Sprintf("internal error (%T)", err)
}
