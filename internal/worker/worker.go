package worker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"
)

// The environment of a worker process.
const (
	envChild  = "ORCHESTRA_WORKER"        // set (to "1") in a worker
	envMemory = "ORCHESTRA_WORKER_MEMORY" // its heap budget, in bytes
)

// Exit statuses of a worker that stops itself.
const (
	exitCPU      = 3 // an evaluation used up its CPU time
	exitProtocol = 4 // the parent sent something that is not a frame
	exitMemory   = 5 // an evaluation used up its CPU time at its memory limit
)

// Handler evaluates one job in a worker: payload in, reply out. An error is
// the job's own failure (bad input, say): its message reaches the caller as
// a [JobError] and the worker goes on serving.
type Handler func(payload []byte) ([]byte, error)

// Job is one evaluation.
type Job struct {
	// Handler names the handler the worker runs.
	Handler string
	// Payload is the handler's input.
	Payload []byte
	// CPU is the CPU time the evaluation may use, garbage collection
	// included; past it the worker stops. Zero means one second.
	CPU time.Duration
	// MaxReply caps the reply's size; a worker that sends a larger one is
	// killed and the job fails. Zero means 16 MiB.
	MaxReply int
	// Key names the caller the job is for: the jobs of one key hold at
	// most Options.MaxPerKey workers at once. Empty means no caller in
	// particular, and no such cap.
	Key string
}

// MaxErrorBytes caps the message of a JobError: a worker cuts a longer
// one. A job's MaxReply must leave room for it.
const MaxErrorBytes = 16 << 10

// Defaults of a Job's zero fields.
const (
	DefaultCPU      = time.Second
	DefaultMaxReply = 16 << 20
)

// LimitError is an evaluation stopped by one of its limits. The worker
// that ran it is gone; the pool starts another when needed.
type LimitError struct {
	// Limit is "memory" or "cpu".
	Limit string
	// Bytes is the memory budget, for "memory".
	Bytes int64
	// CPU is the CPU time budget, for "cpu".
	CPU time.Duration
}

func (e *LimitError) Error() string {
	if e.Limit == "memory" {
		return fmt.Sprintf("the evaluation needed more than its memory limit of %d bytes", e.Bytes)
	}
	return fmt.Sprintf("the evaluation used more than its CPU time limit of %s", e.CPU)
}

// JobError is the failure a handler returned.
type JobError struct{ Message string }

func (e *JobError) Error() string { return e.Message }

// CrashError is a worker that died for a reason other than its limits,
// or that broke the protocol.
type CrashError struct {
	// Detail says what happened: the exit status and the last words of
	// the worker's standard error.
	Detail string
}

func (e *CrashError) Error() string { return "the worker process failed: " + e.Detail }

// ErrClosed is returned by Pool.Do after Close.
var ErrClosed = errors.New("worker pool is closed")

// IsChild reports whether this process was started as a worker.
func IsChild() bool { return os.Getenv(envChild) != "" }

// A request frame is
//
//	uint32 length of what follows
//	uint8  length of the handler's name, then the name
//	int64  CPU budget in nanoseconds
//	payload
//
// and a reply frame is
//
//	uint32 length of what follows
//	uint8  status: 0 the reply, 1 the handler's error message, with
//	       replyRetiring set when the worker exits after this reply (its
//	       job ran long, or grew its heap by more than half its budget)
//	payload

const (
	replyOK       = 0
	replyErr      = 1
	replyRetiring = 0x80
)

func writeRequest(w io.Writer, job Job) error {
	if len(job.Handler) > 255 {
		return fmt.Errorf("handler name %q is too long", job.Handler)
	}
	n := 1 + len(job.Handler) + 8 + len(job.Payload)
	if uint64(n) > 1<<32-1 {
		return fmt.Errorf("payload of %d bytes is too large for a frame", len(job.Payload))
	}
	head := make([]byte, 0, 4+1+len(job.Handler)+8)
	head = binary.BigEndian.AppendUint32(head, uint32(n))
	head = append(head, byte(len(job.Handler)))
	head = append(head, job.Handler...)
	head = binary.BigEndian.AppendUint64(head, uint64(job.CPU))
	if _, err := w.Write(head); err != nil {
		return err
	}
	_, err := w.Write(job.Payload)
	return err
}

// readRequest reads a request frame of at most max bytes.
func readRequest(r io.Reader, max int64) (Job, error) {
	var job Job
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return job, err
	}
	size := int64(binary.BigEndian.Uint32(n[:]))
	if size > max || size < 1+8 {
		return job, fmt.Errorf("request frame of %d bytes (limit %d)", size, max)
	}
	buf := make([]byte, size)
	if _, err := io.ReadFull(r, buf); err != nil {
		return job, err
	}
	nameLen := int(buf[0])
	if 1+nameLen+8 > len(buf) {
		return job, errors.New("request frame too short")
	}
	job.Handler = string(buf[1 : 1+nameLen])
	job.CPU = time.Duration(binary.BigEndian.Uint64(buf[1+nameLen:]))
	job.Payload = buf[1+nameLen+8:]
	return job, nil
}

func writeReply(w io.Writer, status byte, payload []byte) error {
	head := binary.BigEndian.AppendUint32(make([]byte, 0, 5), uint32(1+len(payload)))
	head = append(head, status)
	if _, err := w.Write(head); err != nil {
		return err
	}
	_, err := w.Write(payload)
	return err
}

// errReplyTooLarge is a reply frame over the job's MaxReply.
type errReplyTooLarge struct{ size, max int64 }

func (e *errReplyTooLarge) Error() string {
	return fmt.Sprintf("the worker replied with %d bytes, more than the limit of %d", e.size, e.max)
}

// readReply reads a reply frame of at most max bytes of payload.
func readReply(r io.Reader, max int) (status byte, payload []byte, err error) {
	var n [5]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return 0, nil, err
	}
	size := int64(binary.BigEndian.Uint32(n[:4])) - 1
	if size < 0 {
		return 0, nil, errors.New("empty reply frame")
	}
	if size > int64(max) {
		return 0, nil, &errReplyTooLarge{size, int64(max)}
	}
	payload = make([]byte, size)
	if _, err := io.ReadFull(r, payload); err != nil {
		return 0, nil, err
	}
	return n[4], payload, nil
}

// memoryBudget reads the worker's heap budget from its environment.
func memoryBudget() int64 {
	n, err := strconv.ParseInt(os.Getenv(envMemory), 10, 64)
	if err != nil || n <= 0 {
		return DefaultMemoryBytes
	}
	return n
}
