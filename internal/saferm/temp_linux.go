package saferm

import (
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// birth returns when the file at p was made and its owner, where the file
// system records it (statx's btime).
func birth(p string) (time.Time, int, bool) {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, p, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BTIME|unix.STATX_UID, &st); err != nil {
		return time.Time{}, 0, false
	}
	if st.Mask&unix.STATX_BTIME == 0 || st.Btime.Sec == 0 {
		return time.Time{}, 0, false
	}
	return time.Unix(st.Btime.Sec, int64(st.Btime.Nsec)), int(st.Uid), true
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's start time: 100 on
// every Linux architecture Go builds for.
const clockTicks = 100

// ParentStart returns when the parent process (the shell running rm's
// command line) started, or zero when it cannot be read. It is computed
// from the seconds since boot, which /proc gives to the hundredth, not
// from the boot time, which it gives to the second.
func ParentStart() time.Time {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(os.Getppid()) + "/stat")
	if err != nil {
		return time.Time{}
	}
	// The command name, in parentheses, may hold spaces: fields count
	// from the last ')'. Start time is field 22, the 20th after it.
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return time.Time{}
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 20 {
		return time.Time{}
	}
	ticks, err := strconv.ParseInt(fields[19], 10, 64)
	if err != nil {
		return time.Time{}
	}
	up, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return time.Time{}
	}
	secs, err := strconv.ParseFloat(strings.Fields(string(up) + " x")[0], 64)
	if err != nil {
		return time.Time{}
	}
	now := time.Now()
	// Both clocks count hundredths: take the start 20 ms early, so that
	// a directory made in the shell's first milliseconds is not taken
	// for older than the shell.
	since := time.Duration((secs - float64(ticks)/clockTicks) * float64(time.Second))
	return now.Add(-since).Add(-20 * time.Millisecond)
}
