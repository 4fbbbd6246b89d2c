package server_test

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/files"
	"github.com/countersign/countersign/internal/server"
)

// replicaKey is the files-replica key both test replicas share.
var replicaKey = bytes.Repeat([]byte{9}, 32)

// TestInternalUploadOAuth: a call of an OAuth grant that reaches another
// replica gets its upload from the holder: the holder's internal route
// takes the grant's access token as the /mcp endpoint does, and still
// answers another grant's token as for an unknown id.
func TestInternalUploadOAuth(t *testing.T) {
	t.Parallel()
	var holder *files.Store
	e := fSetup(t, oaMCP, func(c *server.Config) {
		l, err := files.NewLocator(replicaKey, "http://"+c.PublicURL.Host)
		if err != nil {
			t.Fatal(err)
		}
		if holder, err = files.Open(files.Config{Locator: l}); err != nil {
			t.Fatal(err)
		}
		c.Files = holder
	})
	l, _ := files.NewLocator(replicaKey, "http://192.0.2.9:8080")
	other, err := files.Open(files.Config{Locator: l})
	if err != nil {
		t.Fatal(err)
	}

	token := func() (string, files.Principal) {
		c := e.registerClient(oaCallback)
		code, _ := e.consent(e.signIn("alice"), e.authzQuery(c))
		st, tok := e.exchange(c, code)
		if st != http.StatusOK {
			t.Fatalf("exchange: %d", st)
		}
		a, err := e.authenticator().AccessAgent(e.Ctx, tok.AccessToken, e.URL+"/mcp", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return tok.AccessToken, files.Principal{Account: a.AccountID, Key: a.KeyID}
	}
	tok, p := token()
	page, err := holder.OpenPage(p, "receipt", nil)
	if err != nil {
		t.Fatal(err)
	}
	up, err := holder.BeginUpload(p.Account, page.ID, int64(len(receipt)), files.MaxUpload)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := up.Finish("r.pdf", receipt)
	if err != nil {
		t.Fatal(err)
	}

	rec, data, err := other.FetchUpload(e.Ctx, p, page.ID, "Bearer "+tok)
	if err != nil || !bytes.Equal(data, receipt) || rec.SHA256 != kept.SHA256 {
		t.Fatalf("the grant's upload from another replica: %v", err)
	}
	tok2, p2 := token()
	if _, _, err := other.FetchUpload(e.Ctx, p2, page.ID, "Bearer "+tok2); err == nil {
		t.Fatal("another grant's token got the upload")
	}
}
