package testutil

import (
	"flag"
	"runtime"
	"strconv"
)

// WaitingParallel lets perCPU parallel tests run at once for each
// processor, unless -parallel on the command line says how many. It is
// for a TestMain, before m.Run, of a package whose tests mostly wait on
// connections, deadlines, timers or processes: the default, one for each
// processor, leaves a small machine idle while they wait.
func WaitingParallel(perCPU int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(perCPU*runtime.GOMAXPROCS(0)))
	}
}
