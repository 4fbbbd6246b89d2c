// Command filesrv is an MCP server over stdio for the tests of file
// transfer: its tools report the SHA-256 of the file they received (as a
// path, base64 or a data URI) and return files as embedded resources.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	s := mcp.NewServer(&mcp.Implementation{Name: "filesrv", Version: "1"}, nil)
	schema := json.RawMessage(`{"type":"object","properties":{"file":{"type":"string"},"note":{"type":"string"}}}`)
	f := false
	s.AddTool(&mcp.Tool{Name: "digest", Description: "Reports the SHA-256 of a file.", InputSchema: schema,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, digest)
	s.AddTool(&mcp.Tool{Name: "digest_inline", Description: "Reports the SHA-256 of a file sent inline.", InputSchema: schema,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, digest)
	s.AddTool(&mcp.Tool{Name: "digest_uri", Description: "Reports the SHA-256 of a file sent as a data URI.", InputSchema: schema,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, digest)
	s.AddTool(&mcp.Tool{Name: "attach", Description: "Attaches a receipt to a voucher.", InputSchema: schema,
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: &f}}, digest)
	s.AddTool(&mcp.Tool{Name: "export", Description: "Exports a document.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"kind":{"type":"string"},"size":{"type":"integer"}}}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, export)
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "filesrv:", err)
	}
}

func ptr[T any](v T) *T { return &v }

// digest reads what it got: a data URI, an existing path, or base64.
func digest(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct{ File string }
	json.Unmarshal(req.Params.Arguments, &in)
	var data []byte
	via, perm := "", ""
	switch {
	case strings.HasPrefix(in.File, "data:"):
		_, b64, _ := strings.Cut(in.File, ",")
		data, _ = base64.StdEncoding.DecodeString(b64)
		via = "datauri"
	case filepath.IsAbs(in.File):
		var err error
		if data, err = os.ReadFile(in.File); err != nil {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "cannot read " + in.File}}}, nil
		}
		fi, _ := os.Stat(filepath.Dir(filepath.Dir(in.File)))
		via, perm = "path", fmt.Sprintf("%o", fi.Mode().Perm())
	default:
		var err error
		if data, err = base64.StdEncoding.DecodeString(in.File); err != nil {
			via = "plain"
			data = []byte(in.File)
		} else {
			via = "base64"
		}
	}
	sum := sha256.Sum256(data)
	text := fmt.Sprintf("sha256=%s via=%s perm=%s path=%s", hex.EncodeToString(sum[:]), via, perm, in.File)
	if via == "plain" {
		text = fmt.Sprintf("plain=%s", in.File)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil
}

// export returns a document as an embedded resource with a blob: a small
// PDF, an HTML page, or size bytes of zeros.
func export(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		Kind string
		Size int
	}
	json.Unmarshal(req.Params.Arguments, &in)
	blob, mime, uri := []byte("%PDF-1.4\n1 0 obj\n<<>>\nendobj\ntrailer\n<<>>\n%%EOF\n"), "application/pdf", "file:///export/invoice.pdf"
	switch in.Kind {
	case "html":
		blob, mime, uri = []byte("<html><body><script>document.title='pwned'</script>hello</body></html>"), "text/html", "file:///export/page.html"
	case "zeros":
		blob, mime, uri = make([]byte, in.Size), "application/octet-stream", "file:///export/zeros.bin"
	}
	return &mcp.CallToolResult{Content: []mcp.Content{
		&mcp.TextContent{Text: "exported"},
		&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: uri, MIMEType: mime, Blob: blob}},
	}}, nil
}
