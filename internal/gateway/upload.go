package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/countersign/countersign/internal/files"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// UploadTool is the gateway's own tool that opens an upload page
// (ADR 0008). It is of read tier: it runs nothing upstream.
const UploadTool = "countersign_upload_request"

// FilesConfig is the gateway's file transfer:
//
//	[files]
//	purposes = ["receipt", "einvoice"]   # what countersign_upload_request asks for
//	download_over = 262144               # text, images, audio larger than this become links
//	[files.accept]                       # media types per purpose; none: any
//	receipt = ["application/pdf", "image/*"]
//
//	[[upstream.files]]                   # a file argument of an upstream's tool
//	tool = "voucher_attach"
//	arg = "file"
//	purposes = ["receipt"]
//	as = "path"                          # path | base64 | datauri
type FilesConfig struct {
	Purposes []string            `toml:"purposes"`
	Accept   map[string][]string `toml:"accept"`
	// DownloadOver is the size above which text, image and audio content
	// of a result becomes a download link (0: DefaultDownloadOver).
	DownloadOver int64 `toml:"download_over"`
}

// DefaultDownloadOver is the size above which text, images and audio of
// a result become links.
const DefaultDownloadOver = 256 << 10

// FileArg names an argument of an upstream tool that takes a file.
type FileArg struct {
	Tool     string   `toml:"tool"`
	Arg      string   `toml:"arg"`
	Purposes []string `toml:"purposes"`
	// As is how the upstream gets the bytes: "path" (a decrypted copy in
	// a private folder removed when the call ends; command upstreams
	// only), "base64" or "datauri".
	As string `toml:"as"`
}

// checkFiles validates the file transfer's configuration.
func (c *Config) checkFiles() error {
	for _, p := range c.Files.Purposes {
		if !validName.MatchString(p) {
			return fmt.Errorf("files: purpose %q must be 1 to 32 letters, digits, - or _", p)
		}
	}
	for p, kinds := range c.Files.Accept {
		if !slices.Contains(c.Files.Purposes, p) {
			return fmt.Errorf("files.accept: %q is not one of the purposes %v", p, c.Files.Purposes)
		}
		for _, k := range kinds {
			if !strings.Contains(k, "/") || strings.ContainsAny(k, " ;,\"") {
				return fmt.Errorf("files.accept.%s: %q is not a media type such as application/pdf or image/*", p, k)
			}
		}
	}
	if c.Files.DownloadOver < 0 {
		return fmt.Errorf("files: download_over must not be negative")
	}
	for _, u := range c.Upstreams {
		seen := map[[2]string]bool{}
		for _, f := range u.Files {
			if f.Tool == "" || f.Arg == "" {
				return fmt.Errorf("upstream %q: a file argument needs tool and arg", u.Name)
			}
			// Path mode makes a folder named after the argument in the
			// call's private folder: one plain name, never a path.
			if strings.ContainsAny(f.Arg, `/\`) || f.Arg == "." || f.Arg == ".." {
				return fmt.Errorf("upstream %q: tool %s: arg %q must be the name of one argument, without / or \\", u.Name, f.Tool, f.Arg)
			}
			if seen[[2]string{f.Tool, f.Arg}] {
				return fmt.Errorf("upstream %q: tool %s: the argument %s is named twice; list all its purposes in one entry", u.Name, f.Tool, f.Arg)
			}
			seen[[2]string{f.Tool, f.Arg}] = true
			switch f.As {
			case "path":
				if len(u.Command) == 0 {
					return fmt.Errorf("upstream %q: tool %s: as = \"path\" needs a command upstream on this machine; use \"base64\" or \"datauri\"", u.Name, f.Tool)
				}
			case "base64", "datauri":
			default:
				return fmt.Errorf("upstream %q: tool %s: as must be \"path\", \"base64\" or \"datauri\"", u.Name, f.Tool)
			}
			if len(f.Purposes) == 0 {
				return fmt.Errorf("upstream %q: tool %s: name the purposes the argument %s takes", u.Name, f.Tool, f.Arg)
			}
			for _, p := range f.Purposes {
				if !slices.Contains(c.Files.Purposes, p) {
					return fmt.Errorf("upstream %q: tool %s: purpose %q is not in [files] purposes", u.Name, f.Tool, p)
				}
			}
		}
	}
	return nil
}

// transfer is the gateway's side of file transfer: where files are kept
// and where their pages are.
type transfer struct {
	store  *files.Store
	public string // the public URL, without a trailing slash
	over   int64
}

// UseFiles turns file transfer on: the upload tool (when purposes are
// configured), file arguments and download links. Call it before Start.
func (g *Gateway) UseFiles(store *files.Store, public *url.URL) {
	over := g.cfg.Files.DownloadOver
	if over == 0 {
		over = DefaultDownloadOver
	}
	g.xfer = &transfer{store: store, public: strings.TrimRight(public.String(), "/"), over: over}
	sweepCopies(os.TempDir(), g.log)
	if len(g.cfg.Files.Purposes) == 0 {
		return
	}
	schema := map[string]any{"type": "object", "required": []string{"purpose"}, "additionalProperties": false,
		"properties": map[string]any{"purpose": map[string]any{"type": "string", "enum": g.cfg.Files.Purposes,
			"description": "what the file is for"}}}
	g.server.AddTool(&mcp.Tool{Name: UploadTool, Title: "Ask the user for a file",
		Description: "Opens an upload page where the user uploads one file (at most 20 MiB) in their browser. " +
			"Returns an upload id (upload:<id>), a reference code and the expiry. Ask the user to open the page and upload the file, " +
			"then pass the upload id as the file argument of the tool that needs the file.",
		InputSchema: schema, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptrFalse()}}, g.uploadRequest)
}

func ptrFalse() *bool { f := false; return &f }

// ownTool reports whether name is a tool of the gateway itself, and its
// tier.
func (g *Gateway) ownTool(name string) (Tier, bool) {
	if name == UploadTool && g.xfer != nil && len(g.cfg.Files.Purposes) > 0 {
		return TierRead, true
	}
	return 0, false
}

// filesPrincipal is the files' principal of a gateway principal: the key
// (an OAuth grant owns one) and its account.
func filesPrincipal(p Principal) files.Principal {
	return files.Principal{Account: p.Account, Key: p.ID}
}

// uploadRequest opens an upload page for the caller.
func (g *Gateway) uploadRequest(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	p, err := g.principal(req)
	if err != nil {
		return nil, err
	}
	if !g.policy(p).Sees(TierRead) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", UploadTool)}
	}
	var in struct {
		Purpose string `json:"purpose"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &in); err != nil || !slices.Contains(g.cfg.Files.Purposes, in.Purpose) {
		return ToolError("purpose must be one of %s", strings.Join(g.cfg.Files.Purposes, ", ")), nil
	}
	rec, err := g.xfer.store.OpenPage(filesPrincipal(p), in.Purpose, g.cfg.Files.Accept[in.Purpose])
	if err != nil {
		return ToolError("countersign could not open an upload page: %s", Describe(err)), nil
	}
	link := g.xfer.public + "/uploads/" + url.PathEscape(rec.ID)
	expires := rec.Expires.UTC().Format("2006-01-02T15:04:05Z")
	text := fmt.Sprintf("upload_requested: ask the user to open %s in their browser and upload the %s file there "+
		"(reference %s; the page expires at %s). Once they have, pass \"upload:%s\" as the file argument of the tool that needs it.",
		link, in.Purpose, rec.Reference, expires, rec.ID)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}},
		StructuredContent: map[string]any{"uploadId": "upload:" + rec.ID, "url": link, "reference": rec.Reference, "expiresAt": expires}}, nil
}
