package postgres

import (
	"testing"
	"time"

	"github.com/countersign/countersign/internal/store/postgres/pgtest"
	"github.com/countersign/countersign/internal/store/storetest"
)

// TestMigrationEndsStaleGrants: migration 0015 revokes the grants an older
// version left live, a grant whose key was revoked and a grant whose
// approver left the account, with their tokens and consent sessions.
func TestMigrationEndsStaleGrants(t *testing.T) {
	url := pgtest.SchemaURL(t)
	db, err := Open(t.Context(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	g := storetest.NewStaleGrants(t, db)
	revokedAt := storetest.Base.Add(time.Hour)
	exec(t, db, `UPDATE agent_keys SET revoked_at = $1 WHERE id = $2`, revokedAt.UnixNano(), g.Key.KeyID)
	exec(t, db, `DELETE FROM memberships WHERE approver_id = $1`, g.LeftApprover)
	// Undo 15 and what came after it, so that the store is as a version
	// before 15 left it.
	for _, q := range []string{
		`DROP TABLE teams_config`, `DROP FUNCTION countersign_teams_changed()`, // 26, the teams configuration
		`DROP FUNCTION countersign_credentials_changed() CASCADE`,                                                         // 25, its triggers with it
		`ALTER TABLE requests DROP COLUMN original`,                                                                       // 24, the original of an edit
		`DROP INDEX requests_call`, `ALTER TABLE requests DROP COLUMN call_id`, `ALTER TABLE requests DROP COLUMN ran_at`, // 23, what ran
		`ALTER TABLE requests DROP COLUMN ran_action`, `ALTER TABLE requests DROP COLUMN ran_args_hash`,
		`DROP TABLE votes`, `ALTER TABLE agent_keys DROP COLUMN created_by`, // 22
		`ALTER TABLE memberships DROP COLUMN role`,                                                                // 21
		`DROP INDEX outbox_pending_created`,                                                                       // 20; 19 goes with the idempotency table
		`ALTER TABLE auto_approve_windows DROP COLUMN stopped_at`, `ALTER TABLE coverages DROP COLUMN stopped_at`, // 18
		`DROP INDEX requests_account_status_created`, `DROP INDEX requests_account_reference`, // 17
		`DROP INDEX requests_done_created`, `DROP INDEX auto_approve_windows_request`, `DROP INDEX outbox_request`,
		`DROP INDEX coverages_request`, `DROP TABLE idempotency`,
		`DROP INDEX oauth_clients_net`, `ALTER TABLE oauth_clients DROP COLUMN registered_net`, // 16
		`DELETE FROM schema_migrations WHERE version >= 15`} {
		exec(t, db, q)
	}
	exec(t, db, `DROP INDEX grants_approver`)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	left := time.Now().Truncate(time.Second)
	g.Check(t, openTest(t, url), revokedAt, left)
}
