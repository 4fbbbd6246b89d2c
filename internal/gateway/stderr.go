package gateway

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
)

// maxStderrLine bounds one line of an upstream's stderr as it is passed
// on; the rest of a longer line is cut.
const maxStderrLine = 4 << 10

// stderrLines is the stderr of an upstream command, line by line. Each
// line is marked as the upstream's: in the server, a record of the
// server's log at level info with the upstream's name (an upstream that
// says "Error: …" on start reads as that upstream's words, never as a
// failure of countersign); in the stdio gateway, a line "upstream NAME: …"
// on the writer it was given.
type stderrLines struct {
	mu   sync.Mutex
	buf  []byte
	cut  bool // the current line was longer than maxStderrLine
	emit func(line string)
}

// upstreamStderr returns the writer of an upstream's stderr: lines to w,
// marked with name, or records of log when w is nil.
func upstreamStderr(name string, w io.Writer, log *slog.Logger) io.Writer {
	emit := func(line string) { log.Info("upstream stderr", "line", line) }
	if w != nil {
		var mu sync.Mutex
		emit = func(line string) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintf(w, "upstream %s: %s\n", name, line)
		}
	}
	return &stderrLines{emit: emit}
}

func (s *stderrLines) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		part := p
		if i >= 0 {
			part = p[:i]
		}
		if room := maxStderrLine - len(s.buf); len(part) > room {
			s.buf, s.cut = append(s.buf, part[:room]...), true
		} else {
			s.buf = append(s.buf, part...)
		}
		if i < 0 {
			break
		}
		s.flush()
		p = p[i+1:]
	}
	return n, nil
}

// flush passes on the line gathered so far.
func (s *stderrLines) flush() {
	line := strings.ToValidUTF8(strings.TrimRight(string(s.buf), "\r"), "\uFFFD")
	if s.cut {
		line += " …(cut)"
	}
	s.buf, s.cut = s.buf[:0], false
	s.emit(line)
}
