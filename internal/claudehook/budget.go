package claudehook

import (
	"context"
	"fmt"
	"time"

	"mvdan.cc/sh/v3/syntax"
)

// Bounds of the analysis of one Bash call. The hook must answer before
// Claude Code's timeout whatever the command holds, so the analysis is
// bounded in size, depth, work and time; a command beyond a bound is
// denied with the reason, since what it would do could not be checked.
const (
	// maxCommandBytes bounds a command line. Larger contents belong in a
	// file written with the Write tool.
	maxCommandBytes = 256 << 10
	// maxNesting bounds how deeply brackets nest in a script: $(…), (…),
	// {…}, ${…}. The shell parser recurses on each level and the analysis
	// prints each level's words, so depth costs more than length.
	maxNesting = 64
	// maxCommands bounds the simple commands judged in one call.
	maxCommands = 2000
	// maxDeletes bounds the deletes assessed in one call: each one reads
	// the file system and may run git.
	maxDeletes = 64
)

// nesting returns how deeply brackets nest in src, stopping once past
// limit. It is a cheap over-estimate, run before parsing: single-quoted
// text and escaped characters are skipped, everything else counts, so
// brackets inside double quotes and here-documents count too.
func nesting(src string, limit int) int {
	depth, most := 0, 0
	single := false
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case single:
			single = c != '\''
		case c == '\\':
			i++
		case c == '\'':
			single = true
		case c == '(' || c == '{':
			depth++
			if depth > most {
				if most = depth; most > limit {
					return most
				}
			}
		case (c == ')' || c == '}') && depth > 0:
			depth--
		}
	}
	return most
}

// tooDeep reports whether constructs nest more than limit deep in a
// parsed script: command and process substitutions, subshells, groups,
// compound commands, expansions. The pre-scan before parsing can be led
// to count too few (a quoted ")" on every level); this count cannot. A
// chain of && and || is not nesting: the analysis follows it in a loop
// of constant cost per command.
func tooDeep(f *syntax.File, limit int) bool {
	var stack []bool
	depth, over := 0, false
	syntax.Walk(f, func(n syntax.Node) bool {
		if n == nil { // leaving the node on top of the stack
			if stack[len(stack)-1] {
				depth--
			}
			stack = stack[:len(stack)-1]
			return true
		}
		nests := false
		switch n.(type) {
		case *syntax.CmdSubst, *syntax.ProcSubst, *syntax.Subshell, *syntax.Block, *syntax.IfClause,
			*syntax.WhileClause, *syntax.ForClause, *syntax.CaseClause, *syntax.FuncDecl, *syntax.ParamExp,
			*syntax.ArithmExp, *syntax.ArithmCmd, *syntax.ParenArithm, *syntax.TestClause, *syntax.ParenTest,
			*syntax.DblQuoted, *syntax.ExtGlob, *syntax.CoprocClause, *syntax.TimeClause:
			nests = true
			depth++
		}
		stack = append(stack, nests)
		if depth > limit {
			over = true
		}
		return !over
	})
	return over
}

// overBudget reports whether the analysis has to stop, and records why
// the first time: a bound was reached, or the time ran out.
func (a *analyzer) overBudget() bool {
	if a.over != "" {
		return true
	}
	if a.ctx.Err() != nil {
		a.over = "checking it took longer than the hook's deadline allows"
	}
	return a.over != ""
}

// spend counts one simple command (del false) or one delete (del true)
// against the bounds.
func (a *analyzer) spend(del bool) bool {
	if del {
		a.deletes++
	} else {
		a.commands++
	}
	switch {
	case a.overBudget():
	case a.commands > maxCommands:
		a.over = fmt.Sprintf("it holds more than %d commands", maxCommands)
	case a.deletes > maxDeletes:
		a.over = fmt.Sprintf("it holds more than %d deletes, each of which is checked on the file system", maxDeletes)
	}
	return a.over == ""
}

// unchecked is the verdict on a call the analysis could not finish.
func unchecked(why string) Verdict {
	return Verdict{Action: Deny, Reasons: []string{why}, Unchecked: true}
}

// decideBash judges a Bash call within the bounds. The analysis runs
// apart, so that even a step that cannot be interrupted (the parser, a
// system call) cannot hold the answer past the analysis deadline: half
// of the time left before the hook's deadline, so that asking a human
// keeps the other half.
func (p *Policy) decideBash(ctx context.Context, c *Call) Verdict {
	if len(c.Command) > maxCommandBytes {
		return unchecked(fmt.Sprintf("the command is %d KiB long, more than the %d KiB the hook checks; write long contents with the Write tool, or split the command", len(c.Command)>>10, maxCommandBytes>>10))
	}
	if d, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, time.Now().Add(time.Until(d)/2))
		defer cancel()
	}
	done := make(chan Verdict, 1)
	go func() {
		a := &analyzer{ctx: ctx, pol: p, call: c}
		a.script(c.Command, &shState{cwd: c.Cwd}, stdin{})
		if a.overBudget() {
			done <- unchecked(a.over)
			return
		}
		v := p.combine(a.parts, c)
		v.Scope = scopeOf(c, a.parts)
		done <- v
	}()
	select {
	case v := <-done:
		return v
	case <-ctx.Done():
		return unchecked("checking it took longer than the hook's deadline allows")
	}
}
