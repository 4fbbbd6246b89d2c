package gateway

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/files"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// uploadPrefix marks an argument that names an upload. A local file of
// that name is passed as ./upload:…, which stays a plain path.
const uploadPrefix = "upload:"

// fileArgsOf returns the file arguments configured for a tool.
func (g *Gateway) fileArgsOf(e *toolEntry) []FileArg {
	if g.xfer == nil {
		return nil
	}
	var out []FileArg
	for _, f := range e.up.cfg.Files {
		if f.Tool == e.tool.Name {
			out = append(out, f)
		}
	}
	return out
}

// namedUpload is an upload a call's file argument names.
type namedUpload struct {
	arg  string
	as   FileArg
	rec  *files.Record
	data []byte // fetched from the replica that holds it; nil: this one's
}

// uploadsOf finds the uploads a call names in its file arguments: each
// must be the caller's own and of a purpose the argument takes. Another
// principal's upload answers as an unknown one.
func (g *Gateway) uploadsOf(ctx context.Context, c *ToolCall) (map[string]json.RawMessage, []namedUpload, error) {
	req, p := c.Request, c.Principal
	fa := g.fileArgsOf(c.e)
	if len(fa) == 0 {
		return nil, nil, nil
	}
	var args map[string]json.RawMessage
	if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
		return nil, nil, nil // not an object: the upstream answers it
	}
	var out []namedUpload
	for _, f := range fa {
		var v string
		if json.Unmarshal(args[f.Arg], &v) != nil {
			continue
		}
		id, ok := strings.CutPrefix(v, uploadPrefix)
		if !ok {
			continue // a plain path stays a plain path
		}
		rec, err := g.xfer.store.Upload(filesPrincipal(p), id)
		var data []byte
		if countersign.ErrorCode(err) == countersign.ENOTFOUND {
			// Another replica may hold it; it checks the agent's own
			// credential.
			if _, remote := g.xfer.store.Remote(id); remote {
				rec, data, err = g.xfer.store.FetchUpload(ctx, filesPrincipal(p), id, authorization(req))
			}
		}
		if err != nil {
			return nil, nil, countersign.Errorf(countersign.ErrorCode(err), "the argument %s names %s: %s. Ask for a new upload with %s if it is gone", f.Arg, v, strings.TrimSuffix(Describe(err), "."), UploadTool)
		}
		if !slices.Contains(f.Purposes, rec.Purpose) {
			return nil, nil, countersign.Errorf(countersign.EINVALID, "the argument %s takes a file for %s, but upload %s is for %s. Ask for an upload of the right purpose with %s",
				f.Arg, strings.Join(f.Purposes, " or "), rec.Reference, rec.Purpose, UploadTool)
		}
		out = append(out, namedUpload{arg: f.Arg, as: f, rec: rec, data: data})
	}
	return args, out, nil
}

// substitute gives the upstream the bytes of the uploads a call names, as
// the configuration says: a path to a decrypted copy in a private folder
// (removed by the returned function when the call ends), base64 or a data
// URI. Arguments that name no upload go on as they are.
func (g *Gateway) substitute(ctx context.Context, c *ToolCall) (json.RawMessage, func(), error) {
	f := c.uploads(ctx)
	if f.err != nil || len(f.ups) == 0 {
		return c.Request.Params.Arguments, func() {}, f.err
	}
	args := maps.Clone(f.args)
	copies := &copyDir{}
	for _, u := range f.ups {
		v, err := g.passed(u, copies)
		if err == nil {
			// The audit log holds every use of an upload before the
			// upstream gets its bytes.
			err = g.xfer.store.AuditUsed(ctx, u.rec, c.Principal.ID)
		}
		if err != nil {
			copies.remove()
			return nil, nil, err
		}
		args[u.arg], _ = json.Marshal(v)
		g.log.Info("upload passed to a tool", "tool", c.Tool.Name, "reference", u.rec.Reference, "kind", u.rec.MIME, "size", u.rec.Size, "sha256", u.rec.SHA256)
	}
	out, err := json.Marshal(args)
	if err != nil {
		copies.remove()
		return nil, nil, err
	}
	return out, copies.remove, nil
}

// passed is the value of the argument that names u, as the upstream gets
// it: a path to a copy in copies, base64 or a data URI.
func (g *Gateway) passed(u namedUpload, copies *copyDir) (string, error) {
	data := u.data
	if data == nil {
		var err error
		if data, err = g.xfer.store.Read(u.rec); err != nil {
			return "", countersign.Errorf(countersign.ENOTFOUND, "upload %s can no longer be read: %s", u.rec.Reference, Describe(err))
		}
	}
	switch u.as.As {
	case "path":
		return copies.write(u.arg, u.rec.Name, data)
	case "base64":
		return base64.StdEncoding.EncodeToString(data), nil
	case "datauri":
		return "data:" + u.rec.MIME + ";base64," + base64.StdEncoding.EncodeToString(data), nil
	}
	return "", nil
}

// copyDir is the private folder of one call's decrypted copies, made with
// the first.
type copyDir struct{ dir string }

// write puts a copy of an upload named name, for the argument arg, in the
// folder and returns its path.
func (d *copyDir) write(arg, name string, data []byte) (string, error) {
	if d.dir == "" {
		dir, err := os.MkdirTemp("", copiesPrefix()) // 0700
		if err != nil {
			return "", countersign.Errorf(countersign.EINTERNAL, "make a folder for an upload: %v", err)
		}
		d.dir = dir
	}
	sub := filepath.Join(d.dir, arg)
	path := filepath.Join(sub, name)
	err := os.Mkdir(sub, 0o700)
	if err == nil {
		err = os.WriteFile(path, data, 0o600)
	}
	if err != nil {
		return "", countersign.Errorf(countersign.EINTERNAL, "write an upload for the upstream: %v", err)
	}
	return path, nil
}

// remove removes the folder, when the call ends.
func (d *copyDir) remove() {
	if d.dir != "" {
		os.RemoveAll(d.dir)
	}
}

// keepFiles replaces, for the model, the files an upstream's result
// carries (embedded resources with a blob; text, images and audio larger
// than the configured size) by a download link of the caller's account.
// What does not fit is dropped, and the result says so: nothing is
// evicted.
func (g *Gateway) keepFiles(ctx context.Context, call *ToolCall, res *mcp.CallToolResult) *mcp.CallToolResult {
	if g.xfer == nil || res == nil {
		return res
	}
	var out []mcp.Content
	changed := false
	for _, c := range res.Content {
		f, ok := g.fileOf(c)
		if !ok {
			out = append(out, c)
			continue
		}
		changed = true
		out = append(out, g.keep(ctx, call, f))
	}
	if !changed {
		return res
	}
	cp := *res
	cp.Content = out
	return &cp
}

// resultFile is a file of a tool's result.
type resultFile struct {
	name, mime string
	data       []byte
}

// fileOf tells whether a content item is a file to keep.
func (g *Gateway) fileOf(c mcp.Content) (resultFile, bool) {
	over := int(g.xfer.over)
	switch c := c.(type) {
	case *mcp.EmbeddedResource:
		r := c.Resource
		if r == nil {
			return resultFile{}, false
		}
		name := filepath.Base(r.URI)
		if r.Blob != nil {
			return resultFile{name, r.MIMEType, r.Blob}, true
		}
		if len(r.Text) > over {
			return resultFile{name, r.MIMEType, []byte(r.Text)}, true
		}
	case *mcp.ImageContent:
		if len(c.Data) > over {
			return resultFile{"image", c.MIMEType, c.Data}, true
		}
	case *mcp.AudioContent:
		if len(c.Data) > over {
			return resultFile{"audio", c.MIMEType, c.Data}, true
		}
	case *mcp.TextContent:
		if len(c.Text) > over {
			return resultFile{"text.txt", "text/plain; charset=utf-8", []byte(c.Text)}, true
		}
	}
	return resultFile{}, false
}

// keep stores one file of the result of c and returns what the model gets
// instead.
func (g *Gateway) keep(ctx context.Context, c *ToolCall, f resultFile) mcp.Content {
	p := c.Principal
	size := len(f.data)
	rec, err := g.xfer.store.PutDownload(filesPrincipal(p), f.name, safeMIME(f.mime), f.data)
	if err == nil {
		// A file the audit log does not hold is dropped.
		err = g.xfer.store.AuditKept(ctx, rec, p.ID)
	}
	if err != nil {
		return &mcp.TextContent{Text: fmt.Sprintf("download_failed: %s returned a file of %d bytes, which countersign could not keep: %s. "+
			"Tell the user; the file is not available here.", c.Tool.Name, size, Describe(err))}
	}
	link := g.xfer.public + "/files/" + rec.ID
	body, _ := json.Marshal(map[string]string{"url": link, "reference": rec.Reference,
		"expiresAt": rec.Expires.UTC().Format("2006-01-02T15:04:05Z")})
	return &mcp.TextContent{Text: "download " + string(body) + "\nThe user downloads the file (" + rec.MIME + ", " +
		fmt.Sprint(rec.Size) + " bytes) by opening the link in a browser signed in to countersign."}
}

// safeMIME keeps a media type an upstream named only when it is one; the
// store decides by content otherwise.
func safeMIME(m string) string {
	if m == "" || len(m) > 100 || strings.ContainsAny(m, "\r\n\"\\") || !strings.Contains(m, "/") {
		return ""
	}
	return m
}

// authorization is the Authorization header of the HTTP request a call
// came in, which another replica authenticates again.
func authorization(req *mcp.CallToolRequest) string {
	if req == nil || req.Extra == nil || req.Extra.Header == nil {
		return ""
	}
	return req.Extra.Header.Get("Authorization")
}
