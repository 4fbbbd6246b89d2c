package bashscope

import "github.com/countersign/countersign/internal/shellword"

// The environment a hook approval's cover line sets (saferm.EnvApproval
// and saferm.EnvSession name the same variables).
const (
	envApproval = "COUNTERSIGN_APPROVAL"
	envSession  = "COUNTERSIGN_SESSION"
	envAgent    = "COUNTERSIGN_AGENT"
)

// CoverLine is the line the hook puts before an approved Bash command whose
// deletes the approval covers, so that the rm wrapper knows which approval
// and which agent session it runs under, and, for a coding agent other
// than Claude Code ("claude-code", or none), which agent, whose sessions
// the server keeps apart: one export and a newline. The hook writes it,
// and the server takes exactly it, and nothing else, off the command that
// ran when it compares that with the approval.
func CoverLine(approvalID, session, agent string) string {
	line := "export " + envApproval + "=" + approvalID + " " + envSession + "=" + shellword.Quote(session)
	if agent != "" && agent != "claude-code" {
		line += " " + envAgent + "=" + shellword.Quote(agent)
	}
	return line + "\n"
}
