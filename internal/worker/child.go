//go:build unix

package worker

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"syscall"
	"time"
)

// Serve runs this process as a worker with handlers: it sets its own
// limits, answers jobs until its parent closes its standard input, and
// exits. It never returns. Call it first thing in main (and in TestMain)
// when IsChild reports true.
func Serve(handlers map[string]Handler) {
	os.Exit(serve(handlers, os.Stdin, os.Stdout))
}

func serve(handlers map[string]Handler, in io.Reader, out io.Writer) int {
	budget := memoryBudget()
	if err := limitAddressSpace(budget); err != nil {
		fmt.Fprintln(os.Stderr, "worker: setting the address-space limit:", err)
		return 1
	}
	debug.SetMemoryLimit(budget)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heapAtStart := ms.HeapSys
	r := bufio.NewReaderSize(in, 64<<10)
	w := bufio.NewWriterSize(out, 64<<10)
	dog := newWatchdog(budget)
	for {
		job, err := readRequest(r, budget)
		if err == io.EOF {
			return 0
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "worker: reading a request:", err)
			return exitProtocol
		}
		status, reply := byte(replyOK), []byte(nil)
		if h, ok := handlers[job.Handler]; !ok {
			status, reply = replyErr, []byte(fmt.Sprintf("no handler %q in this worker", job.Handler))
		} else {
			cpu := job.CPU
			if cpu <= 0 {
				cpu = DefaultCPU
			}
			dog.start(cpu)
			reply, err = call(h, job.Payload)
			if dog.stop() {
				status |= replyRetiring
			}
			if err != nil {
				msg := err.Error()
				if len(msg) > MaxErrorBytes {
					msg = strings.ToValidUTF8(msg[:MaxErrorBytes-3], "") + "..."
				}
				status, reply = status|replyErr, []byte(msg)
			}
		}
		job.Payload = nil
		// The runtime keeps the address space a job's heap grew to, and
		// how much of it the next job could use depends on how this one
		// left it: a worker whose heap grew by more than half its budget
		// retires, so that every job starts with its whole budget.
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if ms.HeapSys > heapAtStart && ms.HeapSys-heapAtStart > uint64(budget)/2 {
			status |= replyRetiring
		}
		if err := writeReply(w, status, reply); err != nil {
			return 0 // the parent is gone
		}
		if err := w.Flush(); err != nil {
			return 0
		}
		if status&replyRetiring != 0 {
			return 0
		}
		reply = nil
		// A job that built large values leaves them as garbage: give the
		// memory back before the next job, so that it starts with the
		// whole budget.
		if ms.HeapAlloc > uint64(budget)/4 {
			debug.FreeOSMemory()
		}
	}
}

// call runs h, turning a panic into an error.
func call(h Handler, payload []byte) (reply []byte, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("the evaluation panicked: %v", v)
		}
	}()
	return h(payload)
}

// watchdog ends the process when a job has used its CPU time. CPU time,
// not wall time: a job on a loaded machine gets the same amount of work
// done before it is stopped, so what stops a job does not depend on the
// load. (The caller's deadline bounds the wall time.)
//
// A job whose live heap is more than half the memory budget when its CPU
// time runs out is out of memory, not of CPU: past that point the
// collector runs as often as the memory limit makes it (GOMEMLIMIT), the
// closer to the limit the more often, and whether the job's next
// allocation fails before its CPU time runs out is a matter of how the
// collector's work was scheduled. Such a job is reported as out of
// memory either way.
//
// A job that runs past longJob lowers the process's CPU priority to the
// lowest, so that short jobs, in other workers, and the server itself go
// first; a process cannot raise its priority again, so such a worker
// retires after its job.
type watchdog struct {
	memory int64 // the worker's memory budget
	jobs   chan time.Duration
	done   chan bool // reports whether the job ran long
}

// longJob is the CPU time past which a job runs at the lowest priority.
const longJob = 50 * time.Millisecond

func newWatchdog(memory int64) *watchdog {
	d := &watchdog{memory: memory, jobs: make(chan time.Duration), done: make(chan bool)}
	go d.run()
	return d
}

func (d *watchdog) start(budget time.Duration) { d.jobs <- budget }

// stop ends the watch of a job and reports whether it ran long.
func (d *watchdog) stop() bool {
	d.done <- false
	return <-d.done
}

func (d *watchdog) run() {
	t := time.NewTimer(time.Hour)
	t.Stop()
	for budget := range d.jobs {
		start := cpuTime()
		wait := min(budget/2, longJob)
		long := false
		for stopped := false; !stopped; {
			t.Reset(wait)
			select {
			case <-d.done:
				t.Stop()
				stopped = true
			case <-t.C:
				used := cpuTime() - start
				if used >= budget {
					if live, ok := d.liveOverHalf(); ok {
						fmt.Fprintf(os.Stderr, "worker: the job used %s of CPU time with a live heap of %d bytes, more than half its memory limit\n", used.Round(time.Millisecond), live)
						os.Exit(exitMemory)
					}
					fmt.Fprintf(os.Stderr, "worker: the job used %s of CPU time, its limit\n", used.Round(time.Millisecond))
					os.Exit(exitCPU)
				}
				if !long && used >= longJob {
					long = true
					_ = syscall.Setpriority(syscall.PRIO_PROCESS, 0, 19)
				}
				// The process has one P (GOMAXPROCS=1), so its CPU time
				// grows about as fast as the wall clock: halve the rest
				// to stop close to the budget.
				wait = max((budget-used)/2, time.Millisecond)
				if !long {
					wait = min(wait, longJob-used+time.Millisecond)
				}
			}
		}
		d.done <- long
	}
}

// cpuTime is the CPU time this process has used, all threads together.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// liveOverHalf reports whether the job's live heap is more than half the
// memory budget, and its size. When the heap's objects, live or not yet
// swept, fit in half the budget, it is not. Otherwise a collection measures
// it, whatever the collector measured last: that measure may predate the
// job's latest values, or count values the job has let go since (it built a
// large value, reduced it, and loops on the result without allocating
// enough to start a collection). The collection costs at most a mark of the
// budget, for an answer that does not depend on when the collector last ran.
func (d *watchdog) liveOverHalf() (uint64, bool) {
	half := uint64(d.memory) / 2
	live, objects := heapState()
	if objects <= half {
		return live, false
	}
	runtime.GC()
	live, _ = heapState()
	return live, live > half
}

// heapState reads the live heap as the last collection measured it, and
// the bytes of the heap's objects, live or not yet swept.
func heapState() (live, objects uint64) {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	v := func(i int) uint64 {
		if s[i].Value.Kind() == metrics.KindUint64 {
			return s[i].Value.Uint64()
		}
		return 0
	}
	return v(0), v(1)
}
